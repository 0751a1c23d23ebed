// Browser tests of the planning pages, on the real server with this machine's real
// measurements (system, quant and transport suites of the real agent), in headless Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, watchedPage, signIn, hydrated, review } from './harness.mjs';

let env;
let browser;

before(async () => {
  // The node says which instance type it is, so right-sizing prices it from the catalog.
  env = await startServer(['system', 'quant', 'transport'], ['--instance-type', 'c7i.2xlarge']);
  // A second, later system run: the run page follows memcpy bandwidth across both.
  env.measure(['system'], ['--instance-type', 'c7i.2xlarge']);
  browser = await launch();
});

after(async () => {
  await browser?.close();
  env?.stop();
});

const WIDE = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

async function noNaN(page) {
  const text = await page.locator('main').innerText();
  assert.doesNotMatch(text, /\bNaN\b|\binf\b|undefined/, 'the page shows no NaN');
}

test('planner: the cost per request follows the volume without a page load; bad input is marked at the field', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/planner');
  await hydrated(page);
  const cost = page.locator('[data-out=cost-per-request]');
  const before = await cost.innerText();
  assert.match(before, /^\$0\.000\d+$/);
  // A page load would lose this marker.
  await page.evaluate(() => { window.__stillHere = true; });

  await page.fill('#f-requests', '5M');
  await page.waitForFunction((old) => document.querySelector('[data-out=cost-per-request]')?.textContent !== old, before);
  const after = await cost.innerText();
  assert.notEqual(after, before);
  // 20,000 USD of training over 5M instead of 50M requests: +0.0036 USD per request.
  const dollars = (s) => Number(s.replace(/[$,]/g, ''));
  assert.ok(Math.abs(dollars(after) - dollars(before) - (20000 / 5e6 - 20000 / 50e6)) < 1e-5, `${before} → ${after}`);
  assert.equal(await page.evaluate(() => window.__stillHere), true, 'no page load');
  assert.match(await page.locator('[data-chart=volume] svg').getAttribute('aria-label'), /Cost per request/);
  assert.match(await page.locator('[data-chart=volume]').innerHTML(), /break-even/);
  // Each chart carries its figures as a table (for screen readers, and to read exact values).
  assert.ok(await page.locator('[data-chart=volume] details.chart-data tbody tr').count() >= 41);
  assert.match(await page.locator('[data-out=verdict]').innerText(), /worth it/i);

  await page.fill('#f-requests', '-5');
  const field = page.locator('.field[data-field=requests]');
  await field.locator('.field-error', { hasText: 'must be greater than zero' }).waitFor();
  assert.match(await field.getAttribute('class'), /invalid/);
  assert.match(await page.locator('.problems').innerText(), /Requests per month: must be greater than zero/);
  await noNaN(page);

  await page.fill('#f-requests', '50M');
  await page.check('input[type=checkbox][name=uncertain]');
  await page.locator('svg[aria-label^="What moves the cost per request"]').waitFor();
  assert.match(await page.locator('[data-out=probability]').innerText(), /Probability the optimization saves money each month: \d+ %/);
  assert.match(await page.locator('[data-chart=spend]').innerHTML(), /P10–P90/);
  await noNaN(page);

  // Capacity is bought by the replica-hour: one replica at $2.50/h is $1,825 a month, busy or not.
  await page.uncheck('input[type=checkbox][name=uncertain]');
  await page.check('input[type=checkbox][name=derive]');
  await page.fill('#f-requests', '1M');
  await page.fill('#f-hourly', '2.50');
  await page.fill('#f-throughput', '400');
  await page.locator('[data-out=replicas]', { hasText: /^1 replica$/ }).waitFor();
  assert.equal(await page.locator('[data-out=capacity-monthly]').innerText(), '$1,825.00 a month');
  // $20,000 of training over 1M requests plus $1,825 ÷ 1M of serving: $0.021825, three digits.
  assert.equal(await cost.innerText(), '$0.0218');
  assert.match(await page.locator('[data-out=serving-note]').innerText(), /1 replica × \$2\.50 per hour × 730 hours = \$1,825\.00 a month/);
  await page.fill('#f-min_replicas', '3');
  await page.locator('[data-out=capacity-monthly]', { hasText: '$5,475.00 a month' }).waitFor();
  await noNaN(page);
  // Buying those three replicas, needed all three years: 50 % off for three years saves more
  // a month than 30 % off for one; with no discount nothing is worth committing.
  const buying = page.locator('[data-out=purchase-verdict]');
  await buying.filter({ hasText: 'Commit 3 replicas for 36 months: saves $98,550.00 over the term (50 %) against on demand.' }).waitFor();
  assert.equal(await page.locator('[data-out=commit-12]').innerText(), '3');
  assert.match(await page.locator('[data-out=saving-12]').innerText(), /^\$19,710\.00\s+30 %$/);
  assert.equal(await page.locator('[data-out=on-demand-12]').innerText(), '($5,475.00)');
  assert.match(await page.locator('[data-out=hourly-spot]').innerText(), /^\$1\.00\s+\$0\.000457 of it lost$/);
  await review(page, 'planner-purchase-1280');
  await page.fill('#f-commit1', '0');
  await page.fill('#f-commit3', '0');
  await buying.filter({ hasText: /^Stay on demand/ }).waitFor();
  assert.equal(await page.locator('[data-out=commit-36]').innerText(), '0');
  // A discount of 100 % is refused in the card; the cost per request still answers.
  await page.fill('#f-commit3', '100');
  await buying.filter({ hasText: '3-year commitment discount: must be from 0 to below 100 %' }).waitFor();
  assert.equal(await cost.innerText(), '$0.0255');
  await page.fill('#f-commit1', '30');
  await page.fill('#f-commit3', '50');
  // Owning the three servers instead: $30,000 each over 36 months, 700 W at PUE 1.4 and
  // $0.12/kWh, $150 a month of hosting.
  await page.check('input[type=checkbox][name=own]');
  await page.locator('[data-out=hourly-owned]', { hasText: '$1.46' }).waitFor();
  assert.equal(await page.locator('[data-out=commit-owned]').innerText(), '3 bought');
  // $197,100 on demand against $115,471.58 owned over 36 months; the 3-year commitment still
  // saves more a month, so the verdict stays with it.
  assert.match(await page.locator('[data-out=saving-owned]').innerText(), /^\$81,628\.42\s+41 %$/);
  assert.match(await buying.innerText(), /^Commit 3 replicas for 36 months/);
  assert.match(await page.locator('[data-out=owned-note]').innerText(), /= \$1\.14 of its price over its life \+ \$0\.118 of energy \(715 kWh a month at the facility, power as entered\) \+ \$0\.205 of hosting and support/);
  await review(page, 'planner-owned-1280');
  await page.uncheck('input[type=checkbox][name=own]');
  await noNaN(page);

  // The worked example: $1,000 of training a month over 1M requests is $0.001 a request;
  // distillation at $5,000 more a month that cuts serving from $0.01 to $0.001 saves $9,000
  // gross, $4,000 net.
  await page.uncheck('input[type=checkbox][name=derive]');
  await page.fill('#f-requests', '1M');
  await page.fill('#f-training', '1000');
  await page.fill('#f-retrains', '1');
  await page.fill('#f-serving', '0.01');
  await page.fill('#f-extra', '5000');
  await page.fill('#f-saving', '90');
  await page.locator('[data-out=net]', { hasText: '$4,000.00 a month' }).waitFor();
  assert.equal(await cost.innerText(), '$0.0110');
  assert.equal(await page.locator('[data-out=gross-saving]').innerText(), '$9,000.00 a month');
  assert.equal(await page.locator('[data-out=extra-training]').innerText(), '$5,000.00 a month');
  assert.match(await page.locator('[data-out=verdict]').innerText(), /^Worth it$/);
  assert.equal(await page.locator('[data-out=pays-back]').innerText(), '0.56 months');
  // The uncertainty case on the same inputs: the ranges are centred on them, so the median
  // cost per request is the point answer's within a few percent, and a plan that nets $4,000 a
  // month saves money in most draws.
  await page.check('input[type=checkbox][name=uncertain]');
  // ±40 % of a 90 % saving would reach 100 %; the page asks for a narrower range.
  await page.locator('.problems', { hasText: 'make the range narrower' }).waitFor();
  await page.fill('#f-saving_pm', '10');
  const p50 = page.locator('[data-out=p50-cost]');
  await p50.waitFor();
  const median = Number((await p50.innerText()).replace(/[$,]/g, ''));
  assert.ok(Math.abs(median - 0.011) / 0.011 < 0.03, `P50 ${median} vs the point answer $0.0110`);
  const probability = Number((await page.locator('[data-out=probability]').innerText()).match(/(\d+) %/)[1]);
  assert.ok(probability > 50, `${probability} %`);
  assert.equal(await cost.innerText(), '$0.0110', 'the point answer stays beside it');
  await page.uncheck('input[type=checkbox][name=uncertain]');
  await page.fill('#f-saving', '10');
  await page.locator('[data-out=verdict]', { hasText: 'Not worth it' }).waitFor();
  assert.equal(await page.locator('[data-out=pays-back]').count(), 0, 'no pay-back shown when it never pays back');
  await review(page, 'planner-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'planner-390');
  assert.deepEqual(problems, []);
  await context.close();
});

