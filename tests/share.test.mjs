// End-to-end tests of share links, embed mode and downloads (run by tests/e2e.sh).
// The embed test serves its own host page on a second local port: another origin than the app.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { launch, open, URL as APP, bytes, waitAttr, pickPreset, setBatch, shot, topKinds, openRow, holdModule } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const STORAGE_KEY = 'vramcalc.state';
const fragmentOf = (url) => url.slice(url.indexOf('#') + 1);
const saved = (page) => page.evaluate((k) => localStorage.getItem(k), STORAGE_KEY);

const openUrl = (url, { context } = {}) => open(browser, { url, context });

/** Saves `preset` at `batch` as the user's work; returns what LocalStorage holds. */
async function saveWork(page, preset, batch) {
  await pickPreset(page, preset);
  await setBatch(page, batch);
  await page.waitForFunction(([k, b]) => JSON.parse(localStorage.getItem(k) ?? 'null')?.model?.config?.batch === b, [STORAGE_KEY, batch]);
  return saved(page);
}

/** The address bar once it carries a link whose fragment satisfies `pred`. */
async function addressBar(page, pred = () => true) {
  await page.waitForFunction((src) => location.hash.startsWith('#v1.') && new Function('f', `return (${src})(f)`)(location.hash.slice(1)), pred.toString());
  return page.url();
}

/** What a page shows, for comparing two pages. */
async function snapshot(page) {
  return {
    params: await page.getByTestId('params').getAttribute('data-count'),
    peak: await bytes(page, 'peak'),
    deviceTotal: await bytes(page, 'device-total'),
    fits: await page.getByTestId('fit-status').getAttribute('data-fits'),
    batch: await page.getByTestId('batch-input').inputValue(),
    gpu: await page.getByTestId('gpu-select').inputValue(),
    precision: await page.getByTestId('precision-select').inputValue(),
    kinds: await topKinds(page),
    lang: await page.evaluate(() => document.documentElement.lang),
  };
}

async function addLayer(page, kind) {
  await page.getByTestId('add-layer').click();
  await page.getByTestId('add-layer-search').fill(kind);
  await page.getByTestId(`add-kind-${kind}`).click();
}

test('a custom model: the copied link reopens the same page in a fresh browser context', async () => {
  const { context, page, errors } = await open(browser);
  const history0 = await page.evaluate(() => history.length);
  await page.getByTestId('start-empty').click();
  await page.getByTestId('input-shape').fill('3, 32, 32');
  for (const k of ['conv2d', 'relu', 'flatten', 'linear']) await addLayer(page, k);
  await waitAttr(page, 'params', 'data-count', (v) => v === String(448 + 16 * 32 * 32 * 128 + 128));
  await setBatch(page, 12);
  await page.getByTestId('gpu-select').selectOption('a100-80gb');
  await page.getByTestId('precision-select').selectOption('amp-bf16');
  await page.getByTestId('unit-select').selectOption('MiB');
  const url = await addressBar(page, (f) => f.includes('b=12') && f.includes('g=a100-80gb') && f.includes('u=MiB') && f.includes('pr=amp-bf16'));
  assert.ok(fragmentOf(url).startsWith('v1.s='), url);
  // the address bar follows the state without new history entries
  assert.equal(await page.evaluate(() => history.length), history0);
  // "Copy link": the clipboard or, without permission, a field to select; same link as the address bar
  await page.getByTestId('copy-link').click();
  const field = await page.getByTestId('share-link-field').inputValue();
  assert.equal(field, url);
  // clicked right after an edit (the new link is still being encoded), it copies the edited
  // state's link, not the one before
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new globalThis.URL(APP).origin });
  const clipboard = () => page.evaluate(() => navigator.clipboard.readText());
  const clipboardHas = async (b) => {
    for (let i = 0; i < 80 && !(await clipboard()).includes(`b=${b},`); i++) await page.waitForTimeout(25);
    assert.match(await clipboard(), new RegExp(`b=${b},`));
  };
  // edit, let the page draw it, click: well inside the link's 250 ms delay
  const editThenCopy = (b) => page.evaluate(async (b) => {
    const input = document.querySelector('[data-testid=batch-input]');
    input.value = String(b);
    input.dispatchEvent(new Event('input', { bubbles: true }));
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    document.querySelector('[data-testid=copy-link]').click();
  }, b);
  await editThenCopy(11);
  await clipboardHas('11');
  await editThenCopy(12);
  await clipboardHas('12');
  assert.equal(await clipboard(), url, 'the same state, the same link');
  const before = await snapshot(page);
  await shot(page, '20-share-copy-link');

  const fresh = await openUrl(field);
  await waitAttr(fresh.page, 'params', 'data-count', (v) => v === before.params);
  assert.deepEqual(await snapshot(fresh.page), before);
  assert.equal(await fresh.page.getByTestId('link-notice').getAttribute('data-kind'), 'opened');
  assert.equal(await saved(fresh.page), null, 'opening a link saves nothing until an edit');
  assert.equal(fresh.page.url(), field, 'the address bar keeps the same link');
  // the first edit makes it the user's work: saved, notice gone
  await setBatch(fresh.page, 13);
  await fresh.page.getByTestId('link-notice').waitFor({ state: 'detached' });
  await fresh.page.waitForFunction((k) => JSON.parse(localStorage.getItem(k) ?? 'null')?.model?.config?.batch === 13, STORAGE_KEY);
  assert.deepEqual([...errors, ...fresh.errors], []);
  await fresh.context.close();
  await context.close();
});

