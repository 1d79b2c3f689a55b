// End-to-end tests of loading a model from the Hugging Face hub by id (run by tests/e2e.sh).
// The tests cannot reach the hub: Playwright's request routing answers every request to
// https://huggingface.co/ with recorded config.json files (tests/data/hub/), error statuses or a
// network failure, and records what the page sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { launch, open, URL as APP, waitAttr, shot } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const fixture = (name) => readFileSync(new globalThis.URL(`./data/hub/${name}.config.json`, import.meta.url), 'utf8');
const TINYLLAMA = fixture('TinyLlama-1.1B-Chat-v1.0'); // 1,100,048,384 parameters (PyTorch)
const LLAMA32 = fixture('Llama-3.2-1B'); // 1,235,814,400
const MAMBA = fixture('mamba-130m-hf'); // model_type `mamba`: not importable
const TOKEN = 'hf_testTOKEN0123456789';
const CORS = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization', 'access-control-allow-methods': 'GET' };

/** A fake hub on `context`: `answer(path, headers)` → `{ status, body }` or `'abort'`. Returns the
 *  list of requests it saw (`{ url, method, headers }`); `hub.answer` can be swapped later. */
async function fakeHub(context, answer) {
  const hub = { answer, seen: [] };
  await context.route('https://huggingface.co/**', async (route) => {
    const req = route.request();
    const headers = await req.allHeaders();
    hub.seen.push({ url: req.url(), method: req.method(), headers });
    if (req.method() === 'OPTIONS') return route.fulfill({ status: 204, headers: CORS });
    const a = hub.answer(new globalThis.URL(req.url()).pathname, headers);
    if (a === 'abort') return route.abort('internetdisconnected');
    return route.fulfill({ status: a.status, headers: { ...CORS, 'content-type': 'application/json' }, body: a.body ?? '' });
  });
  return hub;
}

const config = (body) => () => ({ status: 200, body });
const gets = (hub) => hub.seen.filter((r) => r.method === 'GET');