test('planner: emissions per 1,000 requests from the replicas\' power and a region picked from the grid table', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/planner');
  await hydrated(page);
  // 1,000 requests/s at 400 a replica and 60 %: 5 replicas.
  await page.check('input[type=checkbox][name=derive]');
  await page.fill('#f-requests', '2628M');
  await page.fill('#f-hourly', '2.50');
  await page.fill('#f-throughput', '400');
  await page.locator('[data-out=replicas]', { hasText: /^5 replicas$/ }).waitFor();
  assert.equal(await page.locator('[data-card=carbon]').count(), 0, 'not counted unless asked');
  await page.check('input[type=checkbox][name=carbon]');
  await page.fill('#f-power_w', '300');
  await page.selectOption('#f-power_source', 'measured');
  // Sweden's grid and AWS's PUE, from the shipped table: 5 × 0.3 kW × 1.135 × 730 h =
  // 1,242.8 kWh a month; × 8.8 g = 10.9 kg; over 2,628M requests, 0.00416 g per 1,000.
  await page.selectOption('#f-grid_region', 'aws eu-north-1');
  assert.equal(await page.inputValue('#f-grid'), '8.8');
  assert.equal(await page.inputValue('#f-pue'), '1.135');
  const per1000 = page.locator('[data-out=co2e-per-1000]');
  await per1000.filter({ hasText: '0.00416 g CO2e' }).waitFor();
  assert.equal(await page.locator('[data-out=co2e-month]').innerText(), '10.9 kg CO2e');
  assert.equal(await page.locator('[data-out=energy-month]').innerText(), '1,243 kWh');
  assert.match(await page.locator('[data-out=grid-source]').innerText(), /Sweden: EEA CO2 emission intensity/);
  assert.match(await page.locator('[data-out=carbon-note]').innerText(), /^5 replicas × 300 W \(measured\) × PUE 1\.135 × 730 hours, on a grid of 8\.80 g CO2e per kWh \(aws eu-north-1\)/);
  // Virginia's grid emits 43 times as much: 471 kg a month.
  await page.selectOption('#f-grid_region', 'aws us-east-1');
  await per1000.filter({ hasText: '0.179 g CO2e' }).waitFor();
  assert.equal(await page.locator('[data-out=co2e-month]').innerText(), '471 kg CO2e');
  assert.match(await page.locator('[data-out=grid-source]').innerText(), /EPA eGRID2020/);
  await review(page, 'planner-carbon-1280');
  // A PUE below 1 is refused, naming the field.
  await page.fill('#f-pue', '0.5');
  await page.locator('.problems', { hasText: 'Data centre PUE: must be between 1 and 5' }).waitFor();
  await page.fill('#f-pue', '1.2');
  await page.locator('[data-card=carbon]').waitFor();
  await noNaN(page);
  await page.setViewportSize(PHONE);
  await review(page, 'planner-carbon-390');
  assert.deepEqual(problems, []);
  await context.close();
});