test('presets are built by the app itself: with the second module unreachable, picking one works and nothing panics', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.route('**/vramcalc-web-extras*', (r) => r.abort());
  await page.goto(APP);
  await page.getByTestId('chart-capacity').waitFor();
  await pickPreset(page, 'vgg16');
  await waitAttr(page, 'params', 'data-count', (v) => v === '138357544');
  await pickPreset(page, 'llama-3.1-8b');
  await waitAttr(page, 'params', 'data-count', (v) => v === '8030261248');
  assert.equal(await page.getByTestId('preset-error').count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('presets, custom models and their links need no second module; a reload right after an edit keeps the edit', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const fetched = [];
  page.on('request', (r) => fetched.push(new globalThis.URL(r.url()).pathname));
  const wasm = () => fetched.filter((p) => p.includes('vramcalc-web-extras') && p.endsWith('.wasm'));
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // the module (the downloads panel) is held back: nothing else waits for it
  const release = await holdModule(page);
  await page.goto(APP);
  await page.getByTestId('chart-capacity').waitFor();
  await setBatch(page, 5);
  await addressBar(page, (f) => f.startsWith('v1.p=resnet50') && f.includes('b=5'));
  await page.getByTestId('whatif').waitFor();
  await pickPreset(page, 'vgg11');
  await setBatch(page, 6);
  await addressBar(page, (f) => f.startsWith('v1.p=vgg11') && f.includes('b=6'));
  // an edit makes the model custom: its link is the app's own codec's too
  await openRow(page.locator('[data-testid=layer-row]').last());
  await page.locator('[data-testid=layer-row]').last().getByTestId('layer-delete').click();
  await addressBar(page, (f) => f.startsWith('v1.s='));
  assert.equal(wasm().length, 0, fetched.join());
  release();
  // edit and reload at once: the saved work wins over the address bar's (lagging) copy. The app
  // stores an edit before any later task can run, so it is there as soon as the input is handled.
  await setBatch(page, 7);
  assert.equal(JSON.parse(await saved(page))?.model?.config?.batch, 7, 'stored with the edit, not later');
  await page.reload();
  await page.getByTestId('chart-capacity').waitFor();
  assert.equal(await page.getByTestId('batch-input').inputValue(), '7');
  assert.equal(await page.getByTestId('link-notice').count(), 0, 'its own copy is not an opened link');
  assert.deepEqual(errors, []);
  await context.close();
});

test('an edit survives closing the tab at once', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'resnet18');
  await setBatch(page, 13);
  await page.close();
  const { page: again } = await open(browser, { context });
  assert.equal(await again.getByTestId('preset-select').inputValue(), 'resnet18');
  assert.equal(await again.getByTestId('batch-input').inputValue(), '13');
  assert.deepEqual(errors, []);
  await context.close();
});

