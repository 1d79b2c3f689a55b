// One core in the browser (issue 23): models the app's build once left to a second module (mixture-
// of-experts, multi-head latent attention, encoder–decoders) are estimated by the app's own core,
// with the CLI's figures.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, open, bytes, waitAttr, setBatch, pickPreset } from './helpers.mjs';

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

test('a MoE model is estimated by the app\'s own core: the CLI\'s figures at once, batch after batch', async () => {
  const { page, errors } = await open(browser);
  await page.getByTestId('paste').locator('summary').click();
  await page.getByTestId('paste-text').fill(JSON.stringify(MOE));
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-ok').waitFor();
  const at32 = cli(32);
  await waitAttr(page, 'params', 'data-count', (v) => v === String(at32.params));
  assert.equal(await bytes(page, 'peak'), at32.peak_bytes, 'peak at batch 32 equals the CLI\'s');
  await setBatch(page, 3);
  await setBatch(page, 5);
  const at5 = cli(5);
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === at5.peak_bytes);
  assert.equal(await page.getByTestId('computing').count(), 0, 'nothing is computed elsewhere');
  await page.getByTestId('whatif').waitFor();
  assert.deepEqual(errors, []);
});

test('an encoder–decoder preset (T5) is estimated in the browser: the CLI\'s parameter count, a peak, no error', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 't5-base');
  const want = JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', '--preset', 't5-base', '--json'],
    { encoding: 'utf8' })).params;
  await waitAttr(page, 'params', 'data-count', (v) => v === String(want), 30000);
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) > 0, 30000);
  assert.deepEqual(errors, []);
  await context.close();
});