test('planner: what is typed before the bundle loads still answers, as a plain GET form', async () => {
  const { context, page } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/planner');
  // A slow link: the bundle never arrives, so the page stays as the server rendered it.
  await page.route('**/*.wasm', (route) => route.abort());
  await page.goto(`${env.base}/planner`);
  await page.fill('#f-requests', '5M');
  await page.press('#f-requests', 'Enter');
  await page.waitForURL(/[?&]requests=5M/);
  assert.equal(await page.inputValue('#f-requests'), '5M');
  // $20,000 of training over 5M requests plus $0.0001 serving; the checked box stays checked.
  assert.equal(await page.locator('[data-out=cost-per-request]').innerText(), '$0.00410');
  assert.equal(await page.isChecked('input[type=checkbox][name=optimize]'), true);
  assert.equal(await page.isChecked('input[type=checkbox][name=derive]'), false);
  await context.close();
});

test('right-sizing: a recommendation and a Pareto chart from the stored quantization run', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/right-sizing');
  const rec = page.locator('[data-out=recommendation]');
  await rec.waitFor();
  assert.match(await rec.innerText(), /\d+ × c7i\.2xlarge/, 'the measured node is the hardware');
  assert.match(await rec.innerText(), /measured \(run [0-9a-f]{8}\)/);
  assert.match(await page.locator('[data-chart=pareto] svg').getAttribute('aria-label'), /Pareto/);
  assert.ok(await page.locator('table.alternatives tbody tr').count() >= 1);
  assert.match(await page.locator('table.hardware').innerText(), /\$0\.357\/h.*price from price catalog v1 \(AWS EC2/s);
  await hydrated(page);
  // A served model 2,000× the reference model's cost needs more replicas: the cost follows.
  const monthly = await page.locator('[data-out=monthly-cost]').innerText();
  await page.fill('#f-scale', '2000');
  await page.waitForFunction((old) => document.querySelector('[data-out=monthly-cost]')?.textContent !== old, monthly);
  // A tighter SLO than any batch can meet leaves nothing, and the page says so.
  await page.fill('#f-slo', '0.000001');
  await page.getByText('No configuration meets every constraint').waitFor();
  await noNaN(page);
  await page.fill('#f-slo', '5');
  await page.fill('#f-scale', '1');
  await rec.waitFor();
  // Bought on a 1-year commitment: the shipped catalog lists on-demand prices only, and the
  // page says so beside the node rather than pricing it silently.
  await page.selectOption('#f-option', 'one_year');
  await page.locator('table.hardware', { hasText: 'the catalog lists no 1-year commitment price for this type' }).waitFor();
  await page.selectOption('#f-option', 'on_demand');
  await page.locator('table.hardware', { hasText: /\$0\.357\/h.*price from price catalog v1/s }).waitFor();
  await review(page, 'right-sizing-1280');
  // Emissions: this VM has no RAPL, so the measured node's power is unknown and said so; a
  // candidate entered by hand at 40 W has its emissions, and asked for the configuration that
  // emits least, the page recommends it beside the cheapest.
  await page.check('input[type=checkbox][name=carbon]');
  await page.locator('table.hardware', { hasText: 'power not measured' }).waitFor();
  await page.check('input[type=checkbox][name=manual]');
  await page.fill('#f-m_name', 'low-power');
  await page.fill('#f-m_price', '5');
  await page.fill('#f-m_memory', '16');
  await page.selectOption('#f-m_precision', 'fp32');
  await page.fill('#f-m_latency', '0.5');
  await page.fill('#f-m_power', '40');
  await page.selectOption('#f-grid_region', 'gcp europe-north1');
  assert.equal(await page.inputValue('#f-pue'), '1.1');
  await page.selectOption('#f-objective', 'emissions');
  const green = page.locator('[data-out=greenest]');
  await green.waitFor();
  assert.match(await green.innerText(), /Lowest-emission configuration/);
  assert.match(await green.innerText(), /\d+ × low-power/);
  // n replicas × 40 W × 1.1 × 730 h × 133 g/kWh, in kg a month.
  const replicas = Number((await green.locator('.big').innerText()).match(/^(\d+) ×/)[1]);
  const kg = replicas * 0.04 * 1.1 * 730 * 0.133;
  assert.equal(await green.locator('[data-out=co2e]').innerText(), `${kg.toFixed(1)} kg CO2e a month`);
  assert.match(await page.locator('[data-out=recommendation]').innerText(), /c7i\.2xlarge/, 'the cheapest stays beside it');
  assert.match(await page.locator('table.alternatives').innerText(), /power unknown/);
  await noNaN(page);
  await review(page, 'right-sizing-carbon-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'right-sizing-390');
  // A link naming a run that is not a plain load test (an LLM server's, or one edited by
  // hand, here with markup in it): the error links on to the LLM page with the id encoded,
  // and the LLM page says it is not one of its runs either.
  const odd = 'x"><script>window.__bad=1</script>&run=y';
  await page.goto(env.base + '/right-sizing?service=' + encodeURIComponent(odd));
  const onward = page.locator('[data-out=to-llm] a');
  await onward.waitFor();
  assert.equal(await onward.getAttribute('href'), '/llm?run=' + encodeURIComponent(odd).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase()));
  await hydrated(page);
  await onward.click();
  await page.locator('.problems', { hasText: 'is not one of the' }).waitFor();
  assert.equal(await page.evaluate(() => window.__bad), undefined);
  assert.deepEqual(problems, []);
  await context.close();
});

