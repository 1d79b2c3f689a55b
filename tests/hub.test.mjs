// End-to-end tests of loading a model from the Hugging Face hub by id (run by tests/e2e.sh).
// The tests cannot reach the hub: Playwright's request routing answers every request to
// https://huggingface.co/ with recorded config.json files (tests/data/hub/), error statuses or a
// network failure, and records what the page sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { launch, open, waitAttr, shot, pickPreset, routeWhileOpen, isClosedError } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const fixture = (name) => readFileSync(new globalThis.URL(`./data/hub/${name}.config.json`, import.meta.url), 'utf8');
const TINYLLAMA = fixture('TinyLlama-1.1B-Chat-v1.0'); // 1,100,048,384 parameters (PyTorch)
const LLAMA32 = fixture('Llama-3.2-1B'); // 1,235,814,400
const MAMBA = fixture('mamba-130m-hf'); // 129,135,360 (PyTorch; issue 25)
const RWKV = fixture('rwkv-4-169m-pile'); // model_type `rwkv`: not importable
const TOKEN = 'hf_testTOKEN0123456789';
const CORS = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization, range', 'access-control-allow-methods': 'GET' };

/** A fake hub on `context`: `answer(path, headers)` → `{ status, body }` or `'abort'`. Returns the
 *  list of requests it saw (`{ url, method, headers }`); `hub.answer` can be swapped later. */
async function fakeHub(context, answer) {
  const hub = { answer, seen: [] };
  await routeWhileOpen(context, 'https://huggingface.co/**', async (route) => {
    const req = route.request();
    const headers = await req.allHeaders();
    hub.seen.push({ url: req.url(), method: req.method(), headers });
    if (req.method() === 'OPTIONS') return route.fulfill({ status: 204, headers: CORS });
    const a = hub.answer(new globalThis.URL(req.url()).pathname, headers);
    if (a === 'abort') return route.abort('internetdisconnected');
    const type = Buffer.isBuffer(a.body) ? 'application/octet-stream' : 'application/json';
    return route.fulfill({ status: a.status, headers: { ...CORS, 'content-type': type }, body: a.body ?? '' });
  });
  return hub;
}

/** The hub of one model: its `config.json`, and no checkpoint files (404). */
const config = (body) => (path) => (path.endsWith('/config.json') ? { status: 200, body } : { status: 404, body: 'Entry not found' });
/** The `config.json` requests the page made (after each load it also reads the checkpoint's size). */
const gets = (hub) => hub.seen.filter((r) => r.method === 'GET' && new globalThis.URL(r.url).pathname.endsWith('/config.json'));

/** Every request the browser context makes, with its headers (to check where a token went). */
function recordAll(context) {
  const all = [];
  // a request made after the test closed its context has no headers to read: it is left out
  const read = (r) => r.allHeaders().then((headers) => ({ url: r.url(), headers }), (e) => {
    if (isClosedError(e)) return null;
    throw e;
  });
  context.on('request', (r) => all.push(read(r)));
  return async () => (await Promise.all(all)).filter(Boolean);
}

/** Console errors other than the browser's own line for a failed or non-2xx request. */
const realErrors = (errors) => errors.filter((e) => !/Failed to load resource/.test(e));

async function load(page, input) {
  await page.getByTestId('hub-id').fill(input);
  await page.getByTestId('hub-load').click();
}

const hubError = async (page) => {
  const e = page.getByTestId('hub-error');
  await e.waitFor();
  return { kind: await e.getAttribute('data-kind'), text: await e.textContent() };
};

