// End-to-end tests of the pipeline panel's train mode with diffusers' full fine-tuning of the
// denoiser (issue 27), run by tests/e2e.sh: a full-fine-tune link's peak, trainable parameters,
// frozen models on the GPU and device total against `vramcalc estimate --pipeline sd-1.5 --mode
// train … --json` without `--finetune lora` (both call the core's
// `diffusion::full_train::full_job`), the EMA choice, what-ifs, the link in a fresh context, the
// core's refusal (SD3) and the embed card.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { launch, URL, axeViolations } from './helpers.mjs';
import { realErrors, bytes, peakIs, whatIfs, resident as residentOf, linked } from './pipeline_train_helpers.mjs';

const axe = (page) => axeViolations(page, ['skip-link']);
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const cli = (args) => execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** `vramcalc estimate` of a full fine-tune of SD 1.5's UNet; `extra` are the flags beyond the
 * CLI's defaults (the app's: gradient checkpointing on, bf16, AdamW, and the pipeline's 512×512
 * unless `extra` sets the size: the CLI's `--mode train` defaults to 1024×1024). */
function full(pipeline, ...extra) {
  const size = extra.includes('--width') ? [] : ['--width', '512', '--height', '512'];
  return JSON.parse(cli(['--pipeline', pipeline, '--mode', 'train', '--checkpointing', '--optimizer', 'adamw', ...size, ...extra, '--json']));
}

const resident = (page) => residentOf(page, 'component');