test('llm serving: GPUs and dollars per million tokens follow the workload; a model too large for one GPU says how many it needs', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/llm');
  const gpus = page.locator('[data-out=gpus]');
  await gpus.waitFor();
  assert.match(await page.locator('[data-out=per-million-output]').innerText(), /^\$\d[\d,.]* output$/);
  assert.match(await page.locator('table[data-out=memory]').innerText(), /128\.0 KiB/, 'KV per token of Llama 3 8B in BF16');
  assert.match(await page.locator('[data-chart=llm-latency] svg').getAttribute('aria-label'), /p99 latency/);
  // Every GPU instance type of the shipped catalog, the cheapest first.
  await page.locator('table[data-out=offers]').waitFor();
  assert.match(await page.locator('[data-out=cheapest]').innerText(), /^Cheapest: \S+ \S+ .* a month, \$[\d.,]+ per million output tokens\.$/);
  await hydrated(page);
  await page.evaluate(() => { window.__stillHere = true; });
  // Ten times the requests: more GPUs, without a page load.
  const before = Number((await gpus.innerText()).replace(/,/g, ''));
  await page.fill('#f-requests', '1B');
  await page.waitForFunction((old) => document.querySelector('[data-out=gpus]')?.textContent !== old, String(before));
  const after = Number((await gpus.innerText()).replace(/,/g, ''));
  assert.ok(after > before, `${before} → ${after} GPUs`);
  assert.equal(await page.evaluate(() => window.__stillHere), true, 'no page load');
  // Ranges on the volume and the engine's costs: GPUs and spend between the corners.
  await page.check('input[type=checkbox][name=uncertain]');
  const spread = page.locator('[data-out=spread]');
  await spread.waitFor();
  assert.match(await spread.innerText(), /^With requests ±30 % and every engine cost ±25 % \(the corners of those ranges\): [\d,]+ to [\d,]+ GPUs, \$[\d,.]+ to \$[\d,.]+ a month/);
  // Llama 3 70B in BF16 does not fit one 80 GiB GPU: the page names the degree that does.
  await page.fill('#f-parameters', '70.6B');
  await page.fill('#f-layers', '80');
  await page.locator('.problems', { hasText: '2 GPUs hold' }).waitFor();
  await page.selectOption('#f-tp', '2');
  await gpus.waitFor();
  assert.match(await page.locator('[data-out=replicas]').innerText(), /× 2 GPU\(s\)/);
  // One T4 cannot hold it in BF16, nor in INT4 once allowed; the reason names the precision.
  const t4 = page.locator('table[data-out=offers] tr', { hasText: 'g4dn.xlarge' });
  await t4.filter({ hasText: 'Rejected: does not fit: BF16 weights' }).waitFor();
  await page.selectOption('#f-try_weights', 'int4');
  await t4.filter({ hasText: 'Rejected: does not fit: INT4 weights' }).waitFor();
  await page.fill('#f-ttft_ms', '</textarea><script>alert(1)</script>');
  await page.locator('.field[data-field=ttft_ms] .field-error', { hasText: 'is not a number' }).waitFor();
  await page.fill('#f-ttft_ms', '1000');
  await gpus.waitFor();
  await noNaN(page);
  await review(page, 'llm-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'llm-390');
  // A link chosen to make the sizing slow (4,096 slots, 38,000 short requests a second): the
  // server's render stops at its budget and says so; the browser sizes it once hydrated.
  const slow = '/llm?parameters=1B&layers=16&head_dim=64&context=64&max_slots=4096&requests=100B&input=10&input_cv=5&output=2';
  const served = await (await page.request.get(env.base + slow)).text();
  assert.match(served, /data-out="sizing-in-browser"/);
  assert.doesNotMatch(served, /data-out="gpus"/);
  await page.goto(env.base + slow);
  await hydrated(page);
  await gpus.waitFor({ timeout: 60000 });
  assert.match(await page.locator('[data-out=replicas]').innerText(), /× 1 GPU\(s\), 4096 sequences each$/);
  assert.equal(await page.locator('[data-out=sizing-in-browser]').count(), 0);
  await noNaN(page);
  assert.deepEqual(problems, []);
  await context.close();
});

