// The LLM settings of the setup panel (issues 13–15: fine-tuning, generate mode, GPUs ×
// strategy): the figures are the CLI's (the lazily loaded module runs the full core), and a share
// link carries every setting.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { launch, open, bytes, waitAttr, pickPreset } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const TINYLLAMA = 'crates/core/tests/data/tinyllama-1.1b.config.json';

/** `vramcalc estimate … --json`. */
function cli(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', ...args, '--json'], { encoding: 'utf8' }));
}

/** Types into a text field committed on change. */
async function type(page, testid, text) {
  await page.getByTestId(testid).fill(String(text));
  await page.getByTestId(testid).press('Tab');
}

/** The address bar once it carries a link, opened in a new page of the same browser. */
async function reopen(page, pred) {
  await page.waitForFunction((src) => location.hash.startsWith('#v1.') && new Function('f', `return (${src})(f)`)(location.hash.slice(1)), pred.toString());
  const url = page.url();
  const { page: second, errors } = await open(browser, { url });
  return { second, errors, url };
}

const batchOf = async (page) => page.getByTestId('batch-input').inputValue();

test('a Llama-style import with QLoRA r=16 shows the trainable count peft reports (the CLI\'s)', async () => {
  const { page, errors } = await open(browser);
  await page.getByTestId('paste').locator('summary').click();
  await page.getByTestId('paste-text').fill(readFileSync(TINYLLAMA, 'utf8'));
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-ok').waitFor();
  await page.getByTestId('finetune').selectOption('qlora');
  await type(page, 'lora-r', 16);
  const want = cli('--hf-config', TINYLLAMA, '--finetune', 'qlora', '--lora-r', '16');
  await waitAttr(page, 'trainable', 'data-count', (v) => v === String(want.trainable_params), 20000);
  assert.match(await page.getByTestId('results').innerText(), /%\)/, 'the trainable share in percent');
  // the checklist names the model's linears; all-linear ticks every one
  assert.equal(await page.getByTestId('target-q_proj').isChecked(), true, 'peft\'s default targets for Llama');
  assert.equal(await page.getByTestId('target-gate_proj').isChecked(), false);
  await page.getByTestId('target-all-linear').check();
  const all = cli('--hf-config', TINYLLAMA, '--finetune', 'qlora', '--lora-r', '16', '--lora-targets', 'all-linear');
  await waitAttr(page, 'trainable', 'data-count', (v) => v === String(all.trainable_params), 20000);
  assert.deepEqual(errors, []);
});

test('freezing a ResNet-50 backbone lowers the peak by what the CLI says', async () => {
  const { page, errors } = await open(browser);
  const full = await bytes(page, 'peak');
  const batch = await batchOf(page);
  assert.equal(full, cli('--preset', 'resnet50', '--batch', batch).peak_bytes);
  await page.getByTestId('finetune').selectOption('freeze');
  await type(page, 'train-only', 'fc');
  const frozen = cli('--preset', 'resnet50', '--batch', batch, '--finetune', 'freeze', '--train-only', 'fc');
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === frozen.peak_bytes, 20000);
  assert.ok(frozen.peak_bytes < full);
  assert.equal(await page.getByTestId('trainable').getAttribute('data-count'), String(frozen.trainable_params));
  assert.deepEqual(errors, []);
});

test('a share link with LoRA reopens identical', async () => {
  const { page } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('finetune').selectOption('lora');
  await type(page, 'lora-r', 16);
  await type(page, 'lora-alpha', 32);
  await type(page, 'lora-dropout', 0.05);
  await page.getByTestId('target-all-linear').check();
  await page.getByTestId('base-format').selectOption('nf4');
  await page.getByTestId('double-quant').selectOption('on');
  const trainable = await waitAttr(page, 'trainable', 'data-count', (v) => v !== null, 20000);
  await waitAttr(page, 'params', 'data-count', (v) => v !== null);
  const peak = await waitAttr(page, 'peak', 'data-bytes', () => true);
  const { second, errors } = await reopen(page, (f) => f.includes('double_quant'));
  await waitAttr(second, 'trainable', 'data-count', (v) => v === trainable, 20000);
  assert.equal(String(await bytes(second, 'peak')), peak);
  for (const [id, v] of [['finetune', 'lora'], ['lora-r', '16'], ['lora-alpha', '32'], ['lora-dropout', '0.05'], ['base-format', 'nf4']]) {
    assert.equal(await second.getByTestId(id).inputValue(), v, id);
  }
  assert.equal(await second.getByTestId('double-quant').inputValue(), 'on');
  assert.equal(await second.getByTestId('target-all-linear').isChecked(), true);
  assert.deepEqual(errors, []);
});

test('generate mode shows the prefill and decode peaks and the KV cache the CLI computes; its link reopens identical', async () => {
  const { page } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('mode-select').selectOption('generate');
  await type(page, 'prompt-len', 128);
  await type(page, 'new-tokens', 64);
  await page.getByTestId('kv-cache').selectOption('static');
  await page.getByTestId('kv-dtype').selectOption('fp8');
  const batch = await batchOf(page);
  const want = cli('--preset', 'gpt2', '--batch', batch, '--mode', 'generate', '--prompt-len', '128', '--new-tokens', '64', '--kv-cache', 'static', '--kv-dtype', 'fp8');
  await waitAttr(page, 'decode-peak', 'data-bytes', (v) => Number(v) === want.decode_peak_bytes, 20000);
  assert.equal(await bytes(page, 'prefill-peak'), want.prefill_peak_bytes);
  assert.equal(await bytes(page, 'kv-cache-bytes'), want.breakdown.kv_cache);
  assert.equal(await bytes(page, 'peak'), want.peak_bytes);
  const { second, errors } = await reopen(page, (f) => f.includes('gn=64') && f.includes('gk=fp8'));
  await waitAttr(second, 'decode-peak', 'data-bytes', (v) => Number(v) === want.decode_peak_bytes, 20000);
  for (const [id, v] of [['mode-select', 'generate'], ['prompt-len', '128'], ['new-tokens', '64'], ['kv-cache', 'static'], ['kv-dtype', 'fp8']]) {
    assert.equal(await second.getByTestId(id).inputValue(), v, id);
  }
  assert.deepEqual(errors, []);
});

test('GPUs × strategy: rank 0\'s peak and host memory are the CLI\'s; the link reopens identical', async () => {
  const { page } = await open(browser);
  await pickPreset(page, 'gpt2');
  await type(page, 'gpus', 4);
  await page.getByTestId('strategy').selectOption('zero3');
  await page.getByTestId('offload').selectOption('optimizer');
  const batch = await batchOf(page);
  const want = cli('--preset', 'gpt2', '--batch', batch, '--gpus', '4', '--strategy', 'zero3', '--offload', 'optimizer');
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  assert.equal(await bytes(page, 'host-memory'), want.distributed.host_bytes);
  assert.ok(want.distributed.host_bytes > 0);
  assert.equal(await page.getByTestId('rank0').getAttribute('data-gpus'), '4');
  const { second, errors } = await reopen(page, (f) => f.includes('off=optimizer'));
  await waitAttr(second, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  for (const [id, v] of [['gpus', '4'], ['strategy', 'zero3'], ['offload', 'optimizer']]) {
    assert.equal(await second.getByTestId(id).inputValue(), v, id);
  }
  assert.deepEqual(errors, []);
});
