// The lazy route (src/lazy.rs): a model the app's build of the core leaves out (mixture-of-
// experts, multi-head latent attention) is estimated by the lazily loaded module, with the full
// core. "Computing…" shows meanwhile, and the answer to the newest request wins.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, open, URL as APP, bytes, waitAttr, setBatch, holdModule, pickPreset } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const STORAGE_KEY = 'vramcalc.state';
const MOE = {
  name: 'tiny-moe',
  input: { shape: [16, 64] },
  layers: [{ kind: 'repeat', times: 2, body: [{ kind: 'sparse_moe', hidden_size: 64, num_experts: 4, top_k: 2, intermediate_size: 128 }] }],
};

/** `vramcalc estimate --spec … --batch N --json` for MOE (the CLI has the full core). */
function cli(batch) {
  const file = join(mkdtempSync(join(tmpdir(), 'vramcalc-')), 'moe.json');
  writeFileSync(file, JSON.stringify(MOE));
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', '--spec', file, '--batch', String(batch), '--json'],
    { encoding: 'utf8' }));
}

test('a MoE model is estimated by the lazily loaded module: "computing…" meanwhile, then the CLI\'s figures; the newest request wins', async () => {
  const { context, page, errors } = await open(browser);
  // paste it (the paste box reads it with the full core too): the figures are the CLI's
  await page.getByTestId('paste').locator('summary').click();
  await page.getByTestId('paste-text').fill(JSON.stringify(MOE));
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-ok').waitFor();
  const at32 = cli(32);
  await waitAttr(page, 'params', 'data-count', (v) => v === String(at32.params));
  assert.equal(await bytes(page, 'peak'), at32.peak_bytes, 'peak at batch 32 equals the CLI\'s');
  assert.equal(await page.getByTestId('computing').count(), 0);
  await page.waitForFunction((k) => JSON.parse(localStorage.getItem(k) ?? 'null')?.model?.spec?.name === 'tiny-moe', STORAGE_KEY);

  // reopen with the module held back: the saved MoE model waits for it, shown as computing
  const second = await context.newPage();
  second.on('pageerror', (e) => errors.push(String(e)));
  const release = await holdModule(second);
  await second.goto(APP);
  await second.getByTestId('computing').waitFor();
  assert.equal(await second.locator('.col.right').getAttribute('aria-busy'), 'true');
  // two requests while the module loads: their answers arrive oldest first; only the newest shows
  await setBatch(second, 3);
  await setBatch(second, 5);
  release();
  await second.getByTestId('computing').waitFor({ state: 'detached' });
  const at5 = cli(5);
  assert.equal(await bytes(second, 'peak'), at5.peak_bytes, 'batch 5\'s peak, not batch 32\'s or 3\'s');
  await second.waitForTimeout(300);
  assert.equal(await bytes(second, 'peak'), at5.peak_bytes, 'no older answer replaces it later');
  assert.equal(await second.getByTestId('params').getAttribute('data-count'), String(at5.params));
  // what-ifs of a MoE model come from the module too
  await second.getByTestId('whatif').waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

// The module is built with the whole core (crates/web-extras/Cargo.toml): an encoder–decoder
// (core feature `seq2seq`, which the app's own build leaves out) is estimated in the browser too.
// Before, the module lacked the feature and such a preset showed the CLI-only error.
test('an encoder–decoder preset (T5) is estimated by the lazily loaded module: the CLI\'s parameter count, a peak, no error', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 't5-base');
  const want = JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', '--preset', 't5-base', '--json'],
    { encoding: 'utf8' })).params;
  await waitAttr(page, 'params', 'data-count', (v) => v === String(want), 30000);
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) > 0, 30000);
  assert.deepEqual(errors, []);
  await context.close();
});