test('scenarios: save the planner inputs, list them, reopen them', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/planner');
  await hydrated(page);
  await page.fill('#f-requests', '123M');
  await page.fill('#f-training', '45000');
  await page.fill('#scenario-name', 'Launch plan');
  await page.click('button:has-text("Save")');
  await page.getByRole('status').filter({ hasText: 'Saved “Launch plan”' }).waitFor();
  const share = await page.locator('a.share').getAttribute('href');
  assert.match(share, /requests=123M/);

  await page.goto(`${env.base}/scenarios`);
  const link = page.locator('table.scenarios a', { hasText: 'Launch plan' });
  await link.waitFor();
  assert.match(await page.locator('table.scenarios').innerText(), /Planner\s+123\.00 million\s+\$0\.000466\s+admin/);
  await review(page, 'scenarios-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'scenarios-390');
  await page.setViewportSize(WIDE);
  await link.click();
  await page.waitForURL(/\/planner\?/);
  assert.equal(await page.inputValue('#f-requests'), '123M');
  assert.equal(await page.inputValue('#f-training'), '45000');
  assert.equal(await page.inputValue('#scenario-name'), 'Launch plan');
  // 45,000 USD over 123M requests plus 0.0001 serving.
  assert.equal(await page.locator('[data-out=cost-per-request]').innerText(), '$0.000466');

  // The shared link alone carries the inputs.
  await page.goto(`${env.base}${share}`);
  assert.equal(await page.inputValue('#f-requests'), '123M');
  assert.deepEqual(problems, []);
  await context.close();
});

