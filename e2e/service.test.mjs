// Browser tests of "your service": the real agent load-tests MLServer (installed by
// tools/endpoint-servers/setup.sh, no one here wrote it), uploads the run to the real server, and
// Right-sizing and the Planner answer for that service, with the model's measured error.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, launch, watchedPage, signIn, hydrated, review, freePort } from './harness.mjs';

const servers = process.env.HEADROOM_ENDPOINT_SERVERS;
let env;
let browser;
let mlserver;
let mockLlm;

async function ready(url, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`MLServer at ${url} not ready within ${ms} ms`);
}

before(async () => {
  assert.ok(servers, 'run through `cargo xtask test`, which installs MLServer and sets HEADROOM_ENDPOINT_SERVERS');
  const dir = mkdtempSync(join(tmpdir(), 'headroom-e2e-mlserver-'));
  cpSync(join(servers, 'models', 'digits'), join(dir, 'digits'), { recursive: true });
  const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
  writeFileSync(join(dir, 'settings.json'), JSON.stringify({
    http_port: http, grpc_port: grpc, metrics_port: metrics, host: '127.0.0.1', parallel_workers: 0,
  }));
  mlserver = spawn(join(servers, 'mlserver', 'bin', 'mlserver'), ['start', dir], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${http}`;
  await ready(`${url}/v2/models/digits/ready`, 120_000);
  env = await startServer(['system'], ['--instance-type', 'c7i.2xlarge']);
  // Four open-loop steps well below MLServer's capacity here (about 400/s).
  env.measure(['endpoint'], ['--target', url, '--protocol', 'kserve-v2', '--model', 'digits',
    '--rates', '10,20,40,80', '--duration', '3s', '--warmup', '1s']);
  // GuideLLM's OpenAI-compatible mock, told TTFT 100 ms and ITL 10 ms: an LLM server to pick.
  const llmPort = await freePort();
  mockLlm = spawn(join(servers, 'guidellm', 'bin', 'python'),
    [join(import.meta.dirname, '..', 'tools', 'endpoint-servers', 'mock_llm.py'), String(llmPort), '100', '10', '16'],
    { stdio: 'ignore', env: { ...process.env, HF_HUB_OFFLINE: '1' } });
  const llmUrl = `http://127.0.0.1:${llmPort}`;
  await ready(`${llmUrl}/v1/models`, 60_000);
  env.measure(['endpoint'], ['--target', llmUrl, '--protocol', 'openai-chat', '--rates', '1,2,4',
    '--duration', '3s', '--warmup', '1s', '--max-tokens', '16']);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  env?.stop();
  mlserver?.kill('SIGTERM');
  mockLlm?.kill('SIGTERM');
});

const WIDE = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

/** Picks the measured digits service in the page's "Your service (measured)" select. */
async function pickDigits(page) {
  const option = page.locator('#f-service option', { hasText: 'digits' });
  await option.first().waitFor({ state: 'attached' });
  const value = await option.first().getAttribute('value');
  assert.match(value, /^[0-9a-f-]{36}$/, 'an option is a stored run id');
  await page.selectOption('#f-service', value);
  return value;
}

test('right-sizing: your service, load-tested against MLServer, sized with the model and its measured error', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/right-sizing');
  await hydrated(page);
  const run = await pickDigits(page);
  // The LLM server's load test is not offered as a queue of whole requests: the LLM page sizes it.
  assert.equal(await page.locator('#f-service option', { hasText: 'mock-llm' }).count(), 0);
  await page.fill('#f-svc_price', '2.00');
  // MLServer answers in a few milliseconds here; a 100 ms p99 leaves room to size for.
  await page.fill('#f-slo', '100');
  const rec = page.locator('[data-out=recommendation]');
  await page.getByText('Cheapest configuration of your service').waitFor();
  const text = await rec.innerText();
  assert.match(text, /\d+ × /, 'replicas of the service');
  assert.match(text, /as deployed/);
  assert.match(text, /the M\/G\/c model's; /, 'the latency is the model\'s, said so');
  assert.match(await page.locator('[data-field=service] .hint').innerText(), new RegExp(`Measured by the endpoint suite in run ${run.slice(0, 8)}`));
  // Ten times the volume needs more replicas of the same service, so it costs more.
  const monthly = await page.locator('[data-out=monthly-cost]').innerText();
  const rate = Number(await page.inputValue('#f-rate'));
  await page.fill('#f-rate', String(rate * 10));
  await page.waitForFunction((old) => document.querySelector('[data-out=monthly-cost]')?.textContent !== old, monthly);
  const dollars = (s) => Number(s.replace(/[^0-9.]/g, ''));
  assert.ok(dollars(await page.locator('[data-out=monthly-cost]').innerText()) > dollars(monthly), 'more volume costs more');
  await review(page, 'right-sizing-service-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'right-sizing-service-390');
  assert.deepEqual(problems, []);
  await context.close();
});

test('planner: your service fills throughput, concurrency and variation, and the p99 says where it comes from', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/planner');
  await hydrated(page);
  await page.check('input[type=checkbox][name=derive]');
  await pickDigits(page);
  assert.equal(await page.locator('#f-service option', { hasText: 'mock-llm' }).count(), 0, 'the LLM server is sized on the LLM page');
  const throughput = Number(await page.inputValue('#f-throughput'));
  assert.ok(throughput > 10 && throughput < 100_000, `throughput per replica from the load test: ${throughput}`);
  assert.ok(Number(await page.inputValue('#f-concurrency')) >= 1);
  await page.fill('#f-slo_ms', '200');
  const cv = Number(await page.inputValue('#f-cv'));
  assert.ok(cv > 0 && cv < 5, `variation from the load test: ${cv}`);
  await page.locator('[data-out=p99-note]').waitFor();
  assert.match(await page.locator('[data-out=p99-note]').innerText(), /M\/G\/c model calibrated on digits/);
  assert.match(await page.locator('[data-out=serving-note]').innerText(), /measured for digits/);
  await review(page, 'planner-service-1280');
  assert.deepEqual(problems, []);
  await context.close();
});

