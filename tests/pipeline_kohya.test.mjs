// End-to-end tests of the pipeline panel's train mode with kohya-ss/sd-scripts' trainer (issue
// 27), run by tests/e2e.sh: a kohya link's peak, trainable parameters and frozen models on the GPU
// against `vramcalc estimate --pipeline sdxl --mode train --finetune lora --trainer kohya … --json`
// (both call the core's `diffusion::kohya_job::job`), its fields, what-ifs, undo, the link and
// the embed card.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { launch, URL, axeViolations } from './helpers.mjs';
import { realErrors, bytes, peakIs, whatIfs, resident as residentOf, linked } from './pipeline_train_helpers.mjs';

const axe = (page) => axeViolations(page, ['skip-link']);
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** `vramcalc estimate` of SDXL's kohya LoRA step; `extra` are the flags beyond the app's defaults
 * (kohya's own: without --network-train-unet-only the text encoders' LoRA trains too). */
function kohya(...extra) {
  const args = ['estimate', '--pipeline', 'sdxl', '--mode', 'train', '--finetune', 'lora', '--trainer', 'kohya', ...extra, '--json'];
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', ...args], { encoding: 'utf8' }));
}

const resident = (page) => residentOf(page);

test('a kohya link opens with the CLI\'s peak, trainable parameters and frozen models; its what-ifs, settings and undo are the CLI\'s', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const errors = [];
  // the app's defaults beside the CLI's: gradient checkpointing on, bf16, AdamW
  const flags = ['--width', '768', '--height', '768', '--lora-r', '32', '--checkpointing', '--optimizer', 'adamw'];
  const page = await linked(context, '#pipe.p=sdxl,m=train,w=768,h=768,r=32,tr=kohya', errors);
  const want = kohya(...flags);
  await peakIs(page, want.peak_bytes);
  assert.equal(await page.getByTestId('pipeline-answer').getAttribute('data-trainer'), 'kohya');
  assert.equal(await page.getByTestId('trainer').inputValue(), 'kohya');
  assert.equal(Number(await page.getByTestId('train-trainable').getAttribute('data-count')), want.trainable_params);
  assert.deepEqual(await resident(page), want.resident);
  assert.ok(want.text_encoder_lora && want.text_encoders_trained === 2, 'kohya\'s default trains both encoders\' LoRA');
  assert.deepEqual(want.resident.map((r) => r.name), ['vae'], 'the trained encoders are in the step');
  assert.equal(await bytes(page, 'pipeline-total'), want.devices.gpu_total_bytes_approx);
  assert.equal(await page.getByTestId('cache-te').count(), 1, 'SDXL caches its text encoders');
  assert.deepEqual(await axe(page), []);
  // the what-ifs: kohya's flags one at a time, each the CLI's figure
  const list = await whatIfs(page);
  const find = (c) => list.find((w) => w.changes === c) ?? assert.fail(`no ${c} in ${JSON.stringify(list)}`);
  assert.equal(find('cache-latents=true').peak, kohya(...flags, '--cache-latents').peak_bytes);
  assert.equal(find('unet-only=true').peak, kohya(...flags, '--network-train-unet-only').peak_bytes);
  assert.equal(find('cache-te=true,unet-only=true').peak, kohya(...flags, '--network-train-unet-only', '--cache-text-encoder-outputs').peak_bytes);
  assert.equal(find('optimizer=adam8bit').peak, kohya(...flags.slice(0, -1), 'adam8bit').peak_bytes);
  assert.equal(find('full-half=true').peak, kohya(...flags, '--full-bf16').peak_bytes);
  // Apply cached latents, then kohya's settings by hand: conv_dim 8, fp16 with --full_fp16
  await page.locator('[data-testid=pipe-whatif][data-changes="cache-latents=true"]').click();
  const cached = kohya(...flags, '--cache-latents');
  await peakIs(page, cached.peak_bytes);
  assert.deepEqual(await resident(page), [], 'the VAE cached, the encoders in the step');
  await page.getByTestId('conv-dim').fill('8');
  await peakIs(page, kohya(...flags, '--cache-latents', '--conv-dim', '8').peak_bytes);
  await page.getByTestId('mixed-precision').selectOption('fp16');
  await page.getByTestId('full-half').check();
  const fp16 = kohya(...flags, '--cache-latents', '--conv-dim', '8', '--precision', 'fp16', '--full-fp16');
  await peakIs(page, fp16.peak_bytes);
  assert.equal(Number(await page.getByTestId('train-trainable').getAttribute('data-count')), fp16.trainable_params);
  // the link carries them: a fresh context opens the same answer
  await page.waitForFunction(() => /tr=kohya/.test(location.hash) && /cd=8/.test(location.hash) && /fh=true/.test(location.hash) && /cl=true/.test(location.hash));
  const link = await page.evaluate(() => location.hash);
  const other = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const p2 = await linked(other, link, errors);
  await peakIs(p2, fp16.peak_bytes);
  assert.equal(await p2.getByTestId('conv-dim').inputValue(), '8');
  await other.close();
  // undo walks back: the full fp16 network, then fp16, then conv_dim
  for (let i = 0; i < 3; i++) await page.getByTestId('undo').click();
  await peakIs(page, cached.peak_bytes);
  // the UNet alone keeps the encoders beside the step, frozen; fp8 base weights, the CLI's too
  await page.getByTestId('unet-only').check();
  await peakIs(page, kohya(...flags, '--cache-latents', '--network-train-unet-only').peak_bytes);
  assert.deepEqual((await resident(page)).map((r) => r.name), ['text_encoder', 'text_encoder_2']);
  await page.getByTestId('fp8-base').selectOption('all');
  const fp8 = kohya(...flags, '--cache-latents', '--network-train-unet-only', '--fp8-base');
  await peakIs(page, fp8.peak_bytes);
  assert.deepEqual(await resident(page), fp8.resident);
  // caching the encoders' outputs needs the UNet alone (kohya asserts it): the flag's name
  await page.getByTestId('unet-only').uncheck();
  await page.getByTestId('cache-te').check();
  await page.getByTestId('pipeline-error').waitFor();
  assert.match(await page.getByTestId('pipeline-error').textContent(), /needs --network-train-unet-only/);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('the trainer switch: diffusers\' script and kohya\'s on the same SDXL setup, and a kohya embed card with the CLI\'s peak', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const errors = [];
  const page = await linked(context, '#pipe.p=sdxl,m=train', errors);
  await page.getByTestId('train-trainable').waitFor();
  const diffusers = Number(await page.getByTestId('train-trainable').getAttribute('data-count'));
  await page.getByTestId('trainer').selectOption('kohya');
  const want = kohya('--lora-r', '16', '--checkpointing'); // the app's rank 16 (the CLI's default is 8)
  await peakIs(page, want.peak_bytes);
  assert.equal(Number(await page.getByTestId('train-trainable').getAttribute('data-count')), want.trainable_params);
  assert.ok(want.trainable_params > diffusers, 'kohya targets every linear of the transformer blocks');
  await page.getByTestId('trainer').selectOption('diffusers');
  await page.waitForFunction((n) => document.querySelector('[data-testid=train-trainable]')?.dataset.count === n, String(diffusers));
  // the embed card of a kohya link
  const card = await context.newPage();
  card.on('pageerror', (e) => errors.push(String(e)));
  await card.goto(`${URL}embed.html?embed#pipe.p=sdxl,m=train,tr=kohya,cl=true,ct=true,uo=true,u=rtx-3060`);
  await card.getByTestId('embed-card').waitFor();
  const cached = kohya('--lora-r', '16', '--checkpointing', '--cache-latents', '--cache-text-encoder-outputs', '--network-train-unet-only');
  assert.equal(await bytes(card, 'pipeline-peak'), cached.peak_bytes);
  assert.equal(await bytes(card, 'pipeline-total'), cached.devices.gpu_total_bytes_approx);
  assert.match(await card.getByTestId('embed-setup').textContent(), /^kohya LoRA network_dim=16 · unet · 1024×1024 · batch 1 · adamw · --gradient_checkpointing · --cache_latents · --cache_text_encoder_outputs · --network_train_unet_only$/);
  assert.match(await card.getByTestId('open-full').getAttribute('href'), /#pipe\.p=sdxl,m=train,u=rtx-3060,tr=kohya,cl=true,ct=true,uo=true$/);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});