test('a full-fine-tune link opens with the CLI\'s peak, trainable parameters, resident models and device total; the EMA, what-ifs and the link are the CLI\'s', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const errors = [];
  const flags = ['--width', '768', '--height', '768', '--batch', '2'];
  const page = await linked(context, '#pipe.p=sd-1.5,m=train,w=768,h=768,b=2,mt=full', errors);
  const want = full('sd-1.5', ...flags);
  assert.equal(want.finetune, 'full');
  await peakIs(page, want.peak_bytes);
  assert.equal(await page.getByTestId('method').inputValue(), 'full');
  assert.equal(await page.getByTestId('train-script').getAttribute('data-script'), want.script);
  assert.equal(Number(await page.getByTestId('train-trainable').getAttribute('data-count')), want.trainable_params);
  assert.equal(Number(await page.getByTestId('train-params').getAttribute('data-count')), want.params);
  assert.deepEqual(await resident(page), want.resident);
  assert.deepEqual(want.resident.map((r) => r.component), ['text_encoder', 'vae'], 'train_dreambooth.py keeps them on the GPU');
  assert.equal(await bytes(page, 'pipeline-total'), want.devices.gpu_total_bytes_approx);
  assert.equal(await page.getByTestId('lora-r').count(), 0, 'LoRA\'s rank is not a full fine-tune\'s');
  assert.equal(await page.getByTestId('cached').count(), 0);
  assert.deepEqual(await axe(page), []);
  // the EMA on the GPU: train_text_to_image.py, its fp32 copy in the peak
  await page.getByTestId('ema').selectOption('gpu');
  const ema = full('sd-1.5', ...flags, '--use-ema');
  await peakIs(page, ema.peak_bytes);
  assert.equal(await page.getByTestId('train-script').getAttribute('data-script'), ema.script);
  assert.equal(await bytes(page, 'train-ema'), ema.ema_bytes);
  assert.equal(await page.getByTestId('train-ema').getAttribute('data-where'), 'gpu');
  assert.equal(await bytes(page, 'pipeline-total'), ema.devices.gpu_total_bytes_approx);
  // the what-ifs, each the CLI's figure
  const list = await whatIfs(page);
  const find = (c) => list.find((w) => w.changes === c) ?? assert.fail(`no ${c} in ${JSON.stringify(list)}`);
  const offloaded = full('sd-1.5', ...flags, '--use-ema', '--offload-ema');
  assert.equal(find('ema=offload').peak, offloaded.peak_bytes);
  assert.equal(find('optimizer=adam8bit').peak, full('sd-1.5', ...flags.slice(0, -2), '--use-ema', '--optimizer', 'adam8bit', '--batch', '2').peak_bytes);
  assert.equal(find('batch=1').peak, full('sd-1.5', ...flags.slice(0, -2), '--use-ema').peak_bytes);
  assert.ok(list.some((w) => /^method=lora,/.test(w.changes)), 'a LoRA instead');
  // Apply the offloaded EMA: the copy in CPU RAM
  await page.locator('[data-testid=pipe-whatif][data-changes="ema=offload"]').click();
  await peakIs(page, offloaded.peak_bytes);
  assert.equal(await page.getByTestId('train-ema').getAttribute('data-where'), 'cpu');
  assert.equal(await bytes(page, 'pipeline-cpu'), offloaded.devices.cpu_ram_bytes);
  assert.ok(offloaded.devices.cpu_ram_bytes > 0);
  // the link carries it: a fresh context opens the same answer
  await page.waitForFunction(() => /mt=full/.test(location.hash) && /em=offload/.test(location.hash));
  const link = await page.evaluate(() => location.hash);
  const other = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const p2 = await linked(other, link, errors);
  await peakIs(p2, offloaded.peak_bytes);
  assert.equal(await p2.getByTestId('ema').inputValue(), 'offload');
  assert.equal(await bytes(p2, 'pipeline-cpu'), offloaded.devices.cpu_ram_bytes);
  await other.close();
  // undo walks back: the EMA's two edits (chosen, then offloaded by the what-if) are one step,
  // one field's
  await page.getByTestId('undo').click();
  await peakIs(page, want.peak_bytes);
  assert.equal(await page.getByTestId('ema').inputValue(), 'none');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('the method switch, the core\'s refusal of SD3 as the CLI words it, and a full-fine-tune embed card with the CLI\'s peak', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const errors = [];
  const page = await linked(context, '#pipe.p=sd-1.5,m=train', errors);
  await page.getByTestId('train-trainable').waitFor();
  const lora = Number(await page.getByTestId('train-trainable').getAttribute('data-count'));
  await page.getByTestId('method').selectOption('full');
  const want = full('sd-1.5', '--set-grads-to-none');
  const kept = full('sd-1.5');
  await peakIs(page, kept.peak_bytes);
  assert.ok(kept.trainable_params > 100 * lora);
  await page.getByTestId('set-grads-to-none').check();
  await peakIs(page, want.peak_bytes);
  assert.equal(await page.getByTestId('train-script').getAttribute('data-script'), want.script);
  await page.getByTestId('method').selectOption('lora');
  await page.waitForFunction((n) => document.querySelector('[data-testid=train-trainable]')?.dataset.count === n, String(lora));
  // SD3: the core refuses a full fine-tune; the CLI says the same
  const sd3 = await linked(context, '#pipe.p=sd3.5-medium,m=train,mt=full', errors);
  await sd3.getByTestId('pipeline-error').waitFor();
  const shown = (await sd3.getByTestId('pipeline-error').textContent()).trim();
  let stderr = '';
  try { cli(['--pipeline', 'sd3.5-medium', '--mode', 'train', '--json']); } catch (e) { stderr = String(e.stderr); }
  assert.match(shown, /use --finetune lora/);
  assert.ok(stderr.includes(shown), `${stderr} ⊅ ${shown}`);
  // the embed card of a full-fine-tune link
  const card = await context.newPage();
  card.on('pageerror', (e) => errors.push(String(e)));
  await card.goto(`${URL}embed.html?embed#pipe.p=sd-1.5,m=train,mt=full,em=gpu,u=rtx-3060`);
  await card.getByTestId('embed-card').waitFor();
  const ema = full('sd-1.5', '--use-ema');
  assert.equal(await bytes(card, 'pipeline-peak'), ema.peak_bytes);
  assert.equal(await bytes(card, 'pipeline-total'), ema.devices.gpu_total_bytes_approx);
  assert.equal(await card.getByTestId('embed-setup').textContent(), 'full fine-tune · train_text_to_image.py · unet · 512×512 · batch 1 · adamw · --gradient_checkpointing · --use_ema');
  assert.match(await card.getByTestId('open-full').getAttribute('href'), /#pipe\.p=sd-1\.5,m=train,u=rtx-3060,mt=full,em=gpu$/);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});
