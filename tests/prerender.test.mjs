// The first screen as HTML (issue 23, src/bin/prerender.rs): index.html carries the default page
// drawn at build time, so the first chart is on screen before the wasm has arrived; it is a
// picture (inert, its test ids renamed data-pre-testid) that the app replaces when it mounts,
// and it is hidden from the first paint when the page opens a link or saved work, whose
// numbers would differ. The app's wasm is held back to look at the page before it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { launch, URL, bytes, routeWhileOpen } from './helpers.mjs';

const link = readFileSync('tests/data/bench_links.txt', 'utf8').split('\n').find((l) => l.startsWith('llama-8b-serve')).split(' ')[1];
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A page whose app wasm waits until the returned function is called. */
async function held(context) {
  const page = await context.newPage();
  let release;
  const gate = new Promise((r) => { release = r; });
  await routeWhileOpen(page, '**/*_bg.wasm', async (r) => { await gate; await r.continue(); });
  return { page, release };
}

const copy = (page) => page.locator('#app > .prerendered');

test('the default page is on screen before the wasm, and the app replaces it with the same figures', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, release } = await held(context);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(URL);
  const chart = page.locator('[data-pre-testid=chart-capacity]');
  await chart.waitFor({ state: 'visible' });
  assert.equal(await copy(page).getAttribute('inert'), '', 'the copy takes no focus or input');
  assert.equal(await page.getByTestId('chart-capacity').count(), 0, 'no live test id before the app');
  const shown = Number(await page.locator('[data-pre-testid=peak]').getAttribute('data-bytes'));
  assert.ok(shown > 0);
  release();
  await page.getByTestId('chart-capacity').waitFor();
  assert.equal(await copy(page).count(), 0, 'the app mounted over the copy');
  assert.equal(await bytes(page, 'peak'), shown, 'the copy showed the live figure');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a link or saved work hides the copy from the first paint', async () => {
  const context = await browser.newContext();
  let { page, release } = await held(context);
  await page.goto(`${URL}#${link}`);
  await copy(page).waitFor({ state: 'attached' });
  assert.equal(await copy(page).isVisible(), false, 'a link shows its own numbers, not the default');
  release();
  await page.getByTestId('serve-tokens').waitFor();
  // an edit makes the work the user's (saved in LocalStorage); a plain visit then opens it
  await page.getByTestId('batch-input').fill('3');
  await page.waitForFunction(() => localStorage.getItem('vramcalc.state') !== null);
  await page.close();
  ({ page, release } = await held(context));
  await page.goto(URL);
  await copy(page).waitFor({ state: 'attached' });
  assert.equal(await copy(page).isVisible(), false, 'saved work shows its own numbers');
  release();
  await context.close();
});
