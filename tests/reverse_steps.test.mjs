// The reverse views computed a step per task (issue 26): the cheapest fixes one estimate per task
// (`solve::fix::FixSearch`), the what-fits rows in up to three tasks (`solve::fits::RowSteps`).
// Stepping must not change what they show: the whole list and every row of a model are the CLI's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { launch, open, pickPreset, setBatch } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

function cli(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', ...args, '--json'], { encoding: 'utf8' }));
}

test('the fixes searched one estimate per task are the CLI\'s five cheapest, in order, with their totals', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('seq-input').fill('1024');
  await setBatch(page, 64);
  await page.waitForFunction(() => document.querySelector('[data-testid=fit-status]')?.dataset.fits === 'false');
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const want = cli('fix', '--gpu', gpu, '--preset', 'gpt2', '--batch', '64', '--seq-len', '1024', '--top', '5');
  await page.getByTestId('fixes').waitFor({ timeout: 60000 });
  const shown = await page.$$eval('[data-testid=fixes] [data-changes]', (els) => els.map((e) => [e.dataset.changes, Number(e.dataset.deviceTotal)]));
  assert.equal(shown.length, 5);
  assert.deepEqual(shown, want.fixes.map((f) => [f.changes.map((c) => c.id).join('+'), f.device_total_bytes]));
  assert.deepEqual(errors, []);
});

test('the full-training table, a row in up to three tasks, has the CLI\'s rows', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'qwen2.5-0.5b');
  const gpu = await page.getByTestId('gpu-select').inputValue();
  await page.getByTestId('fits-table').locator('summary').click();
  await page.getByTestId('fits-workload').selectOption('full');
  await page.waitForFunction(() => {
    const p = document.querySelector('[data-testid=fits-progress]');
    return p && p.dataset.all !== '0' && p.dataset.done === p.dataset.all;
  }, null, { timeout: 300000 });
  const seq = await page.getByTestId('seq-input').inputValue();
  const batch = await page.getByTestId('batch-input').inputValue();
  for (const model of ['qwen2.5-0.5b', 'resnet50']) {
    // the page's batch and length, for every row (as `reverse::fits::options` gives them)
    const want = cli('fits', '--gpu', gpu, '--workload', 'full', '--batch', batch, '--seq-len', seq, '--presets', model);
    const rows = await page.$$eval(`[data-testid=fits-row][data-model="${model}"]`, (els) => els.map((e) =>
      [e.dataset.format, e.dataset.fits, Number(e.dataset.margin), e.dataset.reverse]));
    assert.equal(rows.length, 6, model);
    assert.deepEqual(rows, want.rows.map((r) => [r.format, String(r.fits), r.margin_bytes, String(r.reverse_value ?? '')]), model);
  }
  assert.deepEqual(errors, []);
});