test('run page: the load test beside the model, with how it was calibrated and its measured error', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/right-sizing');
  await hydrated(page);
  const run = await pickDigits(page);
  await page.goto(`${env.base}/runs/${run}`);
  const check = page.locator('section[data-out=endpoint-check]');
  await check.waitFor();
  const text = await check.innerText();
  assert.match(text, /Your service under load/);
  // The default fit is the tail's, and the page says so beside the histogram's own variation.
  assert.match(text, /coefficient of variation \d+\.\d\d, fitted to that step's p99; its histogram's is \d+\.\d\d, from step \d\)/);
  // Four steps well below capacity: three besides the calibration step count toward the error.
  assert.match(await page.locator('[data-out=model-error]').innerText(), /off by \d+ % on average over the [1-3] steps below 80 % utilisation/);
  assert.equal(await page.locator('table.endpoint-steps tbody tr').count(), 4, 'a row per step');
  // Whether each counted step's P99 lies where chance alone would put it, were the model right.
  assert.match(await page.locator('[data-out=model-noise]').innerText(), /(Every one of the [1-3] steps counted has its P99 inside|[1-3] of the [1-3] steps counted have their P99 outside) the band it would fall in 90 times in 100/);
  assert.match(await page.locator('table.endpoint-steps tbody tr').nth(1).innerText(), /ms, (inside|above|below)/);
  assert.equal(await page.locator('[data-chart=endpoint] svg').count(), 1, 'the chart of measurement against model');
  // Every column in view at 1280 px, none behind a scroll bar.
  const overflow = await page.locator('table.endpoint-steps').evaluate((t) => t.scrollWidth - t.parentElement.clientWidth);
  assert.ok(overflow <= 0, `the steps table is ${overflow} px wider than its card at 1280 px`);
  await review(page, 'run-endpoint-1280');
  assert.deepEqual(problems, []);
  await context.close();
});

test('llm serving: a load test of an OpenAI-compatible server, picked, sizes with the engine fitted on it and says its error', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/llm');
  await hydrated(page);
  const option = page.locator('#f-run option', { hasText: 'mock-llm' });
  await option.first().waitFor({ state: 'attached' });
  const run = await option.first().getAttribute('value');
  assert.match(run, /^[0-9a-f-]{36}$/, 'an option is a stored run id');
  await page.selectOption('#f-run', run);
  // The engine's own fields give way to the fitted figures, which the hint states.
  await page.locator('#f-fixed_ms').waitFor({ state: 'detached' });
  assert.match(await page.locator('[data-out=run-hint]').innerText(), /^Fitted when the run was stored: .* fixed, .* per sequence, prompts read at [\d,]+ tokens\/s, with \d+ slots \((as the server reported them|as the agent was told \(--slots\)|assumed: the server did not report its own); the plan batches as many as the field below allows\); /);
  const source = page.locator('[data-out=engine-source]');
  await source.waitFor();
  assert.match(await source.innerText(), new RegExp(`^Engine fitted on run ${run.slice(0, 8)} of mock-llm at http://127\\.0\\.0\\.1:\\d+; `));
  assert.match(await page.locator('[data-out=gpus]').innerText(), /^\d[\d,]*$/);
  await review(page, 'llm-measured-1280');
  // The run page shows the same fit, made when the run was stored.
  await page.goto(`${env.base}/runs/${run}`);
  await page.locator('[data-out=llm-engine]').waitFor();
  assert.match(await page.locator('[data-out=llm-engine]').innerText(), /^Fitted from step \d/);
  const overflow = await page.locator('table.llm-steps').evaluate((t) => t.scrollWidth - t.parentElement.clientWidth);
  assert.ok(overflow <= 0, `the LLM steps table is ${overflow} px wider than its card at 1280 px`);
  // Below it the requests end to end, measured only: no queue of whole requests beside the LLM model.
  assert.equal(await page.locator('[data-out=endpoint-check]').count(), 0);
  assert.equal(await page.locator('table.end-to-end-steps tbody tr').count(), 3);
  await review(page, 'run-llm-1280');
  assert.deepEqual(problems, []);
  await context.close();
});
