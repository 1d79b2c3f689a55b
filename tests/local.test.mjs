// End-to-end tests of the llama.cpp panel (issue 24), run by tests/e2e.sh. The GGUF is
// tests/data/gguf/tiny-qwen3moe-Q8_0.gguf (tools/make_app_gguf.py: random weights, cut after its
// tensor infos). The hub cannot be reached: Playwright's routing answers https://huggingface.co/
// with that file by HTTP Range (206 and Content-Range, as the hub's CDN does), a 404, or a header
// cut short, and records every request. Figures are compared with `vramcalc llama-cpp --json`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { launch, open, waitAttr, shot, URL, axeViolations, routeWhileOpen } from './helpers.mjs';

// index.html's static skip links point at the PyTorch panels (for the setup's mode switch to
// retarget when the workloads merge)
const axe = (page) => axeViolations(page, ['skip-link']);
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const FILE = new globalThis.URL('./data/gguf/tiny-qwen3moe-Q8_0.gguf', import.meta.url).pathname;
const GGUF = readFileSync(FILE);
const CORS = {
  'access-control-allow-origin': '*', 'access-control-allow-headers': 'range', 'access-control-allow-methods': 'GET',
  'access-control-expose-headers': 'content-range, content-length',
};

function cli(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'llama-cpp', ...args, '--json'], { encoding: 'utf8' }));
}

/** A hub serving `body` (a Buffer) at any path by Range, or `status` without a body. */
async function rangeHub(context, answer) {
  const hub = { seen: [], served: 0 };
  await routeWhileOpen(context, 'https://huggingface.co/**', async (route) => {
    const req = route.request();
    const headers = await req.allHeaders();
    hub.seen.push({ url: req.url(), method: req.method(), range: headers.range, headers });
    if (req.method() === 'OPTIONS') return route.fulfill({ status: 204, headers: CORS });
    const a = answer(new globalThis.URL(req.url()).pathname);
    if (a.status) return route.fulfill({ status: a.status, headers: CORS, body: 'Entry not found' });
    const m = /^bytes=(\d+)-(\d+)$/.exec(headers.range ?? '');
    if (!m) return route.fulfill({ status: 200, headers: CORS, body: a.body });
    const start = Number(m[1]);
    if (start >= a.body.length) return route.fulfill({ status: 416, headers: { ...CORS, 'content-range': `bytes */${a.body.length}` } });
    const end = Math.min(Number(m[2]), a.body.length - 1);
    const part = a.body.subarray(start, end + 1);
    hub.served += part.length;
    return route.fulfill({ status: 206, headers: { ...CORS, 'content-range': `bytes ${start}-${end}/${a.body.length}` }, body: part });
  });
  return hub;
}

async function openLocal(context) {
  const { page, errors } = await open(browser, { context });
  await page.getByTestId('workload-llama-cpp').click();
  await page.getByTestId('local-panel').waitFor();
  return { page, errors };
}

const status = (page, want) => page.waitForFunction((w) => document.querySelector('[data-testid=gguf-source]')?.dataset.status === w, want);
const num = async (page, id, attr = 'data-bytes') => Number(await page.getByTestId(id).getAttribute(attr));
const realErrors = (errors) => errors.filter((e) => !/Failed to load resource/.test(e));

/** Picks a built-in model and a quant (no file) and waits for its header. */
async function useQuant(page, model, quant) {
  await page.getByTestId('gguf-tab-quant').click();
  await page.getByTestId('gguf-quant-model').selectOption(model);
  await page.getByTestId('gguf-quant').selectOption(quant);
  await page.getByTestId('gguf-quant-use').click();
  await status(page, 'loaded');
}

/** Waits until the answer for the current settings is on the page (the app's worker computes it). */
const settled = (page) => page.waitForFunction(() => !document.querySelector('[data-testid=llama-pending]'));

