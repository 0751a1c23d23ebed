// What every browser test needs: the real server on a free port with a fresh SQLite file,
// the real agent's measurements uploaded to it, Chromium, and sign-in.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { chromium } from 'playwright-core';

const serverBin = process.env.HEADROOM_SERVER_BIN;
const agentBin = process.env.HEADROOM_AGENT_BIN;
const siteRoot = process.env.HEADROOM_SITE_ROOT;
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const screenshots = process.env.HEADROOM_SCREENSHOTS;

export function freePort() {
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

/** Starts the server and uploads one run of `suites` measured on this machine by the agent. */
export async function startServer(suites, agentArgs = []) {
  assert.ok(serverBin && agentBin && siteRoot, 'run through `cargo xtask test`, which sets the binaries and site');
  const dataDir = mkdtempSync(join(tmpdir(), 'headroom-e2e-'));
  const env = { ...process.env, HEADROOM_DATA_DIR: dataDir };
  delete env.DATABASE_URL;
  execFileSync(serverBin, ['admin', 'init-local'], { env });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = spawn(serverBin, ['serve', '--listen', `127.0.0.1:${port}`, '--site-root', siteRoot], { env, stdio: 'inherit' });
  await waitReady(base, 30_000);
  const token = readFileSync(join(dataDir, 'agent-token'), 'utf8').trim();
  /** Measures this machine with the real agent and uploads the run. */
  const measure = (suites, agentArgs = []) =>
    execFileSync(agentBin, ['run', ...suites, '--quick', ...agentArgs, '--server', base, '--spool', join(dataDir, 'spool')], {
      env: { ...env, HEADROOM_TOKEN: token },
      stdio: 'inherit',
    });
  measure(suites, agentArgs);
  const password = readFileSync(join(dataDir, 'admin-password'), 'utf8').trim();
  return { base, server, dataDir, password, measure, stop: () => server.kill('SIGTERM') };
}

export function launch() {
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

/** A page that records console errors, page errors and failed requests in `problems`. */
export async function watchedPage(browser, viewport, { ignore = /\/login/ } = {}) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
    // Leptos warns (in debug builds) when a signal is read where nothing tracks it: the read
    // neither updates the view nor is meant to; each is a bug.
    if (/outside a reactive tracking context/.test(msg.text())) problems.push(`reactive warning: ${msg.text().split('\n')[0]}`);
  });
  page.on('response', (res) => { if (res.status() >= 400 && !ignore.test(res.url())) problems.push(`HTTP ${res.status()} ${res.url()}`); });
  return { context, page, problems };
}

export async function signIn(page, base, password, next = '/fleet') {
  await page.goto(`${base}${next}`);
  await page.fill('input[name=name]', 'admin');
  await page.fill('input[name=password]', password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${base}${next}`);
}

export async function hydrated(page) {
  await page.locator('body[data-hydrated=true]').waitFor({ timeout: 20_000 });
}

/**
 * Reviews the page as it is now, at its current width: axe-core must find no accessibility
 * violation (WCAG 2 A/AA and best practices), then a full-page screenshot is kept for a person.
 */
export async function review(page, name) {
  assert.deepEqual(await axeViolations(page), [], `axe-core on ${name}`);
  if (!screenshots) return;
  mkdirSync(screenshots, { recursive: true });
  // Let a resized page lay out and paint before it is captured.
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
}

/** Accessibility violations axe-core finds on the page as it is now: `rule: selector, …` per rule. */
export async function axeViolations(page) {
  await page.addScriptTag({ path: new URL('./node_modules/axe-core/axe.min.js', import.meta.url).pathname });
  const violations = await page.evaluate(async () => (await window.axe.run(document)).violations);
  return violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 4).map((n) => n.target.join(' ')).join(', ')}${v.nodes.length > 4 ? ` and ${v.nodes.length - 4} more` : ''}`);
}
