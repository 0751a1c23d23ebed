// Times the wasm build of the planning model in Node's V8 (the engine Chromium uses): median
// of repeated calls, with the ratio to a baseline measured in the same run.
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const bench = require(process.argv[2]);

function median(runs, call) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const value = call();
    times.push(performance.now() - start);
    if (!Number.isFinite(value)) throw new Error('the benchmark returned a non-finite value');
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(runs / 2)];
}

const baseline = median(21, () => bench.amortize_many(100_000));
const mc = median(11, () => bench.monte_carlo(100_000));
const pad = (s, n) => String(s).padEnd(n);
console.log(`${pad('benchmark (wasm32, V8)', 44)}${pad('median', 12)}× baseline`);
console.log(`${pad('baseline: amortize 100 000 inputs', 44)}${pad(baseline.toFixed(2) + ' ms', 12)}1.0`);
console.log(`${pad('Monte Carlo 100 000 samples, 6 inputs', 44)}${pad(mc.toFixed(2) + ' ms', 12)}${(mc / baseline).toFixed(1)}   goal < 100 ms`);