test('transport and run pages: a recommendation with its reason, and the run charts', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/transport');
  const pick = page.locator('[data-out=transport]');
  await pick.waitFor();
  assert.ok((await pick.innerText()).length > 0);
  assert.doesNotMatch(await pick.innerText(), /_/, 'the transport is named in words, not as an identifier');
  assert.ok(await page.locator('table.transports tbody tr').count() >= 3);
  assert.match(await page.locator('[data-chart=transport]').innerHTML(), /floor/);
  await noNaN(page);
  await review(page, 'transport-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'transport-390');
  await page.setViewportSize(WIDE);

  await page.goto(`${env.base}/fleet`);
  await page.locator('tr', { hasText: 'quant' }).locator('a[href^="/runs/"]').click();
  await page.waitForURL(/\/runs\/[0-9a-f-]{36}$/);
  for (const kind of ['bandwidth', 'cdf', 'payload', 'precision', 'trend']) {
    await page.locator(`[data-chart=${kind}] svg`).first().waitFor();
  }
  assert.match(await page.locator('[data-chart=trend]').innerHTML(), /memcpy bandwidth across this node/);
  // The GEMM table: each precision's throughput, its share of the core's measured peak, and
  // ONNX Runtime's figure on the same shape beside it.
  const gemm = page.locator('[data-out=gemm-table]');
  assert.match(await gemm.locator('[data-chart=gemm] svg').getAttribute('aria-label'), /throughput against batch size/);
  assert.match(await gemm.innerText(), /The core's peak, measured in this run: .*int8_/);
  assert.match(await gemm.locator('table.gemm').innerText(), /64 × 1024 × 1024\s+int8\s+packed, \S+\s+[\d.]+\s+\d+ %\s+[\d.]+×/);
  assert.match(await gemm.locator('table.gemm').innerText(), /ONNX Runtime int8\s+MatMulInteger \S+ 1\.31\.1 \(1 thread\)/);
  assert.equal(await page.locator('ul.node-runs li').count(), 2);
  await noNaN(page);
  await review(page, 'run-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'run-390');
  assert.deepEqual(problems, []);
  await context.close();
});

test('admin: the shipped price catalog, a refused import located cell by cell, then a new version', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/admin');
  const version = page.locator('[data-out=catalog-version]');
  await version.waitFor();
  assert.match(await version.innerText(), /^Version 1 — the catalog shipped with Headroom/);
  assert.match(await page.locator('table.prices').innerText(), /p5\.48xlarge\s+8 × NVIDIA H100 80GB/);
  // The shipped prices are from 2024-06-01: flagged as old, each and in a summary.
  assert.match(await page.locator('[data-out=stale-prices]').innerText(), /^\d+ of \d+ prices are more than 180 days old/);
  assert.ok(await page.locator('table.prices td.stale').count() > 0);
  await hydrated(page);
  const csv = await page.inputValue('#catalog-csv');
  await page.fill('#catalog-csv', csv.replace(',1.006,', ',1.0.6,'));
  await page.click('button[data-import=catalog-csv]');
  const alert = page.locator('.problems[role=alert]');
  await alert.waitFor();
  assert.match(await alert.innerText(), /1 problem in the catalog; nothing was imported/);
  assert.match(await alert.innerText(), /line \d+, column hourly_usd: “1\.0\.6” is not an amount in USD/);
  await review(page, 'admin-refused-1280');
  await page.fill('#catalog-csv', csv.replace(',1.006,', ',1.1,'));
  await page.click('button[data-import=catalog-csv]');
  await page.getByRole('status').filter({ hasText: 'Imported version 2' }).waitFor();
  await page.locator('[data-out=catalog-version]', { hasText: 'Version 2 — imported by admin' }).waitFor();
  assert.match(await page.locator('table.prices').innerText(), /g5\.xlarge.*\$1\.10\b/);
  await review(page, 'admin-1280');
  // The grid-intensity table: shipped, a refused import, then a new version (of a region no
  // other test prices in).
  assert.match(await page.locator('[data-out=grid-version]').innerText(), /^Version 1 — the table shipped with Headroom/);
  assert.match(await page.locator('table.grid-intensity').innerText(), /aws\s+us-east-1\s+Virginia, US\s+379\.069\s+1\.135\s+2026-12-06\s+EPA eGRID2020/);
  const grid = await page.inputValue('#grid-csv');
  assert.ok(grid.includes('aws,af-south-1,South Africa,900.6,1.135,'));
  await page.fill('#grid-csv', grid.replace('aws,af-south-1,South Africa,900.6,1.135,', 'aws,af-south-1,South Africa,900.6,0.9,'));
  await page.click('button[data-import=grid-csv]');
  await page.locator('.problems[role=alert]', { hasText: /line 2, column pue: “0\.9” is not a number from 1 to 5/ }).waitFor();
  await page.fill('#grid-csv', grid.replace('aws,af-south-1,South Africa,900.6,', 'aws,af-south-1,South Africa,850,'));
  await page.click('button[data-import=grid-csv]');
  await page.getByRole('status').filter({ hasText: /^Imported version 2: \d+ regions\.$/ }).waitFor();
  await page.locator('[data-out=grid-version]', { hasText: 'Version 2 — imported by admin' }).waitFor();
  assert.match(await page.locator('table.grid-intensity').innerText(), /af-south-1\s+South Africa\s+850\s/);
  await noNaN(page);
  assert.deepEqual(problems, []);
  await context.close();
});

test('reports: a report built from the saved scenario, its total, chart and downloads that add up', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/reports');
  await page.getByText('New report from saved scenarios').waitFor();
  await hydrated(page);
  await page.fill('#report-name', 'November');
  await page.fill('#report-team', '=HYPERLINK("x") search');
  // The dates default to last month; the plan below is for November 2026.
  const lastMonth = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 0));
  assert.equal(await page.inputValue('#report-to'), lastMonth.toISOString().slice(0, 10));
  await page.fill('#report-from', '2026-11-01');
  // A period that ends before it starts cannot be built, and the page says why.
  await page.fill('#report-to', '2026-10-31');
  await page.locator('[data-out=build-why]', { hasText: 'ends before it starts' }).waitFor();
  assert.equal(await page.isDisabled('button:has-text("Build report")'), true);
  await page.fill('#report-to', '2026-11-30');
  await page.waitForFunction(() => document.querySelector('[data-out=build-why]')?.textContent === '');
  assert.equal(await page.isDisabled('button:has-text("Build report")'), false);
  await page.click('button:has-text("Build report")');
  await page.getByRole('status').filter({ hasText: 'Built “November”: 1 deployment,' }).waitFor();
  const total = page.locator('[data-out=report-total]');
  await total.waitFor();
  // The saved plan: 123M requests a month at 0.0001 USD, 45,000 USD training once a month,
  // over the 30 days of November (30 / 30.42 of a billing month of 730 hours).
  const months = 30 / (730 / 24);
  const expected = (123e6 * months * 0.0001) + 45000 * months;
  const shown = Number((await total.innerText()).replace(/[$,]/g, ''));
  assert.ok(Math.abs(shown - expected) < 1, `${shown} vs ${expected}`);
  await page.locator('[data-chart=report] svg').waitFor();
  const href = await page.locator('.downloads a', { hasText: 'CSV' }).first().getAttribute('href');
  const csv = await (await page.request.get(`${env.base}${href}`)).text();
  const lines = csv.trim().split('\n');
  assert.equal(lines.length, 3, 'header, the deployment, TOTAL');
  // The team as typed, neutralised against formulas; who built it, when, from which scenario.
  assert.match(lines[1], /^Launch plan,"'=HYPERLINK\(""x""\) search",/);
  assert.match(lines[2], /^TOTAL,/);
  const header = lines[0].split(',');
  const cell = (line, name) => line.split(',')[header.indexOf(name)];
  assert.equal(cell(lines[1], 'Generated by'), 'admin');
  assert.match(cell(lines[1], 'Generated at (UTC)'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.match(cell(lines[1], 'Scenario id'), /^[0-9a-f-]{36}$/);
  assert.equal(cell(lines[1], 'Report id'), href.split('/').pop().replace('.csv', ''));
  const xlsx = await page.request.get(`${env.base}${href.replace('.csv', '.xlsx')}`);
  assert.equal(xlsx.status(), 200);
  assert.equal((await xlsx.body()).subarray(0, 2).toString(), 'PK', 'an XLSX is a zip');
  await noNaN(page);
  await review(page, 'reports-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'reports-390');
  assert.deepEqual(problems, []);
  await context.close();
});

test('reports: chargeback by team, with idle replicas shared by the stated policy, and its files', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/reports');
  await hydrated(page);
  // A report by the API (signed in as admin): 450 replicas where the volume needs 400 at its SLO
  // (g6.xlarge: the admin test above reprices g5.xlarge).
  const body = {
    name: 'Chargeback', from: '2026-11-01', to: '2026-11-30', idle_policy: 'proportional',
    deployments: [
      { name: 'ranker', team: 'search', cost_centre: 'CC-1', instance_type: 'g6.xlarge', replicas: 450,
        requests_per_month: 2628000000, power_watts: 100, power_source: 'rated',
        sizing: { service_time_s: 0.1, slo_latency_s: 10, max_utilization: 0.5, peak_to_average: 2 } },
      { name: 'chat', team: '</td><script>alert(1)</script>', instance_type: 'g6.xlarge', replicas: 2, needed_replicas: 2,
        requests_per_month: 1000000 },
    ],
  };
  const made = await page.request.post(`${env.base}/api/v1/reports`, { data: body });
  assert.equal(made.status(), 201, await made.text());
  const record = await made.json();
  await page.reload();
  await page.getByRole('heading', { name: 'Chargeback by team' }).waitFor();
  // 50 idle g6.xlarge (0.8048 USD an hour) over November's 720 hours.
  await page.locator('[data-out=idle-policy]', { hasText: '$28,972.80 of serving paid for replicas beyond' }).waitFor();
  assert.match(await page.locator('[data-out=idle-policy]').innerText(), /Policy “proportional”/);
  // 450 replicas × 100 W × AWS's 1.135 × 720 h = 36,774 kWh on us-east-1's 379.069 g/kWh.
  assert.equal(await page.locator('[data-out=report-co2e]').innerText(), '13,940 kg CO2e');
  assert.match(await page.locator('[data-out=report-co2e-note]').innerText(), /^36,774 kWh, \d+\.\d{3} g per 1,000 requests; 1 of 2 deployments gave their power; grid-intensity table v\d+\./);
  const rows = page.locator('table.chargeback tbody tr');
  assert.equal(await rows.count(), 2);
  // Costliest first; a team named like markup is shown as text.
  assert.equal(await rows.nth(0).locator('td').first().innerText(), 'search · CC-1');
  assert.equal(await rows.nth(1).locator('td').first().innerText(), '</td><script>alert(1)</script>');
  await page.locator('[data-chart=chargeback] svg').waitFor();
  const shown = async (i) => Number((await rows.nth(i).locator('td').last().innerText()).replace(/[$,]/g, ''));
  const total = record.total_micro_usd / 1e6;
  assert.ok(Math.abs((await shown(0)) + (await shown(1)) - total) < 0.02, 'the teams add up to the report');
  const href = await page.locator('.downloads a', { hasText: 'CSV' }).last().getAttribute('href');
  assert.equal(href, `/api/v1/reports/${record.id}/chargeback.csv`);
  const csv = await (await page.request.get(`${env.base}${href}`)).text();
  const lines = csv.trim().split('\n');
  assert.equal(lines.length, 4, 'header, two teams, TOTAL');
  assert.match(lines[3], /^TOTAL,/);
  assert.ok(lines.slice(1).every((l) => l.includes(',proportional,')), 'the policy on every line');
  await noNaN(page);
  await review(page, 'chargeback-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'chargeback-390');
  assert.deepEqual(problems, []);
  await context.close();
});

test('budgets: a team budget set on the page, crossed in the month the growing fleet crosses it', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/budgets');
  await hydrated(page);
  // 4 replicas of g6.xlarge growing 10 % a month: ⌈4 × 1.1ᵐ⌉ = 5, 5, 6 … at 0.8048 USD for 730
  // hours: 2,937.52, 2,937.52, 3,525.02 … USD.
  const body = {
    name: 'Growth', from: '2026-11-01', to: '2026-11-30',
    deployments: [{ name: 'ranker', team: 'search', instance_type: 'g6.xlarge', replicas: 4,
      requests_per_month: 100000000, growth_per_month: 0.1 }],
  };
  const made = await page.request.post(`${env.base}/api/v1/reports`, { data: body });
  assert.equal(made.status(), 201, await made.text());
  await page.reload();
  await hydrated(page);
  await page.locator('[data-out=forecast-from]', { hasText: 'From “Growth” (2026-11-01 to 2026-11-30' }).waitFor();
  await page.selectOption('#budget-scope', 'team');
  await page.fill('#budget-name', 'search');
  await page.fill('#budget-amount', '$3,000');
  await page.click('button:has-text("Set budget")');
  await page.getByRole('status').filter({ hasText: 'Budget for team “search”: $3,000.00 a month.' }).waitFor();
  const search = page.locator('table.forecast.team tbody tr', { hasText: 'search' });
  await search.locator('[data-out=crossing]', { hasText: 'over in 2027-02 (month 3)' }).waitFor();
  await page.locator('[data-chart=forecast] svg').waitFor();
  // A budget the page cannot read is refused by name, and nothing changes.
  await page.fill('#budget-amount', 'lots');
  await page.click('button:has-text("Set budget")');
  await page.getByRole('alert').filter({ hasText: 'monthly_usd' }).waitFor();
  assert.equal(await page.locator('table.budgets tbody tr').count(), 1);
  const csv = await (await page.request.get(`${env.base}${await page.locator('.downloads a', { hasText: 'CSV' }).getAttribute('href')}`)).text();
  assert.match(csv.split('\n')[0], /^Scope,Name,Team,Month,Spend \(USD\)/);
  assert.match(csv, /team,search,search,2027-02,3525\.02,3525024000,3000\.00,yes,/);
  await noNaN(page);
  await review(page, 'budgets-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'budgets-390');
  // Deleted from the page, the budget is gone from the forecast.
  await page.click('button[aria-label="Delete the budget of team search"]');
  await search.locator('[data-out=crossing]', { hasText: 'no budget' }).waitFor();
  // The refused amount above is the one 422 this page may answer (and the console's line for it).
  const expected = (p) => /\/srv\/set_budget$/.test(p) || /status of 422 \(Unprocessable Entity\)/.test(p);
  assert.equal(problems.filter(expected).length, 2, problems.join('\n'));
  assert.deepEqual(problems.filter((p) => !expected(p)), []);
  await context.close();
});

test('scenarios: compare two, then rename and delete one', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/planner?requests=246M&training=45000');
  await hydrated(page);
  await page.fill('#scenario-name', 'Doubled');
  await page.click('button:has-text("Save")');
  await page.getByRole('status').filter({ hasText: 'Saved “Doubled”' }).waitFor();

  // The newest two are picked as B and A; the comparison is a plain GET form.
  await page.goto(`${env.base}/scenarios`);
  await hydrated(page);
  await page.click('button:has-text("Compare A with B")');
  await page.waitForURL((url) => url.pathname === '/scenarios/compare' && url.searchParams.get('a') && url.searchParams.get('b'));
  await page.getByRole('heading', { name: '1 input changed' }).waitFor();
  assert.match(await page.locator('[data-out=changed]').innerText(), /Requests per month\s+123M requests\s+246M requests/);
  // 45,000 USD of training over 123M, then 246M requests, plus 0.0001 serving.
  assert.match(await page.locator('[data-out=answers]').innerText(), /Cost per request\s+\$0\.000466\s+\$0\.000283\s+−\$0\.000183/);
  const breakdown = await page.locator('[data-out=breakdown]').innerText();
  assert.match(breakdown, /Requests per month\s+−\$0\.000183\s+100 %/);
  assert.equal(await page.locator('[data-out=breakdown] [data-out=total]').innerText(), '−$0.000183');
  await noNaN(page);
  await review(page, 'compare-1280');
  await page.setViewportSize(PHONE);
  await review(page, 'compare-390');
  await page.setViewportSize(WIDE);

  // Rename, then delete, from the list.
  await page.goto(`${env.base}/scenarios`);
  await hydrated(page);
  const row = page.locator('table.scenarios tr', { hasText: 'Doubled' });
  await row.getByRole('button', { name: 'Rename' }).click();
  await row.getByLabel('New name').fill('Doubled volume');
  await row.getByRole('button', { name: 'Save' }).click();
  const renamed = page.locator('table.scenarios tr', { hasText: 'Doubled volume' });
  await renamed.getByRole('link', { name: 'Doubled volume' }).waitFor();
  await renamed.getByRole('button', { name: 'Delete' }).click();
  await renamed.getByText('Delete “Doubled volume”?').waitFor();
  await review(page, 'scenarios-confirm-1280');
  await renamed.getByRole('button', { name: 'Yes, delete' }).click();
  await renamed.waitFor({ state: 'detached' });
  await page.reload();
  await page.locator('table.scenarios a', { hasText: 'Launch plan' }).waitFor();
  assert.equal(await page.locator('table.scenarios tr', { hasText: 'Doubled' }).count(), 0, 'gone after a reload');
  assert.deepEqual(problems, []);
  await context.close();
});