test('opening a link keeps the saved work until an edit, and "back to my saved model" restores it', async () => {
  const { context, page } = await open(browser);
  const mine = await saveWork(page, 'vgg11', 5);
  const link = `${APP}#v1.p=gpt2,b=4,g=h100-80gb`;
  const other = await openUrl(link, { context });
  await waitAttr(other.page, 'params', 'data-count', (v) => v !== '' && v !== null);
  assert.equal(await other.page.getByTestId('preset-select').inputValue(), 'gpt2');
  assert.equal(await other.page.getByTestId('batch-input').inputValue(), '4');
  assert.equal(await saved(other.page), mine, 'the saved work is untouched');
  await shot(other.page, '21-share-opened-link', { fullPage: false });
  await other.page.getByTestId('back-to-saved').click();
  await other.page.waitForFunction(() => document.querySelector('[data-testid=preset-select]').value === 'vgg11');
  assert.equal(await other.page.getByTestId('batch-input').inputValue(), '5');
  await addressBar(other.page, (f) => f.startsWith('v1.p=vgg11') && f.includes('b=5'));
  // another link pasted into the address bar of the open tab opens like a page load, here in 中文
  await other.page.evaluate(() => { location.hash = 'v1.p=resnet18,l=zh'; });
  await other.page.waitForFunction(() => document.querySelector('[data-testid=preset-select]')?.value === 'resnet18');
  await other.page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  assert.equal(await other.page.getByTestId('copy-link').textContent(), '复制链接');
  assert.match(await other.page.getByTestId('link-notice').textContent(), /分享链接/);
  assert.match(await other.page.getByTestId('exports').textContent(), /逐层表格/);
  assert.equal(await saved(other.page), mine, 'still the saved work');
  assert.deepEqual(other.errors, []);
  await context.close();
});

test('a tampered or truncated link shows what was wrong, opens the default model and keeps the saved work', async () => {
  const { context, page } = await open(browser);
  const mine = await saveWork(page, 'vgg11', 7);
  // a real custom-model link, then damaged
  await openRow(page.locator('[data-testid=layer-row]').last());
  await page.locator('[data-testid=layer-row]').last().getByTestId('layer-delete').click();
  const good = fragmentOf(await addressBar(page, (f) => f.startsWith('v1.s=')));
  await page.getByTestId('undo').click();
  await page.waitForFunction((k) => localStorage.getItem(k) !== null && JSON.parse(localStorage.getItem(k)).model.preset === 'vgg11', STORAGE_KEY);
  const mineAgain = await saved(page);
  const i = good.indexOf('s=') + 40;
  const cases = [
    [`${good.slice(0, i)}${good[i] === 'A' ? 'B' : 'A'}${good.slice(i + 1)}`, /link field `s`|malformed|not valid/],
    [good.slice(0, Math.floor(good.length / 2)), /link field `s`|malformed/],
    ['v1.p=vgg16,b=0', /link field `b`: batch size must be between 1/],
    ['v9.p=vgg16', /unknown link format `v9`/],
    ['v1.p=no-such-model', /unknown preset `no-such-model`/],
  ];
  for (const [frag, message] of cases) {
    const bad = await openUrl(`${APP}#${frag}`, { context });
    const notice = bad.page.getByTestId('link-notice');
    assert.equal(await notice.getAttribute('data-kind'), 'broken', frag);
    assert.match(await notice.textContent(), message);
    assert.equal(await bad.page.getByTestId('preset-select').inputValue(), 'resnet50', 'the default model');
    assert.equal(await saved(bad.page), mineAgain, 'the saved work is not overwritten');
    assert.deepEqual(bad.errors, []);
    if (frag === cases[0][0]) await shot(bad.page, '22-share-tampered-link', { fullPage: false });
    await bad.page.close();
  }
  assert.equal(JSON.parse(mineAgain).model.config.batch, JSON.parse(mine).model.config.batch);
  await context.close();
});

