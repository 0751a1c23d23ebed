// Browser test: a person signs in, opens Fleet, and sees this machine measured by the real
// agent, in Debian's headless Chromium. Run by `cargo xtask test` (node --test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, mkdirSync } from 'node:fs';
import { tmpdir, hostname } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { chromium } from 'playwright-core';

const serverBin = process.env.HEADROOM_SERVER_BIN;
const agentBin = process.env.HEADROOM_AGENT_BIN;
const siteRoot = process.env.HEADROOM_SITE_ROOT;
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const screenshots = process.env.HEADROOM_SCREENSHOTS;

let server;
let base;
let dataDir;

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

async function waitReady(url, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server at ${url} not ready within ${ms} ms`);
}

before(async () => {
  assert.ok(serverBin && agentBin && siteRoot, 'run through `cargo xtask test`, which sets the binaries and site');
  dataDir = mkdtempSync(join(tmpdir(), 'headroom-e2e-'));
  const env = { ...process.env, HEADROOM_DATA_DIR: dataDir };
  delete env.DATABASE_URL;
  execFileSync(serverBin, ['admin', 'init-local'], { env });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(serverBin, ['serve', '--listen', `127.0.0.1:${port}`, '--site-root', siteRoot], { env, stdio: 'inherit' });
  await waitReady(base, 30_000);
  const token = readFileSync(join(dataDir, 'agent-token'), 'utf8').trim();
  execFileSync(agentBin, ['run', 'system', '--quick', '--server', base, '--spool', join(dataDir, 'spool')], {
    env: { ...env, HEADROOM_TOKEN: token },
    stdio: 'inherit',
  });
});

after(() => server?.kill('SIGTERM'));

test('sign in, open Fleet, see this machine with its measured memcpy bandwidth', async () => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    for (const viewport of [{ width: 1280, height: 900 }, { width: 390, height: 844 }]) {
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      const problems = [];
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console: ${msg.text()}`); });
      page.on('response', (res) => { if (res.status() >= 400 && !res.url().includes('/login')) problems.push(`HTTP ${res.status()} ${res.url()}`); });

      await page.goto(`${base}/fleet`);
      assert.match(page.url(), /\/login\?next=\/fleet$/, 'anonymous visitors are sent to sign in');
      const password = readFileSync(join(dataDir, 'admin-password'), 'utf8').trim();
      await page.fill('input[name=name]', 'admin');
      await page.fill('input[name=password]', 'wrong password');
      await page.click('button[type=submit]');
      await page.getByRole('alert').waitFor();
      assert.match(await page.getByRole('alert').innerText(), /wrong password/);

      await page.fill('input[name=name]', 'admin');
      await page.fill('input[name=password]', password);
      await page.click('button[type=submit]');
      await page.waitForURL(`${base}/fleet`);
      const card = page.locator('article.node', { hasText: hostname() });
      await card.waitFor();
      assert.equal((await card.locator('h3.hostname').innerText()).trim(), hostname());
      assert.match(await card.locator('dd.memcpy').innerText(), /^\d+(\.\d)? (MB|GB|TB)\/s$/);
      await page.locator('body[data-hydrated=true]').waitFor({ timeout: 15_000 });

      // After hydration, client-side navigation works and says what is not built yet.
      await page.click('nav >> text=Planner');
      await page.getByText('Not built yet').waitFor();
      assert.equal(new URL(page.url()).pathname, '/planner');

      if (screenshots) {
        mkdirSync(screenshots, { recursive: true });
        await page.goto(`${base}/fleet`);
        await card.waitFor();
        await page.screenshot({ path: join(screenshots, `fleet-${viewport.width}.png`), fullPage: true });
      }
      assert.deepEqual(problems, [], 'no errors in the browser console');
      await context.close();
    }
  } finally {
    await browser.close();
  }
});
