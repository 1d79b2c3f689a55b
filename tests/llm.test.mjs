// The LLM settings of the setup panel (issues 13–15: fine-tuning, generate mode, GPUs ×
// strategy): the figures are the CLI's (the lazily loaded module runs the full core), and a share
// link carries every setting.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { launch, open, bytes, waitAttr, pickPreset, setBatch } from './helpers.mjs';

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
  assert.match(await page.getByTestId('llm-figures').innerText(), /%\)/, 'the trainable share in percent');
  // the frozen weights and the adapters, kept apart as the CLI's breakdown keeps them
  assert.equal(await bytes(page, 'frozen-bytes'), want.breakdown.frozen_parameters);
  assert.equal(await bytes(page, 'adapter-bytes'), want.breakdown.adapter_parameters);
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
  const { second, errors, url } = await reopen(page, (f) => f.includes('double_quant'));
  await waitAttr(second, 'trainable', 'data-count', (v) => v === trainable, 20000);
  assert.equal(String(await bytes(second, 'peak')), peak);
  for (const [id, v] of [['finetune', 'lora'], ['lora-r', '16'], ['lora-alpha', '32'], ['lora-dropout', '0.05'], ['base-format', 'nf4']]) {
    assert.equal(await second.getByTestId(id).inputValue(), v, id);
  }
  assert.equal(await second.getByTestId('double-quant').inputValue(), 'on');
  assert.equal(await second.getByTestId('target-all-linear').isChecked(), true);
  // the embed card of the same link shows the same peak (its module computes the LoRA setup)
  const embed = await browser.newPage();
  await embed.goto(url.replace('/#', '/embed.html?embed#'));
  await embed.getByTestId('embed-card').waitFor();
  await waitAttr(embed, 'peak', 'data-bytes', (v) => v === peak, 20000);
  await embed.close();
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
  // memory over the decode steps: the last step's peak is the decode peak
  assert.equal(await page.getByTestId('chart-decode').getAttribute('data-last'), String(want.decode_series.at(-1)[1]));
  assert.equal(await bytes(page, 'peak'), want.peak_bytes);
  // the generation what-ifs: a paged cache, as the CLI computes it; Apply is covered by the LoRA test
  const paged = cli('--preset', 'gpt2', '--batch', batch, '--mode', 'generate', '--prompt-len', '128', '--new-tokens', '64', '--kv-cache', 'paged', '--kv-dtype', 'fp8');
  await waitAttr(page, 'whatif-paged-cache', 'data-bytes', (v) => Number(v) === paged.peak_bytes, 20000);
  const { second, errors, url } = await reopen(page, (f) => f.includes('gn=64') && f.includes('gk=fp8'));
  // the embed card of the link shows the same peak
  const embed = await browser.newPage();
  await embed.goto(url.replace('/#', '/embed.html?embed#'));
  await waitAttr(embed, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  await embed.close();
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
  assert.equal(await bytes(page, 'rank-sharded-parameters'), want.distributed.breakdown.sharded_parameters);
  assert.ok(want.distributed.host_bytes > 0);
  assert.equal(await page.getByTestId('rank0').getAttribute('data-gpus'), '4');
  const { second, errors, url } = await reopen(page, (f) => f.includes('off=optimizer'));
  await waitAttr(second, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  // the embed card of the link shows rank 0's peak
  const embed = await browser.newPage();
  await embed.goto(url.replace('/#', '/embed.html?embed#'));
  await waitAttr(embed, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  await embed.close();
  for (const [id, v] of [['gpus', '4'], ['strategy', 'zero3'], ['offload', 'optimizer']]) {
    assert.equal(await second.getByTestId(id).inputValue(), v, id);
  }
  assert.deepEqual(errors, []);
});

test('tensor parallelism with sequence parallelism: rank 0 is the CLI\'s, its gather buffer shows in the bar of the peak, and the link carries it', async () => {
  const { page } = await open(browser);
  await pickPreset(page, 'gpt2');
  await setBatch(page, 4);
  await type(page, 'gpus', 4);
  await page.getByTestId('strategy').selectOption('tp');
  const plain = cli('--preset', 'gpt2', '--batch', '4', '--gpus', '4', '--strategy', 'tp');
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === plain.peak_bytes, 20000);
  await page.getByTestId('sequence-parallel').selectOption('on');
  const want = cli('--preset', 'gpt2', '--batch', '4', '--gpus', '4', '--strategy', 'tp', '--sequence-parallel');
  assert.notEqual(want.peak_bytes, plain.peak_bytes);
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  assert.equal(await bytes(page, 'rank-all-gather-buffers'), want.distributed.breakdown.all_gather_buffers);
  assert.equal(await bytes(page, 'rank-bar-all-gather-buffers'), want.distributed.breakdown.all_gather_buffers);
  const { second, errors } = await reopen(page, (f) => f.includes('sp=1'));
  await waitAttr(second, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  assert.equal(await second.getByTestId('sequence-parallel').inputValue(), 'on');
  assert.deepEqual(errors, []);
});

/** A CLI subcommand's `--json` answer. */
function cliJson(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', ...args, '--json'], { encoding: 'utf8' }));
}

test('inference of a language model shows its serving capacity under vLLM, the CLI\'s `vramcalc serve`', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('mode-select').selectOption('infer');
  const batch = await batchOf(page);
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const seq = await page.getByTestId('seq-input').inputValue();
  const want = cliJson('serve', '--preset', 'gpt2', '--gpu', gpu, '--context', seq, '--concurrency', batch);
  await waitAttr(page, 'serve-kv-pool', 'data-bytes', (v) => Number(v) === want.kv_pool_bytes, 20000);
  assert.equal(await page.getByTestId('serve-tokens').getAttribute('data-count'), String(want.kv_tokens));
  assert.equal(await page.getByTestId('serve-max-concurrency').getAttribute('data-count'), String(want.max_concurrency));
  assert.equal(await page.getByTestId('serve-max-context').getAttribute('data-count'), String(want.max_context_at_concurrency));
  for (const [id, key] of [['serve-requested', 'requested_bytes'], ['serve-weights', 'weights_bytes'], ['serve-activations', 'activation_peak_bytes']]) {
    assert.equal(await bytes(page, id), want[key], id);
  }
  // the link reopens the same serving view
  const { second } = await reopen(page, (f) => f.includes('m=infer'));
  await waitAttr(second, 'serve-kv-pool', 'data-bytes', (v) => Number(v) === want.kv_pool_bytes, 20000);
  assert.deepEqual(errors, []);
});