/** The 50-layer CNN of crates/core/tests/share.rs. */
function cnn50() {
  const layers = [];
  let c = 3;
  [32, 64, 128, 256, 512].forEach((width, stage) => {
    for (let i = 0; i < 3; i++) {
      layers.push({ kind: 'conv2d', in_channels: c, out_channels: width, kernel_size: 3, padding: 1, bias: false });
      layers.push({ kind: 'batch_norm2d', num_features: width });
      layers.push({ kind: 'relu', inplace: true });
      c = width;
    }
    if (stage < 2) layers.push({ kind: 'max_pool2d', kernel_size: 2 });
  });
  layers.push({ kind: 'adaptive_avg_pool2d', output_size: 1 }, { kind: 'flatten' }, { kind: 'linear', in_features: 512, out_features: 100 });
  assert.equal(layers.length, 50);
  return { version: 1, name: 'my-cnn', input: { shape: [3, 64, 64] }, layers };
}

test('link lengths: a preset with changed settings ≤ 120 characters, a custom 50-layer CNN ≤ 1,500', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  await setBatch(page, 8);
  await page.getByTestId('precision-select').selectOption('amp-bf16');
  await page.getByTestId('gpu-select').selectOption('a100-80gb');
  const preset = fragmentOf(await addressBar(page, (f) => f.startsWith('v1.p=gpt2') && f.includes('b=8') && f.includes('g=a100-80gb') && f.includes('pr=amp')));
  console.log(`LINK preset with changed settings: ${preset.length} characters: #${preset}`);
  assert.ok(preset.length <= 120, preset);

  await page.getByTestId('paste').locator('summary').click();
  await page.getByTestId('paste-text').fill(JSON.stringify(cnn50()));
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-ok').waitFor();
  await setBatch(page, 64);
  await page.getByTestId('gpu-select').selectOption('rtx-4090');
  const url = await addressBar(page, (f) => f.startsWith('v1.s=') && f.includes('b=64') && f.includes('g=rtx-4090'));
  console.log(`LINK custom 50-layer CNN: ${fragmentOf(url).length} characters after '#' (whole URL ${url.length})`);
  assert.ok(fragmentOf(url).length <= 1500, String(fragmentOf(url).length));
  const params = await page.getByTestId('params').getAttribute('data-count');
  const fresh = await openUrl(url);
  await waitAttr(fresh.page, 'params', 'data-count', (v) => v === params);
  assert.equal((await topKinds(fresh.page)).length, 50);
  assert.deepEqual([...errors, ...fresh.errors], []);
  await fresh.context.close();
  await context.close();
});

/** A host page on another origin (a second port) embedding the card, with the documented listener. */
function hostPage(src) {
  const listener = readFileSync(new globalThis.URL('../docs/embed.md', import.meta.url), 'utf8').match(/<script>[\s\S]*?<\/script>/)[0];
  return `<!doctype html><html><head><meta charset="utf-8"><title>a blog post</title></head>
<body style="margin:0;font:16px serif"><h1>My VRAM budget</h1><p>Here is the estimate:</p>
<div id="col" style="width:760px"><iframe id="card" src="${src.replace(/&/g, '&amp;')}" title="vramcalc" width="720" height="150" style="width:100%;max-width:720px;border:0"></iframe></div>
<p>after the card</p>
<script>window.__heights = []; addEventListener("message", (e) => { if (e.data && e.data.type === "vramcalc:height") window.__heights.push({ height: e.data.height, origin: e.origin }); });</script>
${listener}
</body></html>`;
}

