// The reverse views (issue 26): the largest value that fits for the mode, the cheapest fixes
// in the what-if panel, what fits the GPU, the command that runs the setup and measuring it
// yourself. Figures are the CLI's (`vramcalc max`, `fix`, `fits`, `launch`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { launch, open, pickPreset, setBatch, waitAttr, serveSetup } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

function cli(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', ...args, '--json'], { encoding: 'utf8' }));
}

test('the largest batch and sequence length that fit are the CLI\'s `vramcalc max`, and Use sets them', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await setBatch(page, 4);
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const seq = await page.getByTestId('seq-input').inputValue();
  for (const of of ['batch', 'seq-len']) {
    const want = cli('max', '--of', of, '--gpu', gpu, '--preset', 'gpt2', '--batch', '4', '--seq-len', seq);
    await waitAttr(page, `largest-${of}`, 'data-value', (v) => v === String(want.value), 30000);
  }
  // generate mode asks for the prompt and the new tokens
  await page.getByTestId('mode-select').selectOption('generate');
  const want = cli('max', '--of', 'new-tokens', '--gpu', gpu, '--preset', 'gpt2', '--batch', '4', '--mode', 'generate', '--prompt-len', seq);
  await waitAttr(page, 'largest-new-tokens', 'data-value', (v) => v === String(want.value), 30000);
  await page.getByTestId('largest-prompt-len').waitFor();
  // Use sets the value in the state
  await page.getByTestId('use-largest-new-tokens').click();
  await page.waitForFunction((v) => document.querySelector('[data-testid=new-tokens]')?.value === v, String(want.value));
  assert.deepEqual(errors, []);
});

test('serving asks for vLLM\'s context and concurrency; its command is `vllm serve` with the same settings', async () => {
  const { page, errors } = await open(browser);
  const { gpu, context, concurrency } = await serveSetup(page, 'gpt2');
  const want = cli('max', '--of', 'concurrency', '--gpu', gpu, '--preset', 'gpt2', '--context', context);
  await waitAttr(page, 'largest-concurrency', 'data-value', (v) => v === String(want.value), 30000);
  await page.getByTestId('largest-context').waitFor();
  const argv = (await page.getByTestId('launch-vllm-text').textContent()).split(' ');
  const flag = (k) => argv[argv.indexOf(k) + 1];
  assert.deepEqual(argv.slice(0, 3), ['vllm', 'serve', 'openai-community/gpt2']);
  assert.equal(flag('--max-model-len'), context);
  assert.equal(flag('--max-num-seqs'), concurrency);
  // the CLI's launch line for the same setup
  const line = cli('launch', '--for', 'vllm', '--preset', 'gpt2', '--gpu', gpu, '--context', context, '--concurrency', concurrency);
  for (const k of ['--max-model-len', '--gpu-memory-utilization', '--max-num-seqs', '--dtype']) {
    assert.equal(flag(k), line.argv[line.argv.indexOf(k) + 1], k);
  }
  assert.deepEqual(errors, []);
});

test('a setup that does not fit lists the cheapest fixes (the CLI\'s `vramcalc fix`); Apply makes it fit', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('seq-input').fill('1024');
  await setBatch(page, 64);
  await page.waitForFunction(() => document.querySelector('[data-testid=fit-status]')?.dataset.fits === 'false');
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const want = cli('fix', '--gpu', gpu, '--preset', 'gpt2', '--batch', '64', '--seq-len', '1024', '--top', '5');
  await page.getByTestId('fixes').waitFor({ timeout: 30000 });
  // searched one estimate per task (`fix::FixSearch`): the whole list is the CLI's, in order
  const shown = await page.$$eval('[data-testid=fixes] [data-changes]', (els) => els.map((e) => [e.dataset.changes, Number(e.dataset.deviceTotal)]));
  assert.equal(shown.length, 5);
  assert.deepEqual(shown, want.fixes.map((f) => [f.changes.map((c) => c.id).join('+'), f.device_total_bytes]));
  const first = page.getByTestId('fix-0');
  // one what-if system: the fixes sit in the what-if panel with the single changes
  assert.equal(await page.getByTestId('whatif').getByTestId('fixes').count(), 1);
  await first.click();
  await page.waitForFunction(() => document.querySelector('[data-testid=fit-status]')?.dataset.fits === 'true', null, { timeout: 30000 });
  assert.deepEqual(errors, []);
});

