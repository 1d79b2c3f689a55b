// End-to-end tests of the image/video pipeline panel (issue 27), run by tests/e2e.sh: the
// settings people change, the peak per stage and overall against `vramcalc estimate --pipeline
// … --json` (the same core), the stage timeline, a LoRA step, and share links (`#pipe.…`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { launch, open, URL, shot, axeViolations, routeWhileOpen } from './helpers.mjs';

// index.html's static skip links point at the PyTorch panels (for the setup's mode switch to
// retarget when the workloads merge)
const axe = (page) => axeViolations(page, ['skip-link']);
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

function cli(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', ...args, '--json'], { encoding: 'utf8' }));
}

const realErrors = (errors) => errors.filter((e) => !/Failed to load resource/.test(e));
const bytes = async (page, id) => Number(await page.getByTestId(id).getAttribute('data-bytes'));

/** Waits until the answer's peak changes from `before` (a setting was applied). */
async function peakChanged(page, before) {
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes !== b, String(before));
  return bytes(page, 'pipeline-peak');
}

async function stages(page) {
  return page.$$eval('[data-testid=stage-row]', (rows) => rows.map((r) => ({ name: r.dataset.stage, peak: Number(r.dataset.bytes) })));
}

test('Flux.1-dev: each stage\'s peak and the pipeline\'s are the CLI\'s, with and without model offload, and with an fp8 transformer at another size', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline-panel').waitFor();
  const want = cli('--pipeline', 'flux.1-dev');
  assert.equal(await bytes(page, 'pipeline-peak'), want.peak_bytes);
  assert.deepEqual(await stages(page), want.stages.map((s) => ({ name: s.name, peak: s.peak_bytes })));
  assert.equal(await page.getByTestId('pipeline-answer').getAttribute('data-peak-stage'), want.peak_stage);
  assert.equal(await page.locator('[data-testid=chart-stages] rect').count() > 0, true);
  assert.deepEqual(await axe(page), []);
  // model offload: one component on the GPU at a time, the rest in CPU RAM
  let peak = await bytes(page, 'pipeline-peak');
  await page.getByTestId('offload').selectOption('model');
  peak = await peakChanged(page, peak);
  const off = cli('--pipeline', 'flux.1-dev', '--offload', 'model');
  assert.equal(peak, off.peak_bytes);
  assert.equal(await bytes(page, 'pipeline-cpu'), off.devices.cpu_ram_bytes);
  assert.deepEqual(await stages(page), off.stages.map((s) => ({ name: s.name, peak: s.peak_bytes })));
  // the transformer in fp8, 768 × 1360, two images per prompt
  await page.getByTestId('dtype-transformer').selectOption('fp8');
  peak = await peakChanged(page, peak);
  await page.getByTestId('width').fill('768');
  peak = await peakChanged(page, peak);
  await page.getByTestId('height').fill('1360');
  peak = await peakChanged(page, peak);
  await page.getByTestId('images-per-prompt').fill('2');
  peak = await peakChanged(page, peak);
  const fp8 = cli('--pipeline', 'flux.1-dev', '--offload', 'model', '--component-dtype', 'transformer=fp8', '--width', '768', '--height', '1360', '--images-per-prompt', '2');
  assert.equal(peak, fp8.peak_bytes);
  // a size that is not a multiple of 8 stays in its field with the reason
  await page.getByTestId('width').fill('770');
  await page.getByTestId('width-error').waitFor();
  assert.equal(await bytes(page, 'pipeline-peak'), fp8.peak_bytes);
  await shot(page, '70-pipeline-flux');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.scrollWidth <= 390);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('decode alone with VAE tiling, and a LoRA step of the denoiser, as the CLI sizes them', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline').selectOption('sdxl');
  await page.waitForFunction(() => document.querySelector('[data-testid=pipeline-panel]')?.dataset.preset === 'sdxl');
  await page.getByTestId('mode').selectOption('decode');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=stage-row]').length === 1);
  await page.getByTestId('width').fill('2048');
  let peak = await peakChanged(page, 0);
  await page.getByTestId('height').fill('2048');
  peak = await peakChanged(page, peak);
  assert.equal(peak, cli('--pipeline', 'sdxl', '--mode', 'decode', '--width', '2048', '--height', '2048').peak_bytes);
  await page.getByTestId('vae-tiling').fill('0');
  const tiled = await peakChanged(page, peak);
  assert.ok(tiled < peak, 'tiling lowers the decode');
  assert.equal(tiled, cli('--pipeline', 'sdxl', '--mode', 'decode', '--width', '2048', '--height', '2048', '--vae-tiling').peak_bytes);
  // LoRA training of SDXL's unet at 1024², rank 16, gradient checkpointing, AdamW
  await page.getByTestId('mode').selectOption('train');
  await page.waitForFunction(() => document.querySelector('[data-testid=pipeline-panel]')?.dataset.mode === 'train');
  await page.getByTestId('width').fill('1024');
  await page.getByTestId('height').fill('1024');
  await page.getByTestId('train-trainable').waitFor();
  const args = ['--pipeline', 'sdxl', '--mode', 'train', '--finetune', 'lora', '--lora-r', '16', '--checkpointing', '--optimizer', 'adamw', '--width', '1024', '--height', '1024'];
  let want = cli(...args);
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(want.peak_bytes));
  assert.equal(Number(await page.getByTestId('train-trainable').getAttribute('data-count')), want.trainable_params);
  await page.getByTestId('lora-r').fill('64');
  args[args.indexOf('--lora-r') + 1] = '64';
  want = cli(...args);
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(want.peak_bytes));
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('the share link carries the pipeline\'s settings and opens them; a bad link says what is wrong', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline').selectOption('wan2.1-t2v-1.3b');
  await page.waitForFunction(() => document.querySelector('[data-testid=pipeline-panel]')?.dataset.preset === 'wan2.1-t2v-1.3b');
  await page.getByTestId('frames').fill('49');
  await page.getByTestId('offload').selectOption('group');
  await page.waitForFunction(() => /^#pipe\.p=wan2\.1-t2v-1\.3b,.*f=49.*o=group/.test(location.hash));
  const link = await page.evaluate(() => location.hash);
  const peak = await bytes(page, 'pipeline-peak');
  assert.equal(peak, cli('--pipeline', 'wan2.1-t2v-1.3b', '--frames', '49', '--offload', 'group').peak_bytes);
  // opened in a fresh context: the same workload, settings and answer
  const other = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const p2 = await other.newPage();
  await p2.goto(URL + link);
  await p2.getByTestId('pipeline-panel').waitFor();
  assert.equal(await p2.getByTestId('workload').getAttribute('data-workload'), 'pipeline');
  assert.equal(await p2.getByTestId('frames').inputValue(), '49');
  assert.equal(await bytes(p2, 'pipeline-peak'), peak);
  const p3 = await other.newPage();
  await p3.goto(URL + '#pipe.p=wan2.1-t2v-1.3b,f=48');
  await p3.getByTestId('link-notice').waitFor();
  assert.match(await p3.getByTestId('link-notice').textContent(), /link f: Wan's frames are 4k \+ 1/);
  await other.close();
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

/** A CLI call that exits 1 when the setup does not fit (`max`, `--fits`): its JSON either way. */
function cliFit(...args) {
  try {
    return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', ...args, '--json'], { encoding: 'utf8' }));
  } catch (e) {
    return JSON.parse(e.stdout);
  }
}
const cliMax = (...args) => cliFit('max', ...args);

/** The what-if list once it is of the setup on screen. */
async function whatIfs(page) {
  await page.waitForFunction(() => document.querySelector('[data-testid=pipe-whatifs]')?.dataset.stale === 'false');
  return page.$$eval('[data-testid=pipe-whatif]', (bs) => bs.map((b) => ({ changes: b.dataset.changes, peak: Number(b.dataset.bytes), total: Number(b.dataset.deviceTotal), fits: b.dataset.fits })));
}

async function largestOf(page, knob) {
  await page.waitForFunction(() => document.querySelector('[data-testid=pipe-largest]')?.dataset.stale === 'false');
  return page.getByTestId(`pipe-largest-${knob}`).getAttribute('data-value');
}

test('the pipeline\'s what-ifs are the CLI\'s that lower the device total; Apply, undo, and the largest resolution and batch with Use', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline-panel').waitFor();
  const want = cliFit('estimate', '--pipeline', 'flux.1-dev', '--what-if', '--fits', 'rtx-4090');
  const base = await bytes(page, 'pipeline-total');
  const list = await whatIfs(page);
  const lowering = want.what_ifs.filter((w) => w.total_bytes < base);
  assert.deepEqual(list.map((w) => [w.peak, w.total, w.fits]), lowering.map((w) => [w.peak_bytes, w.total_bytes, String(w.fits)]));
  assert.ok(list.some((w) => w.changes === 'offload=model') && list.some((w) => w.changes === 'dtype-transformer=fp8'));
  assert.deepEqual(await axe(page), []);
  // Apply model offload: the answer is the CLI's with --offload model; the change stays with an undo
  const peak0 = await bytes(page, 'pipeline-peak');
  await page.locator('[data-testid=pipe-whatif][data-changes="offload=model"]').click();
  const peak = await peakChanged(page, peak0);
  assert.equal(peak, cli('--pipeline', 'flux.1-dev', '--offload', 'model').peak_bytes);
  assert.equal(await page.getByTestId('offload').inputValue(), 'model');
  await page.getByTestId('pipe-whatif-applied').waitFor();
  // the largest resolution and batch on the RTX 4090 are `vramcalc max`'s
  const res = cliMax('--of', 'resolution', '--pipeline', 'flux.1-dev', '--gpu', 'rtx-4090', '--offload', 'model');
  assert.equal(await largestOf(page, 'resolution'), String(res.value));
  const batch = cliMax('--of', 'batch', '--pipeline', 'flux.1-dev', '--gpu', 'rtx-4090', '--offload', 'model');
  assert.equal(await largestOf(page, 'batch'), batch.value === null ? '' : String(batch.value));
  await page.getByTestId('use-pipe-largest-resolution').click();
  await page.waitForFunction((v) => document.querySelector('[data-testid=width]')?.value === v, String(res.width));
  assert.equal(await page.getByTestId('height').inputValue(), String(res.height));
  assert.equal(await bytes(page, 'pipeline-peak'), res.peak_bytes);
  await shot(page, '71-pipeline-whatifs');
  // undo the applied offload (from before the resolution): back to the first answer
  await page.getByTestId('width').fill('1024');
  await page.getByTestId('height').fill('1024');
  await page.getByTestId('offload').selectOption('none');
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(peak0));
  await page.locator('[data-testid=pipe-whatif][data-changes="offload=model"]').click();
  await peakChanged(page, peak0);
  await page.getByTestId('pipe-whatif-undo').click();
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(peak0));
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a LoRA step\'s what-ifs include cached latents when training on uncached ones; Wan offers fewer frames and the largest frame count', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const errors = [];
  const linked = async (hash) => {
    const p = await context.newPage();
    p.on('pageerror', (e) => errors.push(String(e)));
    await p.goto(URL + hash);
    await p.getByTestId('pipeline-panel').waitFor();
    return p;
  };
  let page = await linked('#pipe.p=sdxl,m=train,l=false,k=false');
  await page.getByTestId('train-frozen').waitFor();
  const frozen = await bytes(page, 'train-frozen');
  const list = await whatIfs(page);
  const cached = list.find((w) => w.changes === 'cached=true');
  assert.ok(cached, JSON.stringify(list));
  const peak = await bytes(page, 'pipeline-peak');
  assert.equal(peak - cached.peak, frozen);
  assert.ok(list.some((w) => w.changes === 'checkpointing=true') && list.some((w) => w.changes === 'optimizer=adam8bit'));
  await page.locator('[data-testid=pipe-whatif][data-changes="cached=true"]').click();
  assert.equal(await peakChanged(page, peak), cli('--pipeline', 'sdxl', '--mode', 'train', '--finetune', 'lora', '--lora-r', '16', '--optimizer', 'adamw', '--width', '1024', '--height', '1024').peak_bytes);
  // Wan 2.1 1.3B with sequential offload (the decode is the peak; under group offload the whole
  // UMT5 encoder is one group and its stage is the peak): fewer frames and Wan's VAE tiling lower
  // it; the largest frame count is `vramcalc max --of frames`'s
  page = await linked('#pipe.p=wan2.1-t2v-1.3b,o=sequential');
  const wan = await whatIfs(page);
  assert.ok(wan.some((w) => w.changes === 'frames=41') && wan.some((w) => w.changes === 'vae-tiling=0'), JSON.stringify(wan));
  const tiled = cli('--pipeline', 'wan2.1-t2v-1.3b', '--offload', 'sequential', '--vae-tiling');
  assert.equal(wan.find((w) => w.changes === 'vae-tiling=0').peak, tiled.peak_bytes);
  const frames = cliMax('--of', 'frames', '--pipeline', 'wan2.1-t2v-1.3b', '--gpu', 'rtx-4090', '--offload', 'sequential');
  assert.equal(await largestOf(page, 'frames'), String(frames.value));
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

// The hub serves a diffusers repository's files as recorded in crates/core/src/diffusion/configs/
// (the built-in presets are those files): model_index.json, then each model's <folder>/config.json.
const CONFIGS = new globalThis.URL('../crates/core/src/diffusion/configs/', import.meta.url);
const CORS = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization', 'access-control-allow-methods': 'GET' };
const TOKEN = 'hf_testTOKEN0123456789';

/** Answers huggingface.co: `repos` maps a repository id to a preset's folder; FLUX.1-dev is gated
 *  (401 without the token); anything else is a 404. Returns the GET requests seen. */
async function fakeHub(context, repos) {
  const seen = [];
  await routeWhileOpen(context, 'https://huggingface.co/**', async (route) => {
    const req = route.request();
    if (req.method() === 'OPTIONS') return route.fulfill({ status: 204, headers: CORS });
    const headers = await req.allHeaders();
    seen.push({ path: new globalThis.URL(req.url()).pathname, auth: headers.authorization });
    const m = /^\/(.+?)\/resolve\/main\/(.+)$/.exec(new globalThis.URL(req.url()).pathname);
    const folder = m && repos[m[1]];
    const gated = m?.[1] === 'black-forest-labs/FLUX.1-dev' && headers.authorization !== `Bearer ${TOKEN}`;
    let status = 404;
    let body = 'Entry not found';
    if (gated) [status, body] = [401, 'Access to model black-forest-labs/FLUX.1-dev is restricted.'];
    else if (folder) {
      try { [status, body] = [200, readFileSync(new globalThis.URL(`${folder}/${m[2]}`, CONFIGS), 'utf8')]; } catch { /* 404 */ }
    }
    return route.fulfill({ status, headers: { ...CORS, 'content-type': 'application/json' }, body });
  });
  return seen;
}

async function loadHub(page, id, token = '') {
  await page.getByTestId('pipe-hub-id').fill(id);
  await page.getByTestId('pipe-hub-token').fill(token);
  await page.getByTestId('pipe-hub-load').click();
}

test('a diffusers repository by hub id: the CLI\'s --model-index answer, its link reopens it; a 404 and a gated 401 say what to do', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const seen = await fakeHub(context, { 'stabilityai/stable-diffusion-xl-base-1.0': 'sdxl', 'black-forest-labs/FLUX.1-dev': 'flux.1-dev' });
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline-panel').waitFor();
  // a repository without model_index.json
  await loadHub(page, 'openai/clip-vit-large-patch14');
  const e404 = page.getByTestId('pipe-hub-error');
  await e404.waitFor();
  assert.match(await e404.textContent(), /has no model_index\.json \(HTTP 404\): not a diffusers pipeline repository/);
  // a gated repository without a token, then with one
  await loadHub(page, 'black-forest-labs/FLUX.1-dev');
  await page.waitForFunction(() => /HTTP 401/.test(document.querySelector('[data-testid=pipe-hub-error]')?.textContent ?? ''));
  assert.equal(await e404.getAttribute('data-kind'), 'gated');
  assert.match(await e404.textContent(), /gated or private on Hugging Face \(HTTP 401\).*access token/);
  await loadHub(page, 'black-forest-labs/FLUX.1-dev', TOKEN);
  await page.waitForFunction(() => document.querySelector('[data-testid=pipeline-panel]')?.dataset.preset === 'black-forest-labs/FLUX.1-dev');
  assert.equal(await bytes(page, 'pipeline-peak'), cli('--pipeline', 'flux.1-dev').peak_bytes);
  assert.ok(seen.filter((r) => r.path.includes('FLUX.1-dev') && r.auth === `Bearer ${TOKEN}`).length >= 5, 'the token went with each file');
  // SDXL's repository: model_index.json and the four models' configs, as --model-index reads them
  await loadHub(page, 'https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0');
  await page.waitForFunction(() => document.querySelector('[data-testid=pipeline-panel]')?.dataset.preset === 'stabilityai/stable-diffusion-xl-base-1.0');
  const sdxlPaths = seen.filter((r) => r.path.includes('stable-diffusion-xl')).map((r) => r.path.replace(/^.*\/resolve\/main\//, ''));
  assert.deepEqual(sdxlPaths.sort(), ['model_index.json', 'text_encoder/config.json', 'text_encoder_2/config.json', 'unet/config.json', 'vae/config.json']);
  await page.getByTestId('width').fill('768');
  await page.getByTestId('offload').selectOption('model');
  const index = new globalThis.URL('sdxl/model_index.json', CONFIGS).pathname;
  const want = cli('--model-index', index, '--width', '768', '--offload', 'model');
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(want.peak_bytes));
  assert.deepEqual(await stages(page), want.stages.map((s) => ({ name: s.name, peak: s.peak_bytes })));
  await page.waitForFunction(() => /^#pipe\.h=stabilityai\/stable-diffusion-xl-base-1\.0,.*w=768/.test(location.hash));
  const link = await page.evaluate(() => location.hash);
  const p2 = await context.newPage();
  await p2.goto(URL + link);
  await p2.waitForFunction(() => document.querySelector('[data-testid=pipeline-panel]')?.dataset.preset === 'stabilityai/stable-diffusion-xl-base-1.0');
  await p2.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(want.peak_bytes));
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a pipeline link\'s embed card shows the CLI\'s peak, the verdict and the stage timeline, and opens the app', async () => {
  const context = await browser.newContext({ viewport: { width: 480, height: 700 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${URL}embed.html?embed#pipe.p=sdxl,w=768,o=model,u=rtx-3060`);
  await page.getByTestId('embed-card').waitFor();
  assert.equal(await page.getByTestId('embed-card').getAttribute('data-workload'), 'pipeline');
  const want = cli('--pipeline', 'sdxl', '--width', '768', '--offload', 'model');
  assert.equal(await bytes(page, 'pipeline-peak'), want.peak_bytes);
  assert.equal(await page.getByTestId('pipeline-verdict').getAttribute('data-fits'), 'true');
  assert.ok(await page.locator('[data-testid=chart-stages] rect').count() > 0);
  assert.match(await page.getByTestId('embed-setup').textContent(), /^infer · 768×1024 · batch 1×1 · offload model · peak at /);
  assert.match(await page.getByTestId('embed-title').textContent(), /sdxl/);
  const href = await page.getByTestId('open-full').getAttribute('href');
  assert.match(href, /#pipe\.p=sdxl,w=768,o=model,u=rtx-3060$/);
  assert.deepEqual(await axe(page), []);
  await shot(page, '72-pipeline-embed');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('an edit in the pipeline panel survives an immediate reload without the link, and undo walks it back', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline-panel').waitFor();
  const peak0 = await bytes(page, 'pipeline-peak');
  await page.getByTestId('offload').selectOption('model');
  const peak = await peakChanged(page, peak0);
  await page.getByTestId('undo').click();
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(peak0));
  assert.equal(await page.getByTestId('offload').inputValue(), 'none');
  await page.getByTestId('redo').click();
  await page.waitForFunction((b) => document.querySelector('[data-testid=pipeline-peak]')?.dataset.bytes === b, String(peak));
  await page.evaluate(() => history.replaceState(null, '', location.pathname)); // no link: the saved work
  await page.reload();
  await page.getByTestId('workload-pipeline').click();
  await page.getByTestId('pipeline-panel').waitFor();
  assert.equal(await page.getByTestId('offload').inputValue(), 'model');
  assert.equal(await bytes(page, 'pipeline-peak'), peak);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});