test('embed: a card in an iframe on another origin renders, sizes itself and links back', async () => {
  // the state: VGG16 at batch 16 on an RTX 3090, made in the full app
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'vgg16');
  await setBatch(page, 16);
  await page.getByTestId('gpu-select').selectOption('rtx-3090');
  const frag = fragmentOf(await addressBar(page, (f) => f.startsWith('v1.p=vgg16') && f.includes('b=16') && f.includes('g=rtx-3090')));
  const appPeak = await bytes(page, 'peak');
  const appTotal = await bytes(page, 'device-total');
  const src = `${APP}embed.html?embed&controls=batch,gpu#${frag}`;
  const host = createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(hostPage(src)); });
  await new Promise((r) => host.listen(0, '127.0.0.1', r));
  const hostUrl = `http://127.0.0.1:${host.address().port}/post.html`;
  assert.notEqual(new globalThis.URL(hostUrl).origin, new globalThis.URL(APP).origin);
  try {
    const blog = await context.newPage();
    blog.on('pageerror', (e) => errors.push(String(e)));
    await blog.goto(hostUrl);
    const card = blog.frameLocator('#card');
    await card.getByTestId('embed-card').waitFor();
    assert.equal(await card.getByTestId('embed-title').textContent(), 'VGG-16 (torchvision)');
    assert.equal(Number(await card.getByTestId('peak').getAttribute('data-bytes')), appPeak, 'the same peak as the full app');
    assert.equal(Number(await card.getByTestId('device-total').getAttribute('data-bytes')), appTotal);
    await card.getByTestId('chart-breakdown').waitFor();
    assert.ok((await card.getByTestId('fit-status').textContent()).includes('RTX 3090'));
    // read-only: no editor, no settings panel
    assert.equal(await card.getByTestId('model-panel').count(), 0);
    assert.equal(await card.getByTestId('settings').count(), 0);
    // the parent got the height and the listener sized the iframe to it
    await blog.waitForFunction(() => window.__heights.length > 0 && document.getElementById('card').style.height !== '');
    const sized = await blog.evaluate(() => ({ last: window.__heights.at(-1), style: document.getElementById('card').style.height,
      box: document.getElementById('card').getBoundingClientRect() }));
    assert.equal(sized.last.origin, new globalThis.URL(APP).origin);
    assert.ok(sized.last.height > 250 && sized.last.height < 900, JSON.stringify(sized));
    assert.equal(sized.style, `${sized.last.height}px`);
    assert.ok(sized.box.width <= 720, `card iframe is ${sized.box.width}px wide`);
    const inner = await card.getByTestId('embed-card').boundingBox();
    assert.ok(inner.height <= sized.last.height, 'the whole card is visible');
    await shot(blog, '23-embed-in-blog');
    // "Open in vramcalc": the full app with the same state, in a new tab
    const openFull = card.getByTestId('open-full');
    assert.equal(await openFull.getAttribute('target'), '_blank');
    assert.equal(await openFull.getAttribute('href'), `${APP}#${frag}`);
    // exposed controls change the card live (and the link back follows)
    await card.getByTestId('embed-batch').evaluate((el) => { el.value = '6'; el.dispatchEvent(new Event('input', { bubbles: true })); });
    await card.getByTestId('peak').and(card.locator(`[data-bytes]:not([data-bytes="${appPeak}"])`)).waitFor();
    assert.ok(Number(await card.getByTestId('peak').getAttribute('data-bytes')) > appPeak);
    await card.locator('[data-testid=open-full][href*="b=64"]').waitFor(); // the link follows once edits settle
    await card.getByTestId('embed-gpu').selectOption('h100-80gb');
    await card.getByTestId('fit-status').filter({ hasText: 'H100' }).waitFor();
    await card.locator('[data-testid=open-full][href*="g=h100-80gb"]').waitFor();
    // a narrower column: the card reflows taller and reports its new height
    const n = await blog.evaluate(() => window.__heights.length);
    const tall = sized.last.height;
    await blog.evaluate(() => { document.getElementById('col').style.width = '340px'; });
    await blog.waitForFunction(([n, h]) => window.__heights.length > n && window.__heights.at(-1).height > h, [n, tall]);
    await blog.waitForFunction(() => document.getElementById('card').style.height === `${window.__heights.at(-1).height}px`);
    await shot(blog, '24-embed-narrow');
    // the link back opens the full app with the card's state
    const [full] = await Promise.all([context.waitForEvent('page'), openFull.click()]);
    await full.getByTestId('chart-capacity').waitFor();
    assert.equal(await full.getByTestId('batch-input').inputValue(), '64');
    assert.equal(await full.getByTestId('gpu-select').inputValue(), 'h100-80gb');
    assert.equal(await full.getByTestId('preset-select').inputValue(), 'vgg16');
    assert.deepEqual(errors, []);
  } finally {
    host.close();
    await context.close();
  }
});

