// Browser test of regression alerts: this machine's real system run, replayed as ten more runs
// of the same node and then one with 30 % less memory bandwidth, raises an alert that the Alerts
// page and the run's page show, and that a person acknowledges without a page load.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { startServer, launch, watchedPage, signIn, hydrated, review } from './harness.mjs';

let env;
let browser;

before(async () => {
  env = await startServer(['system'], ['--instance-type', 'c7i.2xlarge']);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  env?.stop();
});

/** The memcpy measurement a system run's headline is: most threads, then the largest buffer. */
function headline(run) {
  const rank = (m) => [Number(m.parameters.threads ?? 1), Number(m.parameters.bytes ?? 0)];
  const memcpy = run.measurements.filter((m) => m.case === 'memcpy' && m.status === 'ok');
  return memcpy.reduce((a, b) => {
    const [ra, rb] = [rank(a), rank(b)];
    return rb[0] > ra[0] || (rb[0] === ra[0] && rb[1] > ra[1]) ? b : a;
  });
}

test('alerts: a 30 % loss of bandwidth is listed with its baseline, shown on its run, and acknowledged', async () => {
  const { context, page, problems } = await watchedPage(browser, { width: 1280, height: 900 });
  await signIn(page, env.base, env.password, '/alerts');
  await hydrated(page);
  await page.getByText('No regression so far').waitFor();

  // One more real run of this machine, printed rather than uploaded, then replayed as the
  // agent would upload later ones.
  const printed = execFileSync(process.env.HEADROOM_AGENT_BIN,
    ['run', 'system', '--quick', '--instance-type', 'c7i.2xlarge', '--spool', join(env.dataDir, 'spool-alerts')]);
  const stored = JSON.parse(printed.toString());
  const token = readFileSync(join(env.dataDir, 'agent-token'), 'utf8').trim();
  const upload = async (factor, minutes) => {
    const run = structuredClone(stored);
    run.run_id = randomUUID();
    run.started_at_ms += minutes * 60_000;
    run.finished_at_ms += minutes * 60_000;
    const stats = headline(run).stats;
    for (const k of ['mean', 'p50', 'p90', 'p99', 'p999', 'ci95_low', 'ci95_high']) stats[k] *= factor;
    const res = await fetch(`${env.base}/api/v1/runs`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(run),
    });
    assert.equal(res.status, 201, await res.text());
    return run.run_id;
  };
  // A class is judged from its 25th run: 10 to compare with and the 14 just before the run.
  for (let i = 0; i < 30; i++) await upload(1 + (i % 3 - 1) * 0.004, i);
  const regressed = await upload(0.7, 30);

  await page.reload();
  await hydrated(page);
  const row = page.locator('tr.alert');
  await row.waitFor();
  assert.equal(await row.count(), 1);
  assert.match(await row.innerText(), /memcpy bandwidth/);
  assert.match(await row.innerText(), /c7i\.2xlarge · system/);
  // m ÷ v − 1 = 1 ÷ 0.7 − 1, about 42.9 %, against the median of the 17 runs before the newest
  // 14 (the one the harness uploaded and the first 16 replays).
  assert.match(await row.locator('[data-out=worse-by]').innerText(), /^\+4[0-6]\.\d %/);
  assert.match(await row.innerText(), /in this run against a median of .* over 17 earlier runs of the class/);
  assert.match(await row.locator('[data-out=alert-cost]').innerText(), /no report yet/);
  assert.match(await page.locator('[data-out=alert-summary]').innerText(), /1 active · alerts above 10 % worse/);
  await review(page, 'alerts-1280');
  await page.setViewportSize({ width: 390, height: 844 });
  await review(page, 'alerts-390');
  await page.setViewportSize({ width: 1280, height: 900 });

  // Acknowledged in place.
  await row.locator('button[data-act=acknowledged]').click();
  await page.locator('tr.alert [data-out=alert-state]', { hasText: 'acknowledged' }).waitFor();
  assert.match(await page.locator('tr.alert').innerText(), /acknowledged by admin/);

  // The run that raised it says so.
  await page.locator('tr.alert a[href^="/runs/"]').first().click();
  await page.waitForURL(`${env.base}/runs/${regressed}`);
  const notice = page.locator('[data-out=run-alerts]');
  await notice.waitFor();
  assert.match(await notice.innerText(), /memcpy bandwidth on c7i\.2xlarge regressed: \+4[0-6]\.\d % more capacity/);
  await review(page, 'run-alert-1280');
  assert.deepEqual(problems, []);
  await context.close();
});