async function checkAgainstCli(page, args) {
  await settled(page);
  const want = cli(...args);
  assert.equal(await num(page, 'llama-total'), want.total_bytes);
  assert.equal(await num(page, 'llama-model'), want.model_buffer_bytes);
  assert.equal(await num(page, 'llama-kv'), want.kv_bytes);
  assert.equal(await num(page, 'llama-compute'), want.compute_buffer_bytes);
  const rows = await page.getByTestId('device-row').count();
  assert.equal(rows, want.devices.length);
  if (want.max_context != null) assert.equal(await num(page, 'max-ctx', 'data-value'), want.max_context);
  if (want.max_gpu_layers != null) assert.equal(await num(page, 'max-ngl', 'data-value'), want.max_gpu_layers);
  return want;
}

test('a local GGUF: only its header is read, nothing is sent anywhere, and every buffer is the CLI\'s', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const sent = [];
  context.on('request', (r) => sent.push({ url: r.url(), method: r.method() }));
  const { page, errors } = await openLocal(context);
  assert.ok(await page.getByTestId('local-empty').isVisible());
  await page.getByTestId('gguf-file').setInputFiles(FILE);
  await status(page, 'loaded');
  assert.equal(await page.getByTestId('gguf-model').getAttribute('data-arch'), 'qwen3moe');
  await page.getByTestId('c').fill('8192');
  await page.getByTestId('ctk').selectOption('q8_0');
  await page.getByTestId('ctv').selectOption('q8_0');
  await page.waitForFunction(() => /-c 8192 .*-ctk q8_0 -ctv q8_0/.test(document.querySelector('[data-testid=llama-command]')?.textContent ?? ''));
  const want = await checkAgainstCli(page, ['--gguf', FILE, '-c', '8192', '-ctk', 'q8_0', '-ctv', 'q8_0', '--gpu', 'rtx-4090', '--ram', '64GiB']);
  assert.equal(await page.getByTestId('llama-command').textContent(), want.command.replace(FILE, 'tiny-qwen3moe-Q8_0.gguf'));
  // a MoE shows --n-cpu-moe: the experts move to the host, as the CLI says
  await page.getByTestId('n-cpu-moe').fill('4');
  await page.waitForFunction(() => /--n-cpu-moe 4/.test(document.querySelector('[data-testid=llama-command]')?.textContent ?? ''));
  await checkAgainstCli(page, ['--gguf', FILE, '-c', '8192', '-ctk', 'q8_0', '-ctv', 'q8_0', '--n-cpu-moe', '4', '--gpu', 'rtx-4090', '--ram', '64GiB']);
  // a text that is not a value stays in its field with the reason; the answer stays
  assert.equal(await page.evaluate(() => location.hash), '#gguf.c=8192,ctk=q8_0,ctv=q8_0,n-cpu-moe=4', 'the settings, not the file');
  await page.getByTestId('np').fill('0');
  await page.getByTestId('np-error').waitFor();
  await shot(page, '60-local-file');
  assert.deepEqual(sent.filter((r) => r.method !== 'GET' || !r.url.startsWith(process.env.VRAMCALC_URL ?? 'http://127.0.0.1')), [], 'no request but the app\'s own files');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a hybrid GGUF (jamba): the recurrent state is its own column, each device\'s the CLI\'s', async () => {
  const jamba = new globalThis.URL('./data/gguf/tiny-jamba-Q8_0.gguf', import.meta.url).pathname;
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-file').setInputFiles(jamba);
  await status(page, 'loaded');
  assert.equal(await page.getByTestId('gguf-model').getAttribute('data-arch'), 'jamba');
  await page.getByTestId('np').fill('2');
  await page.waitForFunction(() => /-np 2/.test(document.querySelector('[data-testid=llama-command]')?.textContent ?? ''));
  const want = await checkAgainstCli(page, ['--gguf', jamba, '-np', '2', '--gpu', 'rtx-4090', '--ram', '64GiB']);
  assert.ok(want.rs_bytes > 0, 'jamba has a recurrent state');
  const rows = page.getByTestId('device-row');
  for (let i = 0; i < want.devices.length; i++) {
    assert.equal(Number(await rows.nth(i).getByTestId('dev-state').getAttribute('data-bytes')), want.devices[i].rs_bytes, `device ${i}`);
    assert.equal(Number(await rows.nth(i).getByTestId('dev-total').getAttribute('data-bytes')), want.devices[i].total_bytes, `device ${i}`);
  }
  // a model without recurrent layers has no such column
  await page.getByTestId('gguf-file').setInputFiles(FILE);
  await page.waitForFunction(() => document.querySelector('[data-testid=gguf-model]')?.dataset.arch === 'qwen3moe');
  await page.getByTestId('llama-total').waitFor();
  await settled(page);
  assert.equal(await page.getByTestId('dev-state').count(), 0);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a local file cut inside its header, or not a GGUF, is a clear error naming the offset', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-file').setInputFiles({ name: 'cut.gguf', mimeType: 'application/octet-stream', buffer: GGUF.subarray(0, 300000) });
  await status(page, 'failed');
  assert.match(await page.getByTestId('gguf-error').textContent(), /GGUF header invalid at byte \d+ .*past the end of the file \(300000 bytes\)/);
  await page.getByTestId('gguf-file').setInputFiles({ name: 'page.gguf', mimeType: 'text/html', buffer: Buffer.from('<!doctype html><html></html>') });
  await page.waitForFunction(() => /not a GGUF file/.test(document.querySelector('[data-testid=gguf-error]')?.textContent ?? ''));
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a hub GGUF is read by Range requests, growing until the header parses, no byte twice', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await rangeHub(context, () => ({ body: GGUF }));
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-tab-hub').click();
  await page.getByTestId('gguf-hub').fill('https://huggingface.co/test-org/Tiny-GGUF/blob/main/tiny-qwen3moe-Q8_0.gguf');
  await page.getByTestId('gguf-hub-load').click();
  await status(page, 'loaded');
  const gets = hub.seen.filter((r) => r.method === 'GET');
  assert.ok(gets.length >= 2, `${gets.length} requests`);
  let next = 0;
  for (const g of gets) {
    assert.equal(g.url, 'https://huggingface.co/test-org/Tiny-GGUF/resolve/main/tiny-qwen3moe-Q8_0.gguf');
    const [, a] = /^bytes=(\d+)-(\d+)$/.exec(g.range);
    assert.equal(Number(a), next, 'each range starts where the last ended');
    next = Number(/-(\d+)$/.exec(g.range)[1]) + 1;
    assert.equal(g.headers.cookie, undefined);
    assert.equal(g.headers.referer, undefined);
  }
  assert.ok(hub.served <= GGUF.length, 'no byte read twice');
  await checkAgainstCli(page, ['--gguf', FILE, '--gpu', 'rtx-4090', '--ram', '64GiB']);
  assert.match(await page.getByTestId('llama-command').textContent(), /^llama-server -m tiny-qwen3moe-Q8_0\.gguf -c 4096 /);
  // the share link names the hub file and the settings; opened elsewhere it reads the file again
  await page.getByTestId('c').fill('16384');
  await page.waitForFunction(() => location.hash === '#gguf.hub=test-org/Tiny-GGUF/tiny-qwen3moe-Q8_0.gguf,c=16384');
  const total = await num(page, 'llama-total');
  const other = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub2 = await rangeHub(other, () => ({ body: GGUF }));
  const p2 = await other.newPage();
  await p2.goto(URL + '#gguf.hub=test-org/Tiny-GGUF/tiny-qwen3moe-Q8_0.gguf,c=16384');
  await status(p2, 'loaded');
  assert.ok(hub2.served <= GGUF.length, 'the link reads the file once');
  assert.equal(await p2.getByTestId('workload').getAttribute('data-workload'), 'llama-cpp');
  assert.equal(await p2.getByTestId('c').inputValue(), '16384');
  assert.equal(await num(p2, 'llama-total'), total);
  await other.close();
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a hub file that is not there (404), a header cut short and a bad address say so', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await rangeHub(context, (path) => (path.includes('missing') ? { status: 404 } : { body: GGUF.subarray(0, 300000) }));
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-tab-hub').click();
  await page.getByTestId('gguf-hub').fill('test-org/Tiny-GGUF/missing.gguf');
  await page.getByTestId('gguf-hub-load').click();
  await status(page, 'failed');
  assert.match(await page.getByTestId('gguf-error').textContent(), /test-org\/Tiny-GGUF\/missing\.gguf: not found on the hub \(HTTP 404\)/);
  await page.getByTestId('gguf-hub').fill('test-org/Tiny-GGUF/cut.gguf');
  await page.getByTestId('gguf-hub-load').click();
  await page.waitForFunction(() => /past the end of the file \(300000 bytes\)/.test(document.querySelector('[data-testid=gguf-error]')?.textContent ?? ''));
  const before = hub.seen.length;
  await page.getByTestId('gguf-hub').fill('test-org/Tiny-GGUF/config.json');
  await page.getByTestId('gguf-hub-load').click();
  assert.match(await page.getByTestId('gguf-hub-invalid').textContent(), /not a \.gguf file path/);
  assert.equal(hub.seen.length, before, 'no request for an address that is not a GGUF file');
  await shot(page, '61-local-hub-errors', { fullPage: false });
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a model and a quant without a file: the header llama-quantize would write, as the CLI sizes it', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await useQuant(page, 'qwen3-8b', 'Q4_K_M');
  await page.getByTestId('c').fill('32768');
  await page.waitForFunction(() => /-c 32768/.test(document.querySelector('[data-testid=llama-command]')?.textContent ?? ''));
  const config = new globalThis.URL('../crates/core/src/presets/configs/qwen3-8b.json', import.meta.url).pathname;
  await checkAgainstCli(page, ['--hf-config', config, '--quant', 'Q4_K_M', '-c', '32768', '--gpu', 'rtx-4090', '--ram', '64GiB']);
  // a local file's link carries its settings, never the file; this one names the model and quant
  assert.equal(await page.evaluate(() => location.hash), '#gguf.model=qwen3-8b,quant=Q4_K_M,c=32768');
  assert.deepEqual(await axe(page), []);
  // 中文: the panel's texts switch, the figures stay
  const total = await num(page, 'llama-total');
  await page.getByTestId('lang-select').selectOption('zh');
  await page.waitForFunction(() => document.querySelector('#local-h')?.textContent === '本地推理（llama.cpp）');
  assert.equal(await num(page, 'llama-total'), total);
  await waitAttr(page, 'llama-answer', 'data-fits', (v) => v === 'true');
  // a 390 px phone: no horizontal scrolling (the device table scrolls in its card)
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => document.documentElement.scrollWidth <= 390);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