test('embed: a broken link shows the message in the card; no LocalStorage is touched', async () => {
  const context = await browser.newContext({ viewport: { width: 720, height: 600 } });
  const page = await context.newPage();
  // the address form of the first release: the app forwards it to the embed page
  await page.goto(`${APP}?embed#v1.p=nope`);
  await page.getByTestId('embed-card').waitFor();
  assert.equal(page.url(), `${APP}embed.html?embed#v1.p=nope`);
  assert.match(await page.getByTestId('link-notice').textContent(), /unknown preset `nope`/);
  await page.getByTestId('peak').waitFor();
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.equal(await page.getByTestId('embed-controls').count(), 0, 'no controls unless the author asks');
  await context.close();
});

test('Embed: the builder page has the snippet for the current state, controls, a live preview, the listener', async () => {
  const { context, page: app, errors } = await open(browser);
  await pickPreset(app, 'resnet18');
  const frag = fragmentOf(await addressBar(app, (f) => f.startsWith('v1.p=resnet18')));
  const appPeak = await bytes(app, 'peak');
  // a page of the embed bundle, opened beside the app
  const [page] = await Promise.all([context.waitForEvent('page'), app.getByTestId('open-embed').click()]);
  page.on('pageerror', (e) => errors.push(String(e)));
  assert.equal(page.url(), `${APP}embed.html?builder#${frag}`);
  const snippet = page.getByTestId('embed-snippet');
  assert.match(await snippet.inputValue(), new RegExp(`^<iframe src="${APP.replace(/[.?]/g, '\\$&')}embed\\.html\\?embed#${frag.replace(/[.?]/g, '\\$&')}" title="vramcalc" width="720" height="\\d+"`));
  await page.getByTestId('embed-control-gpu').check();
  await page.getByTestId('embed-control-batch').check();
  assert.match(await snippet.inputValue(), /\?embed&amp;controls=batch,gpu#v1\.p=resnet18/);
  assert.match(await page.getByTestId('embed-listener').textContent(), /vramcalc:height/);
  const preview = page.frameLocator('[data-testid=embed-preview]');
  await preview.getByTestId('embed-card').waitFor();
  await preview.getByTestId('embed-batch').waitFor();
  assert.equal(await preview.getByTestId('peak').getAttribute('data-bytes'), String(appPeak));
  // the preview is sized from the card's height messages
  await page.waitForFunction(() => {
    const f = document.querySelector('[data-testid=embed-preview]');
    const card = f.contentDocument?.querySelector('[data-testid=embed-card]');
    return card && Math.abs(f.getBoundingClientRect().height - f.contentDocument.body.getBoundingClientRect().height) <= 4;
  });
  await shot(page, '25-embed-builder', { fullPage: false });
  assert.deepEqual(errors, []);
  await context.close();
});

/** The CLI's `estimate --json` for a preset (same schema as the app's JSON download). */
function cliJson(preset, batch) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', '--preset', preset, '--batch', String(batch), '--json'],
    { encoding: 'utf8', timeout: 600_000, stdio: ['ignore', 'pipe', 'pipe'] }));
}