test('a model id or a pasted hub URL loads its config.json from huggingface.co, with no referrer, cookie or token', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await fakeHub(context, config(TINYLLAMA));
  const { page, errors } = await open(browser, { context });
  await load(page, 'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/tree/main');
  await waitAttr(page, 'params', 'data-count', (v) => v === '1100048384', 20000);
  assert.equal(await page.getByTestId('params').textContent(), '1,100,048,384');
  assert.equal(await page.getByTestId('hub-load').getAttribute('data-status'), 'loaded');
  assert.equal(await page.getByTestId('model-name').textContent(), 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
  // what the import assumed (the context of the config, a shorter default) is said next to the result
  assert.match(await page.getByTestId('import-assumed').textContent(), /2048/);
  const [req] = gets(hub);
  assert.equal(req.url, 'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/main/config.json');
  assert.equal(req.headers.referer, undefined, 'no referrer');
  assert.equal(req.headers.authorization, undefined, 'no token given, none sent');
  assert.equal(req.headers.cookie, undefined);
  // a revision in `@` form, a blob URL: the right config.json address (`/` of the revision escaped)
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0@refs/pr/1');
  await page.waitForFunction(() => document.querySelector('[data-testid=hub-load]')?.dataset.status === 'loaded');
  await load(page, 'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/blob/v1.0/config.json');
  await page.waitForFunction(() => document.querySelector('[data-testid=hub-load]')?.dataset.status === 'loaded');
  assert.deepEqual(gets(hub).map((r) => new globalThis.URL(r.url).pathname), [
    '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/main/config.json',
    '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/refs%2Fpr%2F1/config.json',
    '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/v1.0/config.json',
  ]);
  await shot(page, '40-hub-loaded');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('an unknown model (404) and an invalid id say so; the model shown stays', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await fakeHub(context, () => ({ status: 404, body: '{"error":"Repository not found"}' }));
  const { page, errors } = await open(browser, { context });
  const params = await page.getByTestId('params').getAttribute('data-count');
  await load(page, 'Qwen/Qwen2.5-0.5B');
  const e = await hubError(page);
  assert.equal(e.kind, 'not_found');
  assert.match(e.text, /no model `Qwen\/Qwen2\.5-0\.5B` \(HTTP 404\)/);
  assert.equal(gets(hub)[0].url, 'https://huggingface.co/Qwen/Qwen2.5-0.5B/resolve/main/config.json');
  assert.equal(await page.getByTestId('params').getAttribute('data-count'), params);
  assert.equal(await page.getByTestId('preset-select').inputValue(), 'resnet50');
  // not an id: no request, a message that says what is expected
  for (const bad of ['not a model id!', 'https://example.com/Qwen/Qwen2.5-0.5B', 'https://huggingface.co/datasets/squad']) {
    await load(page, bad);
    await page.waitForFunction(() => document.querySelector('[data-testid=hub-error]')?.dataset.kind === 'invalid');
    assert.match(await page.getByTestId('hub-error').textContent(), /not a Hugging Face model id or address/);
  }
  assert.equal(gets(hub).length, 1);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a gated model (401): the token field, then a retry with the token; the token goes only to huggingface.co and stays in this tab (sessionStorage)', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const requests = recordAll(context);
  const hub = await fakeHub(context, (path, headers) => {
    if (headers.authorization === `Bearer ${TOKEN}`) return { status: 200, body: LLAMA32 };
    return { status: 401, body: '{"error":"Access to model meta-llama/Llama-3.2-1B is restricted."}' };
  });
  const { page, errors } = await open(browser, { context });
  await load(page, 'meta-llama/Llama-3.2-1B');
  const e = await hubError(page);
  assert.equal(e.kind, 'gated');
  assert.match(e.text, /`meta-llama\/Llama-3\.2-1B` is gated or private on Hugging Face \(HTTP 401\).*access token/);
  await shot(page, '41-hub-gated', { fullPage: false });
  await page.getByTestId('hub-token').fill(TOKEN);
  await page.getByTestId('hub-retry').click();
  await waitAttr(page, 'params', 'data-count', (v) => v === '1235814400', 20000);
  // the header went with the retry, to huggingface.co only
  const sent = (await requests()).filter((r) => r.headers.authorization);
  assert.ok(sent.length >= 1);
  for (const r of sent) {
    assert.equal(new globalThis.URL(r.url).hostname, 'huggingface.co', r.url);
    assert.equal(r.headers.authorization, `Bearer ${TOKEN}`);
  }
  assert.equal(gets(hub).filter((r) => r.headers.authorization).length, 1);
  // …kept for this tab only: not in the address, the share link (the model's id), the saved work
  await page.waitForFunction(() => location.hash.startsWith('#v1.h=meta-llama%2FLlama-3.2-1B'));
  assert.ok(!page.url().includes(TOKEN));
  const saved = await page.evaluate(() => JSON.stringify(Object.entries(localStorage)));
  assert.ok(saved.includes('meta-llama/Llama-3.2-1B'), 'the work is saved…');
  assert.ok(!saved.includes(TOKEN), '…without the token');
  assert.deepEqual(await page.evaluate(() => Object.entries(sessionStorage)), [['vramcalc-hf-token', TOKEN]]);
  // the link reopens in this tab with the tab's token: fetched again, nothing typed
  const before = gets(hub).length;
  const link = page.url();
  await page.goto('about:blank');
  await page.goto(link);
  await waitAttr(page, 'params', 'data-count', (v) => v === '1235814400', 20000);
  assert.equal(gets(hub).length, before + 1);
  assert.equal(gets(hub).at(-1).headers.authorization, `Bearer ${TOKEN}`);
  // in another tab (no token) the gated model's link says why and offers a retry
  const other = await context.newPage();
  await other.goto(link);
  await other.getByTestId('link-retry').waitFor({ timeout: 20000 });
  assert.match(await other.getByTestId('link-notice-text').textContent(), /`h`.*gated or private.*HTTP 401/);
  await other.close();
  // a refused token says so
  hub.answer = () => ({ status: 403, body: '' });
  await load(page, 'meta-llama/Llama-3.1-8B');
  assert.match((await hubError(page)).text, /access token was refused .*HTTP 403/);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('offline: a network failure says so and the retry loads the model', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await fakeHub(context, () => 'abort');
  const { page, errors } = await open(browser, { context });
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
  const e = await hubError(page);
  assert.equal(e.kind, 'network');
  assert.match(e.text, /could not reach huggingface\.co/);
  assert.equal(await page.getByTestId('preset-select').inputValue(), 'resnet50');
  hub.answer = config(TINYLLAMA);
  await page.getByTestId('hub-retry').click();
  await waitAttr(page, 'params', 'data-count', (v) => v === '1100048384', 20000);
  // a server error is worth a retry too
  hub.answer = () => ({ status: 503, body: '' });
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
  assert.match((await hubError(page)).text, /HTTP 503/);
  assert.equal(await page.getByTestId('hub-retry').count(), 1);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a state-space model (mamba) imports from the hub with PyTorch\'s parameter count', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  await fakeHub(context, config(MAMBA));
  const { page, errors } = await open(browser, { context });
  await load(page, 'state-spaces/mamba-130m-hf');
  await waitAttr(page, 'params', 'data-count', (v) => v === '129135360', 20000);
  assert.equal(await page.getByTestId('model-name').textContent(), 'state-spaces/mamba-130m-hf');
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('an unsupported model_type names it, lists what is supported and offers the JSON paste', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  await fakeHub(context, config(RWKV));
  const { page, errors } = await open(browser, { context });
  await load(page, 'RWKV/rwkv-4-169m-pile');
  const e = await hubError(page);
  assert.equal(e.kind, 'unsupported');
  assert.match(e.text, /`RWKV\/rwkv-4-169m-pile` is a `rwkv` model.*supported: [^)]*llama/);
  assert.equal(await page.getByTestId('preset-select').inputValue(), 'resnet50');
  await page.getByTestId('hub-paste').click();
  assert.notEqual(await page.getByTestId('paste').getAttribute('open'), null, 'the paste box is open');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'paste-text');
  await shot(page, '42-hub-unsupported', { fullPage: false });
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test("a hub model's share link carries its id, not its spec; reopening fetches again, a failed fetch offers a retry; its embed card too", async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await fakeHub(context, config(TINYLLAMA));
  const { page, errors } = await open(browser, { context });
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0@v1.0');
  await waitAttr(page, 'params', 'data-count', (v) => v === '1100048384', 20000);
  await page.getByTestId('batch-input').fill('3');
  await page.getByTestId('batch-input').press('Enter');
  await page.waitForFunction(() => /^#v1\.h=TinyLlama%2FTinyLlama-1\.1B-Chat-v1\.0%40v1\.0,b=3,/.test(location.hash));
  const link = page.url();
  assert.ok(link.length < 160, `a short link: ${link}`);
  const peak = await page.getByTestId('peak').getAttribute('data-bytes');
  // reopened: the config fetched again (same revision), the same estimate
  const fresh = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub2 = await fakeHub(fresh, () => 'abort');
  const p2 = await fresh.newPage();
  await p2.goto(link);
  // offline: the notice says the fetch failed and offers a retry; the default model meanwhile
  await p2.getByTestId('link-retry').waitFor({ timeout: 20000 });
  assert.match(await p2.getByTestId('link-notice-text').textContent(), /`h`.*could not reach huggingface\.co/);
  hub2.answer = config(TINYLLAMA);
  await p2.getByTestId('link-retry').click();
  await waitAttr(p2, 'params', 'data-count', (v) => v === '1100048384', 20000);
  assert.equal(await p2.getByTestId('peak').getAttribute('data-bytes'), peak);
  assert.equal(await p2.getByTestId('batch-input').inputValue(), '3');
  assert.equal(new globalThis.URL(gets(hub2).at(-1).url).pathname, '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/v1.0/config.json');
  // the embed card of the same link fetches the same way and shows the same peak
  const embed = new globalThis.URL(`embed.html${new globalThis.URL(link).hash}`, link).href;
  await p2.goto(embed);
  await waitAttr(p2, 'peak', 'data-bytes', (v) => v === peak, 20000);
  assert.equal(await p2.getByTestId('link-notice').count(), 0);
  await fresh.close();
  assert.equal(gets(hub).length, 1);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

/** A safetensors file's first bytes (8-byte length, JSON header) listing tensors of `bytes` data in all. */
function safetensorsHead(tensors) {
  let offset = 0;
  const entries = Object.fromEntries(tensors.map(([name, dtype, shape, width]) => {
    const n = shape.reduce((a, b) => a * b, 1) * width;
    const e = [name, { dtype, shape, data_offsets: [offset, offset + n] }];
    offset += n;
    return e;
  }));
  const json = Buffer.from(JSON.stringify(entries));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json]);
}

test("a hub model's checkpoint as stored is shown beside the modelled weights: the index's total_size, else the file's header by Range; a mismatch is flagged", async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  // TinyLlama in bf16: 1,100,048,384 parameters × 2 B, as its index would say
  const index = JSON.stringify({ metadata: { total_size: 2200096768 }, weight_map: { 'model.embed_tokens.weight': 'model-00001-of-00002.safetensors', 'lm_head.weight': 'model-00002-of-00002.safetensors' } });
  const hub = await fakeHub(context, (path) => {
    if (path.endsWith('/config.json')) return { status: 200, body: TINYLLAMA };
    if (path.endsWith('/model.safetensors.index.json')) return { status: 200, body: index };
    return { status: 404, body: 'Entry not found' };
  });
  const { page, errors } = await open(browser, { context });
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
  await waitAttr(page, 'checkpoint', 'data-status', (v) => v === 'read', 20000);
  const note = page.getByTestId('checkpoint');
  assert.equal(await note.getAttribute('data-bytes'), '2200096768');
  assert.equal(await note.getAttribute('data-disagree'), 'false');
  assert.match(await note.textContent(), /model\.safetensors\.index\.json, 2 files.*within 1 %/);
  // a single-file checkpoint stored in fp32 (twice the bf16 weights): two Range reads, flagged
  const head = safetensorsHead([['model.embed_tokens.weight', 'F32', [32000, 2048], 4], ['rest', 'F32', [1034512384], 4]]);
  hub.answer = (path, headers) => {
    if (path.endsWith('/config.json')) return { status: 200, body: TINYLLAMA };
    if (!path.endsWith('/model.safetensors')) return { status: 404, body: 'Entry not found' };
    const m = /^bytes=(\d+)-(\d+)$/.exec(headers.range ?? '');
    return m ? { status: 206, body: head.subarray(Number(m[1]), Number(m[2]) + 1) } : { status: 200, body: head };
  };
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0@v1.0');
  await waitAttr(page, 'checkpoint', 'data-bytes', (v) => v === String(1100048384 * 4), 20000);
  assert.equal(await note.getAttribute('data-disagree'), 'true');
  assert.match(await note.textContent(), /model\.safetensors header.*\+100\.0 % against the modelled weights/);
  await note.scrollIntoViewIfNeeded();
  await shot(page, '43-hub-checkpoint', { fullPage: false });
  const ranges = hub.seen.filter((r) => r.method === 'GET' && r.url.endsWith('/v1.0/model.safetensors')).map((r) => r.headers.range);
  assert.deepEqual(ranges, ['bytes=0-7', `bytes=0-${head.length - 1}`]);
  // another model: the note goes with the model it was read for
  await pickPreset(page, 'vgg11');
  await page.waitForFunction(() => !document.querySelector('[data-testid=checkpoint]'));
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});