const command = (page) => page.evaluate(() => document.querySelector('[data-testid=llama-command]')?.textContent ?? '');
const waitCommand = (page, re) => page.waitForFunction((s) => new RegExp(s).test(document.querySelector('[data-testid=llama-command]')?.textContent ?? ''), re.source);
/** The stacked bars' rows (one per device) and their labels. */
const barLabels = (page) => page.evaluate(() => [...document.querySelectorAll('[data-testid=chart-devices] > g:not(.axis-label) > text')].map((t) => t.textContent));

test('-ot with the core\'s errors where typed and presets, mixed GPUs with -ts and -sm, a bar per device', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-file').setInputFiles(FILE);
  await status(page, 'loaded');
  // a pattern the core cannot compile: its message beside the field, the answer unchanged
  const total = await num(page, 'llama-total');
  await page.getByTestId('ot').fill('blk\\.(=CPU');
  await page.getByTestId('ot-error').waitFor();
  assert.match(await page.getByTestId('ot-error').textContent(), /^-ot pattern "blk\\\\\.\(":/);
  assert.equal(await num(page, 'llama-total'), total);
  await page.getByTestId('ot').fill('exps=GPU');
  await page.waitForFunction(() => /unknown buffer type/.test(document.querySelector('[data-testid=ot-error]')?.textContent ?? ''));
  // the preset fills the pattern (llama.cpp's LLM_FFN_EXPS_REGEX) and the experts move to the host
  const preset = '\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU';
  await page.getByTestId('ot-preset-experts-cpu').click();
  await waitCommand(page, /-ot '/);
  assert.equal(await page.getByTestId('ot').inputValue(), preset);
  assert.equal(await page.getByTestId('ot-error').count(), 0);
  await checkAgainstCli(page, ['--gguf', FILE, '-ot', preset, '--gpu', 'rtx-4090', '--ram', '64GiB']);
  // a second, different card: -ts and -sm appear; every device is the CLI's, each with its bar
  assert.equal(await page.getByTestId('ts').count(), 0, '-ts needs two GPUs');
  await page.getByTestId('card-add').click();
  await page.getByTestId('card-1').selectOption('rtx-3090');
  await page.getByTestId('ts').fill('3,1');
  await waitCommand(page, /-ts 3,1/);
  const args = ['--gguf', FILE, '-ot', preset, '-ts', '3,1', '--gpu', 'rtx-4090', '--gpu', 'rtx-3090', '--ram', '64GiB'];
  const want = await checkAgainstCli(page, args);
  assert.equal(want.devices.length, 3);
  const rows = page.getByTestId('device-row');
  for (let i = 0; i < want.devices.length; i++) {
    assert.equal(Number(await rows.nth(i).getByTestId('dev-total').getAttribute('data-bytes')), want.devices[i].total_bytes, `device ${i}`);
  }
  assert.equal((await barLabels(page)).length, 3, 'one bar per device');
  assert.equal(await command(page), want.command.replace(FILE, 'tiny-qwen3moe-Q8_0.gguf'));
  // -sm none puts every layer on the first GPU; llama.cpp then ignores -ts (load_tensors copies
  // one value per device in use), and so do the app and the CLI
  await page.getByTestId('sm').selectOption('none');
  await waitCommand(page, /-sm none/);
  await checkAgainstCli(page, [...args, '-sm', 'none']);
  assert.equal(await page.getByTestId('llama-error').count(), 0);
  await page.getByTestId('ts').fill('');
  await waitCommand(page, /-sm none/);
  await checkAgainstCli(page, [...args.filter((a) => a !== '-ts' && a !== '3,1'), '-sm', 'none']);
  await page.getByTestId('sm').selectOption('layer');
  await page.getByTestId('ts').fill('3,1');
  await waitCommand(page, /-ts 3,1/);
  // the link carries the pattern, the split, the mode and the cards; opened elsewhere it is the same
  const hash = await page.evaluate(() => location.hash);
  assert.match(hash, /ot=\\\.ffn_\(up\|down\|gate\|gate_up\)_\(ch\|\)exps%3DCPU/, 'a fragment keeps \\ as it is; = is escaped');
  assert.match(hash, /ts=3%2C1/);
  assert.match(hash, /gpu=rtx-4090\+rtx-3090/);
  const t2 = await num(page, 'llama-total');
  await shot(page, '62-local-multi-gpu');
  // removing the card takes -ts and -sm away
  await page.getByTestId('card-remove-1').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=cards]')?.dataset.count === '1');
  assert.equal(await page.getByTestId('ts').count(), 0);
  await settled(page);
  assert.equal(await page.getByTestId('device-row').count(), 2);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
  const other = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const p2 = await other.newPage();
  await p2.goto(URL + '#gguf.model=qwen3-30b-a3b,quant=Q4_K_M' + hash.replace(/^#gguf\./, ','));
  await p2.getByTestId('llama-answer').waitFor();
  assert.equal(await p2.getByTestId('ot').inputValue(), preset);
  assert.equal(await p2.getByTestId('ts').inputValue(), '3,1');
  assert.equal(await p2.getByTestId('cards').getAttribute('data-count'), '2');
  assert.notEqual(await num(p2, 'llama-total'), t2, 'another model, the same settings');
  await other.close();
});

test('Ollama: its names and defaults, the Modelfile to copy beside the llama-server line Ollama runs', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-file').setInputFiles(FILE);
  await status(page, 'loaded');
  await page.getByTestId('engine').selectOption('ollama');
  await page.getByTestId('num_ctx').waitFor();
  assert.equal(await page.getByTestId('c').count(), 0, 'llama.cpp\'s -c is Ollama\'s num_ctx × OLLAMA_NUM_PARALLEL');
  // Ollama's default: 32768 on a 24 GB card (server/routes.go)
  let want = JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'ollama', '--gguf', FILE, '--gpu', 'rtx-4090', '--ram', '64GiB', '--json'], { encoding: 'utf8' }));
  await page.waitForFunction(() => /-c 32768/.test(document.querySelector('[data-testid=llama-command]')?.textContent ?? ''));
  assert.equal(await num(page, 'llama-total'), want.total_bytes);
  await page.getByTestId('num_ctx').fill('4096');
  await page.getByTestId('OLLAMA_NUM_PARALLEL').fill('4');
  await page.getByTestId('OLLAMA_KV_CACHE_TYPE').selectOption('q8_0');
  await waitCommand(page, /-c 16384 .*-ctk q8_0 -ctv q8_0/);
  want = JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'ollama', '--gguf', FILE, '--num-ctx', '4096', '--num-parallel', '4',
    '--kv-cache-type', 'q8_0', '--gpu', 'rtx-4090', '--ram', '64GiB', '--json'], { encoding: 'utf8' }));
  assert.equal(await num(page, 'llama-total'), want.total_bytes);
  assert.equal(await num(page, 'llama-kv'), want.kv_bytes);
  assert.equal(await num(page, 'max-ctx', 'data-value'), want.max_context);
  assert.equal(await command(page), want.command.replace(FILE, 'tiny-qwen3moe-Q8_0.gguf'));
  const modelfile = await page.getByTestId('ollama-modelfile').textContent();
  assert.match(modelfile, /^# ollama serve environment: OLLAMA_NUM_PARALLEL=4 OLLAMA_KV_CACHE_TYPE=q8_0$/m);
  assert.match(modelfile, /^FROM \.\/tiny-qwen3moe-Q8_0\.gguf$/m);
  assert.match(modelfile, /^PARAMETER num_ctx 4096$/m);
  for (const line of want.ollama.modelfile) assert.ok(modelfile.includes(line), line);
  assert.equal(await page.getByTestId('ollama-modelfile').getAttribute('data-parallel'), '4');
  assert.match(await page.evaluate(() => location.hash), /engine=ollama,.*num_ctx=4096,OLLAMA_NUM_PARALLEL=4,OLLAMA_KV_CACHE_TYPE=q8_0/);
  assert.deepEqual(await axe(page), []);
  await shot(page, '63-local-ollama');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('the panel is in undo and redo and in the saved work: an edit survives a reload; which quant fits follows the settings', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await useQuant(page, 'qwen3-8b', 'Q4_K_M');
  assert.equal(await page.getByTestId('undo').isDisabled(), true);
  await page.getByTestId('c').fill('8192');
  await waitCommand(page, /-c 8192/);
  await page.getByTestId('ctk').selectOption('q8_0');
  await waitCommand(page, /-ctk q8_0/);
  await page.getByTestId('undo').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=ctk]')?.value === 'f16');
  assert.equal(await page.getByTestId('c').inputValue(), '8192', 'one step back');
  await page.getByTestId('undo').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=c]')?.value === '4096');
  assert.equal(await page.getByTestId('undo').isDisabled(), true, 'typing 8192 was one step');
  await page.getByTestId('redo').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=c]')?.value === '8192');
  // which quant of the model fits, as the CLI sizes each
  const config = new globalThis.URL('../crates/core/src/presets/configs/qwen3-8b.json', import.meta.url).pathname;
  await page.getByTestId('card-0').selectOption('rtx-3080');
  await page.waitForFunction(() => document.querySelector('[data-testid=quant-fit][data-quant=F16]')?.dataset.fits === 'false');
  for (const q of ['Q2_K', 'Q4_K_M', 'Q8_0', 'F16']) {
    const cli1 = cli('--hf-config', config, '--quant', q, '-c', '8192', '--gpu', 'rtx-3080', '--ram', '64GiB');
    assert.equal(await page.locator(`[data-testid=quant-fit][data-quant=${q}]`).getAttribute('data-fits'), String(cli1.fits), q);
  }
  // saved work: a reload, and the page opened again without a link, show the same panel
  const total = await num(page, 'llama-total');
  await page.reload();
  await page.getByTestId('llama-answer').waitFor();
  assert.equal(await page.getByTestId('c').inputValue(), '8192');
  await page.goto(URL);
  await page.getByTestId('llama-answer').waitFor();
  assert.equal(await page.getByTestId('workload').getAttribute('data-workload'), 'llama-cpp');
  assert.equal(await page.getByTestId('c').inputValue(), '8192');
  assert.equal(await page.getByTestId('card-0').inputValue(), 'rtx-3080');
  assert.equal(await num(page, 'llama-total'), total);
  // old links open as before
  const p3 = await context.newPage();
  await p3.goto(URL + '#gguf.model=qwen3-8b,quant=Q4_K_M,c=8192,gpu=a100-80gb,gpus=2');
  await p3.getByTestId('llama-answer').waitFor();
  assert.equal(await p3.getByTestId('cards').getAttribute('data-count'), '2');
  await checkAgainstCli(p3, ['--hf-config', config, '--quant', 'Q4_K_M', '-c', '8192', '--gpu', 'a100-80gb', '--gpu', 'a100-80gb', '--ram', '64GiB']);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('LM Studio: llama.cpp under LM Studio\'s load defaults and names, with the lms load line', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const { page, errors } = await openLocal(context);
  await page.getByTestId('gguf-file').setInputFiles(FILE);
  await status(page, 'loaded');
  await page.getByTestId('engine').selectOption('lm-studio');
  await page.getByTestId('lms-command').waitFor();
  assert.equal(await page.locator('label[for=llama-c]').textContent(), 'Context Length');
  assert.equal(await page.getByTestId('ot').count(), 0, 'LM Studio has no -ot');
  // its defaults (lmstudio-js schema.ts): context 2048, batch 512, flash attention off
  await checkAgainstCli(page, ['--gguf', FILE, '-c', '2048', '-b', '512', '-fa', 'off', '--gpu', 'rtx-4090', '--ram', '64GiB']);
  await page.getByTestId('c').fill('8192');
  await page.getByTestId('ctk').selectOption('q8_0');
  await page.waitForFunction(() => document.querySelector('[data-testid=lms-command]')?.textContent === 'lms load tiny-qwen3moe-Q8_0.gguf --context-length 8192 --gpu max');
  assert.match(await page.getByTestId('lms-settings').textContent(), /K Cache Quantization Type: q8_0/);
  const want = await checkAgainstCli(page, ['--gguf', FILE, '-c', '8192', '-b', '512', '-fa', 'off', '-ctk', 'q8_0', '--gpu', 'rtx-4090', '--ram', '64GiB']);
  assert.equal(await command(page), want.command.replace(FILE, 'tiny-qwen3moe-Q8_0.gguf'));
  assert.match(await page.evaluate(() => location.hash), /^#gguf\.engine=lm-studio,/);
  await shot(page, '64-local-lm-studio');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});
