// Browser test: a person signs in, opens Fleet, and sees this machine measured by the real
// agent, in Debian's headless Chromium. Run by `cargo xtask test` (node --test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { startServer, launch, watchedPage, review, hydrated } from './harness.mjs';

let env;
let base;

before(async () => {
  env = await startServer(['system']);
  base = env.base;
});

after(() => env?.stop());

test('sign in, open Fleet, see this machine with its measured memcpy bandwidth', async () => {
  const browser = await launch();
  try {
    for (const viewport of [{ width: 1280, height: 900 }, { width: 390, height: 844 }]) {
      const { context, page, problems } = await watchedPage(browser, viewport);

      await page.goto(`${base}/fleet`);
      assert.match(page.url(), /\/login\?next=\/fleet$/, 'anonymous visitors are sent to sign in');
      const password = env.password;
      await page.fill('input[name=name]', 'admin');
      await page.fill('input[name=password]', 'wrong password');
      await page.click('button[type=submit]');
      await page.getByRole('alert').waitFor();
      assert.match(await page.getByRole('alert').innerText(), /wrong password/);
      await review(page, `login-${viewport.width}`);

      await page.fill('input[name=name]', 'admin');
      await page.fill('input[name=password]', password);
      await page.click('button[type=submit]');
      await page.waitForURL(`${base}/fleet`);
      const card = page.locator('article.node', { hasText: hostname() });
      await card.waitFor();
      assert.equal((await card.locator('h3.hostname').innerText()).trim(), hostname());
      assert.match(await card.locator('dd.memcpy').innerText(), /^\d+(\.\d)? (MB|GB|TB)\/s$/);
      await hydrated(page);
      await review(page, `fleet-${viewport.width}`);

      // After hydration, navigation happens in the browser.
      await page.evaluate(() => { window.__stillHere = true; });
      await page.click('nav >> text=Planner');
      await page.locator('[data-out=cost-per-request]').waitFor();
      assert.equal(new URL(page.url()).pathname, '/planner');
      assert.equal(await page.evaluate(() => window.__stillHere), true, 'no page load');
      assert.deepEqual(problems, [], 'no errors in the browser console');
      await context.close();
    }
  } finally {
    await browser.close();
  }
});
