// Shared setup for the browser tests: one headless Chromium (Debian's, no download), a fresh
// context per test (empty LocalStorage), page errors collected so a wasm panic fails the test.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

export const URL = process.env.VRAMCALC_URL ?? 'http://127.0.0.1:8080/';
export const ARTIFACTS = process.env.VRAMCALC_ARTIFACTS ?? 'test-artifacts';
mkdirSync(ARTIFACTS, { recursive: true });

export const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
];

export function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/** Opens the app (or `url`) in a page of `context`, by default a fresh one (empty LocalStorage),
 *  and waits for the first chart and for the views whose code is fetched after it (src/split.rs):
 *  each one that arrives moves what is below it, and a click aimed before would land elsewhere. */
export async function open(browser, { viewport = { width: 1440, height: 1000 }, colorScheme = 'light', url = URL, context } = {}) {
  context ??= await browser.newContext({ viewport, colorScheme });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(url);
  await page.getByTestId('chart-capacity').waitFor();
  await page.waitForFunction(() => !document.querySelector('#app .lazy[aria-busy=true]'));
  return { context, page, errors };
}

export async function bytes(page, testid) {
  return Number(await page.getByTestId(testid).getAttribute('data-bytes'));
}

/** Waits until `data-<attr>` of `testid` satisfies `pred`. */
export async function waitAttr(page, testid, attr, pred, timeout = 5000) {
  const start = Date.now();
  let last;
  while (Date.now() - start < timeout) {
    last = await page.getByTestId(testid).first().getAttribute(attr);
    if (pred(last)) return last;
    await page.waitForTimeout(25);
  }
  throw new Error(`${testid}[${attr}] stayed ${last}`);
}

/** Picks preset `id` and waits until its model is shown (a preset other than the default one is
 * built by the lazily loaded module, so it arrives after the pick). */
export async function pickPreset(page, id) {
  await page.getByTestId('preset-select').selectOption(id);
  await page.waitForFunction((id) => document.querySelector('[data-testid=preset-select]').value === id
    && document.querySelector('[data-testid=model-panel]')?.dataset.preset === id, id);
}

export async function setBatch(page, n) {
  await page.getByTestId('batch-input').fill(String(n));
}

export async function shot(page, name, { fullPage = true } = {}) {
  await page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage });
}

/** Kinds of the top-level editor rows, in order. */
export async function topKinds(page) {
  return page.$$eval('[data-testid=layer-row]', (rows) =>
    rows.filter((r) => /^layers\[\d+\]$/.test(r.dataset.path)).map((r) => r.dataset.kind));
}

/** Opens an editor row (large models show their rows closed, one line each). */
export async function openRow(row) {
  if (await row.getAttribute('data-open') !== 'true') await row.locator('.row-handle').click();
  await row.locator('.row-fields').waitFor();
}

/** Whether `e` is Playwright's error for a call on a page, context or browser a test already closed. */
export const isClosedError = (e) => /has been closed/.test(String(e?.message ?? e));

/** `target.route(pattern, handler)` for fake servers. A request the page still has in flight when
 *  its test closes the context (the checkpoint-size read after a hub load, say) makes the handler's
 *  `request.allHeaders()` or `route.fulfill()` reject; node:test would report that as an unhandled
 *  rejection failing the whole file. Such a request has no one left to answer, so it is dropped;
 *  any other error still fails the test. */
export async function routeWhileOpen(target, pattern, handler) {
  await target.route(pattern, async (route) => {
    try {
      await handler(route);
    } catch (e) {
      if (!isClosedError(e)) throw e;
    }
  });
}

/** Holds back every request for the lazily loaded module until the returned function is called. */
export async function holdModule(page) {
  let release;
  const held = new Promise((r) => { release = r; });
  await routeWhileOpen(page, '**/vramcalc-web-extras*', async (r) => { await held; await r.continue(); });
  return release;
}

/** axe-core's violations on the page (WCAG 2.x A/AA and best practices) as readable lines, but
 *  the rules in `skip` (issues 24, 27). */
export async function axeViolations(page, skip = []) {
  const { createRequire } = await import('node:module');
  await page.addScriptTag({ path: createRequire(import.meta.url).resolve('axe-core/axe.min.js') });
  const v = await page.evaluate(async () => (await window.axe.run(document)).violations);
  return v.filter((x) => !skip.includes(x.id)).map((x) => `${x.id} (${x.nodes.length}): ${x.help} — ${x.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
}

/** Picks `preset` in the serve mode (issue 23) and returns the GPU, context and concurrency shown. */
export async function serveSetup(page, preset) {
  await pickPreset(page, preset);
  await page.getByTestId('mode-select').selectOption('serve');
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const context = await page.getByTestId('seq-input').inputValue();
  const concurrency = await page.getByTestId('batch-input').inputValue();
  return { gpu, context, concurrency };
}