test('where no single change fits, the sticky verdict offers the cheapest set of changes, and one click takes it', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('seq-input').fill('1024');
  await setBatch(page, 256);
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const pair = cli('fix', '--gpu', gpu, '--preset', 'gpt2', '--batch', '256', '--seq-len', '1024');
  const set = pair.fixes[0].changes.map((c) => c.id).join('+');
  assert.ok(set.includes('+'), set);
  await waitAttr(page, 'fix-set', 'data-changes', (v) => v === set, 30000);
  assert.equal(await page.getByTestId('fix-whatif').count(), 0, 'no single change fits');
  await page.getByTestId('fix-set').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=fit-status]')?.dataset.fits === 'true', null, { timeout: 30000 });
  assert.deepEqual(errors, []);
});

test('"what fits my GPU" fills row by row with the CLI\'s rows; a row opens its estimate', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'qwen2.5-0.5b');
  await page.getByTestId('mode-select').selectOption('finetune');
  const gpu = await page.getByTestId('gpu-select').inputValue();
  await page.getByTestId('fits-table').locator('summary').click();
  await page.getByTestId('fits-workload').selectOption('qlora');
  await page.waitForFunction(() => {
    const p = document.querySelector('[data-testid=fits-progress]');
    return p && p.dataset.all !== '0' && p.dataset.done === p.dataset.all;
  }, null, { timeout: 120000 });
  // the table is for the page's batch and length
  const seq = await page.getByTestId('seq-input').inputValue();
  const batch = await page.getByTestId('batch-input').inputValue();
  const want = cli('fits', '--gpu', gpu, '--workload', 'qlora', '--seq-len', seq, '--batch', batch, '--presets', 'qwen2.5-0.5b');
  const row = page.locator('[data-testid=fits-row][data-model="qwen2.5-0.5b"]').first();
  assert.equal(await row.getAttribute('data-format'), want.rows[0].format);
  assert.equal(await row.getAttribute('data-fits'), String(want.rows[0].fits));
  assert.equal(await row.getAttribute('data-margin'), String(want.rows[0].margin_bytes));
  assert.equal(await row.getAttribute('data-reverse'), String(want.rows[0].reverse_value ?? ''));
  // the row's link opens its full estimate
  await row.getByTestId('fits-open').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=finetune]')?.value === 'qlora', null, { timeout: 30000 });
  assert.equal(await page.getByTestId('preset-select').inputValue(), 'qwen2.5-0.5b');
  assert.deepEqual(errors, []);
});

test('the full-training table, a row in up to three tasks (`fits::RowSteps`), has the CLI\'s rows', async () => {
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

test('measure it yourself: the script, a pasted peak compared with the estimate and kept in the link', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'resnet18');
  const script = await page.getByTestId('measure-script').textContent();
  assert.match(script, /torchvision\.models\.resnet18\(\)/);
  assert.match(script, /reset_peak_memory_stats/);
  const peak = Number(await page.getByTestId('peak').getAttribute('data-bytes'));
  assert.ok(script.includes(`estimate = ${peak}`));
  await page.getByTestId('measured-input').fill('abc');
  await page.getByTestId('measured-error').waitFor();
  const measured = Math.round(peak * 1.05);
  await page.getByTestId('measured-input').fill(String(measured));
  await waitAttr(page, 'measured-vs', 'data-bytes', (v) => v === String(measured));
  assert.equal(await page.getByTestId('measured-vs').getAttribute('data-deviation'), '-4.8%');
  await page.waitForFunction((m) => location.hash.includes(`mp=${m}`), measured);
  const second = await browser.newPage();
  await second.goto(page.url());
  await waitAttr(second, 'measured-vs', 'data-bytes', (v) => v === String(measured), 20000);
  await second.close();
  // a fine-tuning setup on several GPUs gets its launch configs
  await pickPreset(page, 'gpt2');
  await page.getByTestId('mode-select').selectOption('finetune');
  await page.getByTestId('gpus').fill('4');
  await page.getByTestId('strategy').selectOption('zero2');
  await page.getByTestId('launch-deepspeed').waitFor();
  const ds = JSON.parse(await page.getByTestId('launch-deepspeed-text').textContent());
  assert.equal(ds.zero_optimization.stage, 2);
  assert.match(await page.getByTestId('launch-peft-text').textContent(), /LoraConfig\(/);
  assert.match(await page.getByTestId('launch-torchrun-text').textContent(), /--nproc-per-node 4/);
  assert.deepEqual(errors, []);
});