test('a multi-GPU job shows the fewest GPUs that fit (the CLI\'s `vramcalc fewest-gpus`) and rank 0 against the number of GPUs', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await setBatch(page, 4);
  await type(page, 'gpus', 2);
  await page.getByTestId('strategy').selectOption('zero3');
  const batch = await batchOf(page);
  assert.equal(batch, '4');
  const gpu = await page.getByTestId('gpu-select').inputValue();
  const want = cliJson('fewest-gpus', '--preset', 'gpt2', '--batch', batch, '--gpu', gpu, '--gpus', '2', '--strategy', 'zero3');
  await page.getByTestId('fewest-gpus').waitFor();
  assert.ok(want.gpus >= 1, JSON.stringify(want)); // fewest-gpus starts at one GPU (issue 22)
  await waitAttr(page, 'fewest-gpus', 'data-gpus', (v) => v === String(want.gpus), 20000);
  assert.equal(await page.getByTestId('fewest-gpus').getAttribute('data-batch'), String(want.max_batch_per_gpu));
  // the fewest show first, the chart's larger sizes after (src/llm/answers.rs `size`)
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=chart-gpus] rect').length >= 6, null, { timeout: 20000 });
  // the bar at the job's size is rank 0's device total the app shows
  const at2 = await page.locator('[data-testid=chart-gpus] rect[data-gpus="2"]').getAttribute('data-bytes');
  await waitAttr(page, 'device-total', 'data-bytes', (v) => v === at2, 20000);
  assert.deepEqual(errors, []);
});

test('full training of GPT-2 offers "LoRA r=16 instead": its peak is the CLI\'s, and Apply sets it up', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  const batch = await batchOf(page);
  const want = cli('--preset', 'gpt2', '--batch', batch, '--finetune', 'lora', '--lora-r', '16', '--lora-alpha', '32');
  await waitAttr(page, 'whatif-lora-r16', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  await page.getByTestId('whatif-lora-r16').click();
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === want.peak_bytes, 20000);
  assert.equal(await page.getByTestId('finetune').inputValue(), 'lora');
  assert.equal(await page.getByTestId('lora-r').inputValue(), '16');
  assert.equal(await page.getByTestId('trainable').getAttribute('data-count'), String(want.trainable_params));
  assert.deepEqual(errors, []);
});

test('with LoRA the per-layer table marks the adapted linears and the frozen layers', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('finetune').selectOption('lora');
  await waitAttr(page, 'trainable', 'data-count', (v) => v !== null, 20000);
  await page.locator('[data-testid=layer-table-row][data-train=adapter]').first().waitFor({ timeout: 20000 });
  assert.ok(await page.locator('[data-testid=layer-table-row][data-train=frozen]').count() >= 1);
  const title = await page.locator('[data-testid=layer-table-row][data-train=adapter] .train-mark').first().getAttribute('title');
  assert.match(title, /Trainable: [\d,]+/);
  assert.deepEqual(errors, []);
});

test('the LLM fields commit as you type: focus stays, keystrokes never concatenate, the link follows (issue 23)', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await page.getByTestId('finetune').selectOption('lora');
  const alpha = page.getByTestId('lora-alpha');
  await alpha.click();
  await alpha.press('Control+A');
  await page.keyboard.type('32', { delay: 30 });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'lora-alpha', 'the field keeps the focus');
  assert.equal(await alpha.inputValue(), '32');
  await page.waitForFunction(() => decodeURIComponent(location.hash).includes('"lora_alpha":32'));
  // a click from one field into another is not lost
  await page.getByTestId('lora-r').click();
  await page.getByTestId('lora-r').press('Control+A');
  await page.keyboard.type('16', { delay: 30 });
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'lora-r');
  const want = cli('--preset', 'gpt2', '--batch', await batchOf(page), '--finetune', 'lora', '--lora-r', '16', '--lora-alpha', '32');
  await waitAttr(page, 'trainable', 'data-count', (v) => v === String(want.trainable_params), 20000);
  assert.equal(await alpha.inputValue(), '32', 'no concatenated value');
  // a text that is no value stays in the field with its reason, the settings unchanged
  await page.getByTestId('lora-r').fill('0');
  await page.getByTestId('llm-error').waitFor();
  assert.equal(await page.getByTestId('trainable').getAttribute('data-count'), String(want.trainable_params));
  assert.deepEqual(errors, []);
});