/** Every request the browser context makes, with its headers (to check where a token went). */
function recordAll(context) {
  const all = [];
  context.on('request', (r) => all.push(r.allHeaders().then((headers) => ({ url: r.url(), headers }))));
  return () => Promise.all(all);
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

test('a model id or a pasted hub URL loads its config.json from huggingface.co; the link carries the id', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const hub = await fakeHub(context, config(TINYLLAMA));
  const { page, errors } = await open(browser, { context });
  await load(page, 'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/tree/main');
  await waitAttr(page, 'params', 'data-count', (v) => v === '1100048384');
  assert.equal(await page.getByTestId('params').textContent(), '1,100,048,384');
  assert.equal(await page.getByTestId('hub-load').getAttribute('data-status'), 'loaded');
  assert.equal(await page.getByTestId('model-name').textContent(), 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
  const [req] = gets(hub);
  assert.equal(req.url, 'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/main/config.json');
  assert.equal(req.headers.referer, undefined, 'no referrer');
  assert.equal(req.headers.authorization, undefined, 'no token given, none sent');
  assert.equal(req.headers.cookie, undefined);
  // the share link: the id, not the spec
  await page.waitForFunction(() => location.hash.startsWith('#v2.h=TinyLlama/TinyLlama-1.1B-Chat-v1.0'));
  assert.equal(new globalThis.URL(page.url()).hash, '#v2.h=TinyLlama/TinyLlama-1.1B-Chat-v1.0,g=rtx-4090');
  // a revision in `@` form, a blob URL: the right config.json address (`/` of the revision escaped)
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0@refs/pr/1');
  await page.waitForFunction(() => location.hash.includes(',r=refs/pr/1'));
  await load(page, 'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/blob/v1.0/config.json');
  await page.waitForFunction(() => location.hash.includes(',r=v1.0'));
  assert.deepEqual(gets(hub).map((r) => new globalThis.URL(r.url).pathname), [
    '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/main/config.json',
    '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/refs%2Fpr%2F1/config.json',
    '/TinyLlama/TinyLlama-1.1B-Chat-v1.0/resolve/v1.0/config.json',
  ]);
  // an edit makes it a custom model: the link then carries the spec
  await page.getByTestId('batch-input').fill('3');
  await page.waitForFunction(() => location.hash.includes('b=3'));
  assert.ok(new globalThis.URL(page.url()).hash.startsWith('#v2.h='), 'a setting is not an edit of the model');
  await page.locator('[data-testid=layer-row]').last().getByTestId('layer-delete').click();
  await page.waitForFunction(() => location.hash.startsWith('#v1.s='));
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

test('a gated model (401): the token field, then a retry with the token; the token goes only to huggingface.co', async () => {
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
  await waitAttr(page, 'params', 'data-count', (v) => v === '1235814400');
  await page.waitForFunction(() => location.hash.startsWith('#v2.h=meta-llama/Llama-3.2-1B'));
  // the header went with the retry, to huggingface.co only
  const sent = (await requests()).filter((r) => r.headers.authorization);
  assert.ok(sent.length >= 1);
  for (const r of sent) {
    assert.equal(new globalThis.URL(r.url).hostname, 'huggingface.co', r.url);
    assert.equal(r.headers.authorization, `Bearer ${TOKEN}`);
  }
  assert.equal(gets(hub).filter((r) => r.headers.authorization).length, 1);
  // …and nowhere else: not in the address, the share link, LocalStorage; kept in SessionStorage
  assert.ok(!page.url().includes(TOKEN));
  await page.getByTestId('copy-link').click();
  assert.ok(!(await page.getByTestId('share-link-field').inputValue()).includes(TOKEN));
  const storage = await page.evaluate(() => ({
    local: JSON.stringify(Object.entries(localStorage)),
    session: JSON.stringify(Object.entries(sessionStorage)),
  }));
  assert.ok(storage.local.includes('meta-llama/Llama-3.2-1B'), 'the work is saved…');
  assert.ok(!storage.local.includes(TOKEN), '…without the token');
  assert.ok(storage.session.includes(TOKEN));
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
  await waitAttr(page, 'params', 'data-count', (v) => v === '1100048384');
  // a server error is worth a retry too
  hub.answer = () => ({ status: 503, body: '' });
  await load(page, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
  assert.match((await hubError(page)).text, /HTTP 503/);
  assert.equal(await page.getByTestId('hub-retry').count(), 1);
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('an unsupported model_type names it, lists what is supported and offers the JSON paste', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  await fakeHub(context, config(MAMBA));
  const { page, errors } = await open(browser, { context });
  await load(page, 'state-spaces/mamba-130m-hf');
  const e = await hubError(page);
  assert.equal(e.kind, 'unsupported');
  assert.match(e.text, /`state-spaces\/mamba-130m-hf` is a `mamba` model.*supported: [^)]*llama/);
  assert.equal(await page.getByTestId('preset-select').inputValue(), 'resnet50');
  await page.getByTestId('hub-paste').click();
  assert.equal(await page.getByTestId('paste').getAttribute('open'), '');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'paste-text');
  await shot(page, '42-hub-unsupported', { fullPage: false });
  assert.deepEqual(realErrors(errors), []);
  await context.close();
});

test('a share link with a model id reopens by fetching again; offline, the notice offers a retry', async () => {
  const link = `${APP}#v2.h=TinyLlama/TinyLlama-1.1B-Chat-v1.0,b=4,g=a100-80gb`;
  // a fresh visitor: fetched before the first chart, shown as an opened link, nothing saved
  {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const hub = await fakeHub(context, config(TINYLLAMA));
    const { page, errors } = await open(browser, { context, url: link });
    assert.equal(await page.getByTestId('params').getAttribute('data-count'), '1100048384');
    assert.equal(await page.getByTestId('batch-input').inputValue(), '4');
    assert.equal(await page.getByTestId('gpu-select').inputValue(), 'a100-80gb');
    assert.equal(await page.getByTestId('link-notice').getAttribute('data-kind'), 'opened');
    assert.equal(gets(hub).length, 1);
    await page.waitForTimeout(600);
    assert.equal(page.url(), link, 'the address keeps the short link');
    assert.equal(await page.evaluate(() => localStorage.getItem('vramcalc.state')), null);
    // the embed card opens the same link the same way
    const embed = await context.newPage();
    await embed.goto(`${APP}embed.html?embed#v2.h=TinyLlama/TinyLlama-1.1B-Chat-v1.0,b=4`);
    await embed.getByTestId('embed-card').waitFor();
    assert.equal(await embed.getByTestId('embed-setup').getAttribute('data-params'), '1100048384');
    assert.equal(await embed.getByTestId('embed-title').textContent(), 'TinyLlama/TinyLlama-1.1B-Chat-v1.0');
    assert.match(await embed.getByTestId('open-full').getAttribute('href'), /#v2\.h=TinyLlama\/TinyLlama-1\.1B-Chat-v1\.0,b=4,g=rtx-4090$/);
    assert.deepEqual(realErrors(errors), []);
    await context.close();
  }
  // offline: the notice says the model could not be fetched, the address keeps the link, Retry loads it
  {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const hub = await fakeHub(context, () => 'abort');
    const { page, errors } = await open(browser, { context, url: link });
    const notice = page.getByTestId('link-notice');
    assert.equal(await notice.getAttribute('data-kind'), 'unfetched');
    assert.match(await notice.textContent(), /TinyLlama\/TinyLlama-1\.1B-Chat-v1\.0, which could not be fetched: could not reach huggingface\.co/);
    assert.equal(await page.getByTestId('preset-select').inputValue(), 'resnet50', 'the default model meanwhile');
    await page.waitForTimeout(600);
    assert.equal(page.url(), link, 'the address keeps the link to retry or copy');
    await shot(page, '43-hub-link-offline', { fullPage: false });
    hub.answer = config(TINYLLAMA);
    await page.getByTestId('link-retry').click();
    await waitAttr(page, 'params', 'data-count', (v) => v === '1100048384');
    await page.waitForFunction(() => document.querySelector('[data-testid=link-notice]')?.dataset.kind === 'opened');
    assert.equal(await page.getByTestId('batch-input').inputValue(), '4');
    assert.equal(await page.getByTestId('gpu-select').inputValue(), 'a100-80gb');
    assert.equal(await page.evaluate(() => localStorage.getItem('vramcalc.state')), null, 'an opened link is not saved until an edit');
    // the embed card offline: the same message and a retry
    hub.answer = () => 'abort';
    const embed = await context.newPage();
    await embed.goto(`${APP}embed.html?embed#v2.h=TinyLlama/TinyLlama-1.1B-Chat-v1.0`);
    await embed.getByTestId('embed-card').waitFor();
    assert.equal(await embed.getByTestId('link-notice').getAttribute('data-kind'), 'unfetched');
    hub.answer = config(TINYLLAMA);
    await embed.getByTestId('link-retry').click();
    await embed.waitForFunction(() => document.querySelector('[data-testid=embed-setup]')?.dataset.params === '1100048384');
    assert.deepEqual(realErrors(errors), []);
    await context.close();
  }
  // gated on reopen: the notice has the token field
  {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    await fakeHub(context, (p, h) => (h.authorization === `Bearer ${TOKEN}` ? { status: 200, body: LLAMA32 } : { status: 401, body: '' }));
    const { page } = await open(browser, { context, url: `${APP}#v2.h=meta-llama/Llama-3.2-1B` });
    assert.match(await page.getByTestId('link-notice').textContent(), /gated or private/);
    await page.getByTestId('link-token').fill(TOKEN);
    await page.getByTestId('link-retry').click();
    await waitAttr(page, 'params', 'data-count', (v) => v === '1235814400');
    assert.ok(!page.url().includes(TOKEN));
    await context.close();
  }
});