test('downloads: per-layer CSV, estimate JSON (the CLI schema) and standalone SVG charts', async () => {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(APP);
  await page.getByTestId('chart-capacity').waitFor();
  await pickPreset(page, 'vgg16');
  await waitAttr(page, 'params', 'data-count', (v) => v === '138357544');
  const download = async (testid) => {
    const [d] = await Promise.all([page.waitForEvent('download'), page.getByTestId(testid).click()]);
    return { name: d.suggestedFilename(), text: readFileSync(await d.path(), 'utf8') };
  };
  const csv = await download('export-csv');
  assert.equal(csv.name, 'vgg16-layers.csv');
  const rows = csv.text.trim().split(/\r?\n/);
  assert.equal(rows[0], 'path,kind,depth,output_shape,params,activation_values,saved_bytes');
  // cs231n's VGG16 table: conv3-64 on 224², 1,792 params, 3.2M values; the 4096→1000 classifier
  assert.ok(rows.some((r) => /,conv2d,\d+,64x224x224,1792,3211264,\d+$/.test(r)), rows.slice(0, 4).join('\n'));
  assert.ok(rows.some((r) => /,linear,\d+,1000,4097000,1000,\d+$/.test(r)));
  const rowCount = await page.getByTestId('table-toggle').textContent();
  assert.ok(rowCount.includes(String(rows.length - 1)), `${rowCount} vs ${rows.length - 1} rows`);

  const json = await download('export-json');
  assert.equal(json.name, 'vgg16-estimate.json');
  const est = JSON.parse(json.text);
  assert.equal(est.model, 'vgg16');
  assert.equal(est.params, 138357544);
  assert.equal(est.peak_bytes, await bytes(page, 'peak'));
  assert.equal(est.device_total_bytes, await bytes(page, 'device-total'));
  const cli = cliJson('vgg16', 32);
  assert.deepEqual(Object.keys(est).sort(), Object.keys(cli).sort(), 'the same schema as `vramcalc estimate --json`');
  assert.equal(est.peak_bytes, cli.peak_bytes);

  for (const chart of ['capacity', 'breakdown', 'timeline', 'batch', 'layers']) {
    const svg = await download(`export-svg-${chart}`);
    assert.equal(svg.name, `vgg16-${chart}.svg`);
    assert.match(svg.text, /^<\?xml version="1.0" encoding="UTF-8"\?>\n<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.doesNotMatch(svg.text, /var\(--|class="/, 'no stylesheet needed');
    const parsed = await page.evaluate((text) => {
      const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
      return { error: doc.querySelector('parsererror')?.textContent ?? null, root: doc.documentElement.localName,
        ns: doc.documentElement.namespaceURI, width: doc.documentElement.getAttribute('width'), shapes: doc.querySelectorAll('rect, path, line').length };
    }, svg.text);
    assert.deepEqual([parsed.error, parsed.root, parsed.ns], [null, 'svg', 'http://www.w3.org/2000/svg'], chart);
    assert.ok(Number(parsed.width) > 0 && parsed.shapes > 0, JSON.stringify(parsed));
    if (chart === 'breakdown') assert.match(svg.text, /fill:\s*rgb\(/, 'colours inlined');
    assert.match(svg.text, /^<\?xml[^\n]*\n<svg[^>]*><rect width="100%" height="100%" fill="rgb\(/, 'an opaque background first');
  }
  // a dark-mode export carries its dark background with its light text
  await page.getByTestId('theme-select').selectOption('dark');
  const dark = (await download('export-svg-timeline')).text;
  const brightness = (rgb) => rgb.match(/\d+/g).slice(0, 3).map(Number).reduce((a, b) => a + b, 0) / 3;
  assert.ok(brightness(dark.match(/<rect width="100%" height="100%" fill="(rgb[^"]+)"/)[1]) < 80, 'dark background');
  assert.ok(brightness(dark.match(/<text[^>]*style="[^"]*fill:\s*(rgb\([^)]*\))/)[1]) > 150, 'light text');
  // rendered alone, as an image, it has pixels
  const alone = await download('export-svg-timeline');
  const img = await context.newPage();
  await img.setContent(`<img id="i" src="data:image/svg+xml;base64,${Buffer.from(alone.text).toString('base64')}">`);
  await img.waitForFunction(() => document.getElementById('i').complete && document.getElementById('i').naturalWidth > 0);
  assert.deepEqual(errors, []);
  await context.close();
});