test('admin: add a person, change their role, issue and revoke their token, issue an agent token', async () => {
  const { context, page, problems } = await watchedPage(browser, WIDE);
  await signIn(page, env.base, env.password, '/admin');
  await hydrated(page);
  const me = (token) => fetch(`${env.base}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });

  // A person with a made-up password, shown once.
  await page.fill('#new-user-name', 'maria');
  await page.selectOption('#new-user-role', 'planner');
  await page.click('button:has-text("Add")');
  const added = page.locator('.secret', { hasText: 'Added maria as planner' });
  await added.waitFor();
  const password = await added.locator('[data-out=secret]').innerText();
  assert.match(password, /^\S{16,}$/);
  const maria = page.locator('table.people tr', { hasText: 'maria' });
  await maria.waitFor();
  assert.equal(await maria.getByLabel('Role of maria').inputValue(), 'planner');

  // A token acting as maria: it works as maria, with her role as it changes.
  await page.selectOption('#token-user', { label: 'maria' });
  await page.click('button:has-text("Issue token")');
  const issued = page.locator('.secret', { hasText: 'acting as maria' });
  await issued.waitFor();
  assert.match(await issued.innerText(), /it expires \d{4}-\d\d-\d\d/);
  const token = await issued.locator('[data-out=secret]').innerText();
  assert.deepEqual(await (await me(token)).json(), { name: 'maria', role: 'planner' });
  await review(page, 'admin-people-1280');
  await maria.getByLabel('Role of maria').selectOption('finance');
  await page.waitForResponse((r) => r.url().endsWith('/srv/set_user_role') && r.ok());
  assert.equal((await (await me(token)).json()).role, 'finance', 'the role applies to her next request');
  await maria.locator('td[data-label="Live API tokens"]', { hasText: '1' }).waitFor();

  // Revoked, it stops at once.
  const row = page.locator('table.tokens tr', { hasText: 'maria' }).filter({ hasText: 'active' });
  await row.getByRole('button', { name: /^Revoke token/ }).click();
  await page.locator('table.tokens tr', { hasText: 'maria' }).filter({ hasText: /revoked \d{4}/ }).waitFor();
  assert.equal((await me(token)).status, 401);

  // An agent token, with the command that uses it on a node.
  await page.fill('#agent-name', 'gpu-node-7');
  await page.click('button:has-text("Issue agent token")');
  const agent = page.locator('.secret', { hasText: 'Token for agent gpu-node-7' });
  await agent.waitFor();
  const agentToken = await agent.locator('[data-out=secret]').innerText();
  assert.equal(await agent.locator('[data-out=command]').innerText(), `HEADROOM_TOKEN='${agentToken}' measurements-agent run --server ${env.base}`);
  await page.locator('table.agents tr', { hasText: 'gpu-node-7' }).filter({ hasText: 'never' }).waitFor();
  await page.setViewportSize(PHONE);
  await review(page, 'admin-people-390');
  await page.setViewportSize(WIDE);

  // Maria signs in with the made-up password; the Admin page shows her the prices only.
  const other = await watchedPage(browser, WIDE);
  await other.page.goto(`${env.base}/admin`);
  await other.page.fill('input[name=name]', 'maria');
  await other.page.fill('input[name=password]', password);
  await other.page.click('button[type=submit]');
  await other.page.waitForURL(`${env.base}/admin`);
  await other.page.locator('[data-out=people-admins-only]').waitFor();
  await other.page.locator('[data-out=catalog-version]').waitFor();
  assert.equal(await other.page.locator('table.people').count(), 0);
  assert.deepEqual(other.problems, []);
  await other.context.close();

  // Removed (after a confirmation), she is gone from the list.
  await maria.getByRole('button', { name: 'Remove' }).click();
  await maria.getByRole('button', { name: 'Yes, remove' }).click();
  await maria.waitFor({ state: 'detached' });
  assert.equal(await page.locator('table.people tr', { hasText: 'maria' }).count(), 0);
  assert.deepEqual(problems, []);
  await context.close();
});
