// Shared by the pipeline panel's train-mode browser tests (tests/pipeline_kohya.test.mjs,
// tests/pipeline_full.test.mjs): a link opened in a page, the answer's figures and the what-ifs.
import { URL } from './helpers.mjs';

export const realErrors = (errors) => errors.filter((e) => !/Failed to load resource/.test(e));
export const bytes = async (page, id) => Number(await page.getByTestId(id).getAttribute('data-bytes'));
export const peakIs = (page, want) => page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(want));

/** The what-ifs shown, once they are fresh: `{ changes: "id=value,…", peak }`. */
export async function whatIfs(page) {
  await page.waitForFunction(() => document.querySelector('[data-testid=pipe-whatifs]')?.dataset.stale === 'false');
  return page.$$eval('[data-testid=pipe-whatif]', (bs) => bs.map((b) => ({ changes: b.dataset.changes, peak: Number(b.dataset.bytes) })));
}

/** The frozen models on the GPU beside the step, `{ [key]: name, bytes }` (`key` as the CLI's `--json` names it). */
export async function resident(page, key = 'name') {
  return page.$$eval('[data-testid=train-resident]', (li, k) => li.map((l) => ({ [k]: l.dataset.name, bytes: Number(l.dataset.bytes) })), key);
}

/** `hash` opened in a new page of `context`, its errors collected in `errors`. */
export async function linked(context, hash, errors) {
  const p = await context.newPage();
  p.on('pageerror', (e) => errors.push(String(e)));
  p.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await p.goto(URL + hash);
  await p.getByTestId('pipeline-panel').waitFor();
  return p;
}
