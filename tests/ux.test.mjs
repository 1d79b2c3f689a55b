// Issue 16: the app as people use it. The verdict stays in view, one truth per setting, units
// that say what they are, a fix beside the verdict, a log-scale batch slider.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { launch, open, waitAttr, pickPreset, setBatch, shot, openRow } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const config = (name) => readFileSync(new globalThis.URL(`./data/${name}`, import.meta.url), 'utf8');

/** The sticky summary's box lies inside the viewport. */
async function summaryInView(page) {
  const box = await page.getByTestId('summary').boundingBox();
  const { height } = page.viewportSize();
  assert.ok(box && box.y >= -0.5 && box.y + box.height <= height + 0.5, `summary at ${JSON.stringify(box)}, viewport ${height}`);
  return box;
}

test('the sticky summary stays in view: desktop, VGG-16 scrolled to its last layer', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  await pickPreset(page, 'vgg16');
  await waitAttr(page, 'params', 'data-count', (v) => v === '138357544');
  await page.locator('[data-testid=layer-row]').last().scrollIntoViewIfNeeded();
  assert.ok(await page.evaluate(() => window.scrollY) > 1000, 'the page did scroll');
  await summaryInView(page);
  const text = await page.getByTestId('summary').textContent();
  assert.match(text, /Peak allocated/);
  assert.match(text, /(Fits|Does not fit)/);
  assert.match(text, /Largest batch that fits: \d+|Not even batch 1 fits/);
  // the peak and the verdict are announced
  assert.equal(await page.getByTestId('summary').locator('[aria-live=polite]').count(), 1);
  await shot(page, '30-ux-desktop-vgg16-last-layer', { fullPage: false });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the sticky summary stays in view: a 390 px phone, at the setup (below the model) and after a batch edit', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 390, height: 844 } });
  await page.getByTestId('batch-input').scrollIntoViewIfNeeded(); // the setup follows the model (issue 23)
  assert.ok(await page.evaluate(() => window.scrollY) > 300, 'the page did scroll');
  await summaryInView(page);
  await pickPreset(page, 'vgg16');
  await page.getByTestId('batch-input').scrollIntoViewIfNeeded();
  await setBatch(page, 8);
  await page.getByTestId('summary').filter({ hasText: 'Peak' }).waitFor();
  await summaryInView(page);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `page is ${overflow}px wider than the screen`);
  await shot(page, '31-ux-phone-preset-picker', { fullPage: false });
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, '32-ux-phone-top', { fullPage: false });
  assert.deepEqual(errors, []);
  await context.close();
});

test('units: binary by default, a bare capacity is GiB, one driver-reported capacity per card', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  assert.match(await page.getByTestId('peak').textContent(), /GiB|MiB/);
  const h200 = await page.locator('[data-testid=gpu-select] option[value=h200]').textContent();
  assert.match(h200, /^H200 — 143,771 MiB$/, h200);
  for (const o of await page.locator('[data-testid=gpu-select] option').allTextContents()) {
    assert.ok(!/\bGB\b/.test(o), `one capacity per card: ${o}`);
  }
  assert.match(await page.getByTestId('settings').textContent(), /nvidia-smi/);
  await page.getByTestId('gpu-select').selectOption('h200');
  assert.match(await page.getByTestId('fit-status').textContent(), /H200 \(143,771 MiB, nvidia-smi\)/);
  // a bare number is GiB, and the field says so
  await page.getByTestId('gpu-select').selectOption('custom');
  await page.getByTestId('capacity-input').fill('8');
  await page.getByTestId('fit-status').filter({ hasText: '8.00 GiB' }).waitFor();
  assert.match(await page.getByTestId('settings').textContent(), /bare number is GiB/);
  await page.getByTestId('capacity-input').fill('8 GB');
  await page.getByTestId('fit-status').filter({ hasText: '7.45 GiB' }).waitFor();
  // MB stays an option
  await page.getByTestId('unit-select').selectOption('MB');
  assert.match(await page.getByTestId('peak').textContent(), /\b(GB|MB)$/);
  assert.match(await page.locator('[data-testid=gpu-select] option[value=h200]').textContent(), /150,754 MB/);
  assert.deepEqual(errors, []);
  await context.close();
});

test('one truth per setting: sequence length and input shape, inference mode, in-place ReLU', async () => {
  const { context, page, errors } = await open(browser);
  assert.equal(await page.getByTestId('inplace-select').count(), 1, 'ResNet has ReLUs');
  await pickPreset(page, 'bert-base');
  assert.equal(await page.getByTestId('inplace-select').count(), 0, 'BERT has no ReLU');
  await page.getByTestId('seq-input').fill('64');
  await page.waitForFunction(() => document.querySelector('[data-testid=input-shape]').value === '64');
  assert.match(await page.locator('[data-testid=layer-row]').first().getByTestId('layer-shape').textContent(), /\[64\b/);
  await page.getByTestId('input-shape').fill('256');
  await page.waitForFunction(() => document.querySelector('[data-testid=seq-input]').value === '256');
  assert.match(await page.locator('[data-testid=layer-row]').first().getByTestId('layer-shape').textContent(), /\[256\b/);
  assert.equal(await page.getByTestId('preset-select').inputValue(), 'bert-base', 'still the preset');
  // inference: no training setup, no optimizer, no Adam in the rule of thumb
  assert.match(await page.getByTestId('rule-of-thumb').textContent(), /params × 4 \(adamw\)/);
  await page.getByTestId('mode-select').selectOption('infer');
  // one setup panel: its mode says what it sets up (issue 23)
  await page.locator('[data-testid=settings][data-mode=infer]').waitFor();
  assert.equal(await page.getByTestId('optimizer-select').count(), 0);
  const rule = await page.getByTestId('rule-of-thumb').textContent();
  assert.ok(!/Adam|adam|× 4/.test(rule), rule);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a pasted Hugging Face config starts at a stated sequence length', async () => {
  const { context, page, errors } = await open(browser);
  await page.getByTestId('paste').locator('summary').click();
  await page.getByTestId('paste-text').fill(config('tinyllama-1.1b.config.json'));
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-ok').waitFor();
  const note = page.getByTestId('import-assumed');
  await note.waitFor();
  assert.match(await note.textContent(), /sequence length 512 assumed.*context is 2048/);
  assert.equal(await page.getByTestId('seq-input').inputValue(), '512');
  assert.equal(await page.getByTestId('input-shape').inputValue(), '512');
  // once the user sets a length it is no longer an assumption
  await page.getByTestId('seq-input').fill('1024');
  await note.waitFor({ state: 'detached' });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the verdict leads with the fix: use the largest batch, or the cheapest what-if that fits', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  await page.getByTestId('gpu-select').selectOption('custom');
  await page.getByTestId('capacity-input').fill('3');
  await waitAttr(page, 'summary', 'data-fits', (v) => v === 'false');
  const bar = page.getByTestId('summary');
  assert.match(await bar.textContent(), /Does not fit — [\d.]+ (GiB|MiB) over/);
  const max = Number((await bar.getByTestId('summary-max').textContent()).match(/\d+/)[0]);
  assert.ok(max >= 1 && max < 32, `largest batch ${max}`);
  // the cheapest what-if that fits, clickable
  const fix = bar.getByTestId('fix-whatif');
  await fix.waitFor();
  const trick = await fix.getAttribute('data-trick');
  await fix.click();
  await waitAttr(page, 'summary', 'data-fits', (v) => v === 'true');
  if (trick === 'amp') assert.equal(await page.getByTestId('precision-select').inputValue(), 'amp-bf16');
  await page.getByTestId('undo').click();
  await waitAttr(page, 'summary', 'data-fits', (v) => v === 'false');
  // "Use N"
  await bar.getByTestId('use-max-batch').click();
  await waitAttr(page, 'summary', 'data-fits', (v) => v === 'true');
  assert.equal(await page.getByTestId('batch-input').inputValue(), String(max));
  // the capacity line never runs through a value label
  await page.getByTestId('capacity-input').fill('12');
  for (const cap of ['2', '3', '4', '5', '6', '9', '12']) {
    await page.getByTestId('capacity-input').fill(cap);
    await page.waitForTimeout(50);
    const clash = await page.evaluate(() => {
      const svg = document.querySelector('[data-testid=chart-capacity]');
      const x = svg.querySelector('.capacity-line').getBBox().x;
      return [...svg.querySelectorAll('text.value')].map((t) => t.getBBox()).filter((b) => x >= b.x - 1 && x <= b.x + b.width + 1).length;
    });
    assert.equal(clash, 0, `capacity ${cap} GiB: the line crosses a label`);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test('the batch slider is a log scale snapping to powers of two, 1 … 4096', async () => {
  const { context, page, errors } = await open(browser);
  const slider = page.getByTestId('batch-slider');
  assert.deepEqual([await slider.getAttribute('min'), await slider.getAttribute('max')], ['0', '12']);
  const slide = (v) => slider.evaluate((el, v) => { el.value = v; el.dispatchEvent(new Event('input', { bubbles: true })); }, v);
  for (const [pos, batch] of [['12', '4096'], ['0', '1'], ['3', '8']]) {
    await slide(pos);
    await page.waitForFunction((b) => document.querySelector('[data-testid=batch-input]').value === b, batch);
  }
  // the number field still takes any value; the thumb sits at the nearest power of two
  await setBatch(page, 100);
  await page.waitForFunction(() => document.querySelector('[data-testid=batch-slider]').value === '7');
  assert.equal(await slider.getAttribute('aria-valuetext'), '100');
  assert.deepEqual(errors, []);
  await context.close();
});

test('error and empty states agree: a neutral empty model; a stale verdict with a link to the row and its fix', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'vgg16');
  const good = Number(await page.getByTestId('peak').getAttribute('data-bytes'));
  // a shape error: the verdict and the what-ifs are visibly stale
  const row = page.locator('[data-testid=layer-row][data-kind=linear]').first();
  const path = await row.getAttribute('data-path');
  await openRow(row);
  await row.getByTestId('field-in_features').fill('1234');
  await waitAttr(page, 'summary', 'data-stale', (v) => v === 'true');
  assert.match(await page.getByTestId('summary').textContent(), /Stale/);
  await page.locator('[data-testid=whatif].is-stale').waitFor();
  assert.ok(await page.getByTestId('whatif-amp').isDisabled(), 'stale what-ifs cannot be applied');
  // the banner links to the failing row and offers the fix the message implies
  const banner = page.getByTestId('estimate-error');
  await banner.getByTestId('error-goto').click();
  await page.waitForFunction((p) => document.activeElement?.closest('[data-testid=layer-row]')?.dataset.path === p, path);
  assert.match(await banner.getByTestId('error-fix').textContent(), /in_features to 25088/);
  await banner.getByTestId('error-fix').click();
  await banner.waitFor({ state: 'detached' });
  await waitAttr(page, 'summary', 'data-stale', (v) => v === 'false');
  assert.equal(Number(await page.getByTestId('peak').getAttribute('data-bytes')), good);
  // "Start empty": a neutral "add a layer", no error and no previous model's numbers
  await page.getByTestId('start-empty').click();
  await page.getByTestId('no-layers').waitFor();
  await waitAttr(page, 'summary', 'data-empty', (v) => v === 'true');
  assert.match(await page.getByTestId('summary').textContent(), /Add a layer/);
  assert.equal(await page.getByTestId('estimate-error').count(), 0);
  assert.equal(await page.getByTestId('peak').count(), 0);
  assert.equal(await page.getByTestId('fit-status').count(), 0);
  await shot(page, '33-ux-empty', { fullPage: false });
  assert.deepEqual(errors, []);
  await context.close();
});

test('what-ifs keep their place: applied shows as applied with an undo; no-ops are hidden', async () => {
  const { context, page, errors } = await open(browser);
  const items = () => page.$$eval('[data-testid=whatif] li', (lis) => lis.map((li) => li.dataset.testid ?? li.querySelector('button')?.dataset.testid));
  await page.getByTestId('whatif-amp').waitFor();
  const before = await items();
  const at = before.indexOf('whatif-amp');
  await page.getByTestId('whatif-amp').click();
  await page.getByTestId('whatif-applied-amp').waitFor();
  const after = await items();
  assert.equal(after.indexOf('whatif-applied-amp'), at, `${before} → ${after}`);
  assert.equal(await page.getByTestId('precision-select').inputValue(), 'amp-bf16');
  await page.getByTestId('whatif-undo-amp').click();
  await page.getByTestId('whatif-amp').waitFor();
  assert.equal(await page.getByTestId('precision-select').inputValue(), 'fp32');
  // a trick that changes nothing is not offered (inference has no optimizer or gradients)
  await page.getByTestId('mode-select').selectOption('infer');
  await page.getByTestId('whatif-sgd').waitFor({ state: 'detached' });
  assert.ok(!/no change/.test(await page.getByTestId('whatif').textContent()));
  assert.deepEqual(errors, []);
  await context.close();
});

test('a layer editor that scales: one-line rows that open on click, collapse all, skip links', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  await pickPreset(page, 'vgg16');
  const rows = page.locator('[data-testid=layer-row]');
  const n = await rows.count();
  assert.ok(n > 30);
  // closed rows: one line each (kind, output shape, params, share), no fields, one Tab stop
  assert.equal(await page.locator('[data-testid=layer-row][data-open=true]').count(), 0);
  assert.equal(await page.locator('.row-fields').count(), 0);
  const conv = page.locator('[data-testid=layer-row][data-kind=conv2d]').first();
  const h = (await conv.boundingBox()).height;
  assert.ok(h < 40, `a closed row is one line (${h}px)`);
  assert.match(await conv.textContent(), /conv2d.*→ \[64, 224, 224\].*1,792 params/);
  const stops = await page.$$eval('[data-testid=layers] button, [data-testid=layers] input, [data-testid=layers] select',
    (els) => els.filter((e) => !e.disabled && e.offsetParent !== null).length);
  assert.ok(stops < n + 20, `${stops} Tab stops for ${n} rows`);
  // a click opens a row, another closes it
  await conv.locator('.row-handle').click();
  await conv.getByTestId('field-out_channels').waitFor();
  assert.equal(await conv.locator('.row-handle').getAttribute('aria-expanded'), 'true');
  await conv.locator('.row-handle').click();
  await conv.getByTestId('field-out_channels').waitFor({ state: 'detached' });
  // collapse all closes rows and folds blocks
  await conv.locator('.row-handle').click();
  await page.getByTestId('collapse-all').click();
  assert.equal(await page.locator('[data-testid=layer-row][data-open=true]').count(), 0);
  // skip links: the first Tab stop, and they jump past the editor
  await page.evaluate(() => { document.body.tabIndex = -1; document.body.focus(); });
  await page.keyboard.press('Tab');
  assert.match(await page.evaluate(() => document.activeElement.textContent), /Skip to the estimate/);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'summary-h');
  assert.ok(!(await page.evaluate(() => location.hash)).includes('summary-h'), 'the share link stays in the address bar');
  await shot(page, '34-ux-vgg16-editor', { fullPage: true });
  // resnet: blocks fold with collapse all
  await pickPreset(page, 'resnet18');
  await page.getByTestId('collapse-all').click();
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=layer-toggle]')].every((b) => b.getAttribute('aria-expanded') === 'false'));
  assert.deepEqual(errors, []);
  await context.close();
});

test('rows read as the model\'s own names (torchvision, transformers) with the path in the title; a structural edit goes back to paths', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  await pickPreset(page, 'vgg16');
  const label = (path) => page.locator(`[data-testid=layer-row][data-path="${path}"] code.path`);
  assert.equal(await label('layers[0]').textContent(), 'features.0');
  assert.equal(await label('layers[0]').getAttribute('title'), 'layers[0]');
  assert.equal(await label('layers[31]').textContent(), 'avgpool');
  assert.equal(await label('layers[39]').textContent(), 'classifier.6');
  assert.equal(await label('layers[32]').textContent(), 'layers[32]', 'torch.flatten is no module: its path');
  // the per-layer table: the same names, the path in the title
  const cell = (path) => page.locator(`[data-testid=layer-table-row][data-path="${path}"] code`);
  assert.equal(await cell('layers[0]').textContent(), 'features.0');
  // ResNet: blocks numbered, the layers inside by torchvision's names
  await pickPreset(page, 'resnet50');
  await page.getByTestId('table-toggle').click();
  assert.equal(await cell('layers[5].layers[0].layers[0].shortcut[0]').textContent(), 'layer2.0.downsample.0');
  assert.equal(await cell('layers[4].layers[2].layers[0].body[6]').textContent(), 'layer1.2.conv3');
  // a language model: every repetition of the decoder layer is `model.layers.<i>`
  await pickPreset(page, 'llama-3.1-8b');
  await page.locator('[data-testid=layer-table-row][data-path="layers[1].body#31[0]"]').waitFor({ timeout: 20000 });
  assert.equal(await cell('layers[1].body#31[0]').textContent(), 'model.layers.31');
  assert.equal(await cell('layers[3]').textContent(), 'lm_head');
  // a structural edit: the rows show their paths (a name never lands on another layer); undo brings them back
  await pickPreset(page, 'vgg16');
  await page.locator('[data-testid=layer-row][data-path="layers[0]"] .row-handle').click();
  await page.locator('[data-testid=layer-row][data-path="layers[0]"]').getByTestId('layer-delete').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=layer-row][data-path="layers[0]"] code.path')?.textContent === 'layers[0]');
  await page.keyboard.press('Control+z');
  await page.waitForFunction(() => document.querySelector('[data-testid=layer-row][data-path="layers[0]"] code.path')?.textContent === 'features.0');
  assert.deepEqual(errors, []);
  await context.close();
});

test('charts you can ask: the timeline names the layer under the pointer and a click goes to its row; "Peak at" links to its row; a click on the batch chart sets the batch', async () => {
  const { page, errors } = await open(browser);
  // the timeline's strip under the pointer: its layer, phase and bytes
  const hits = page.locator('[data-testid=timeline-hits] rect[data-path]');
  assert.ok(await hits.count() >= 50);
  const deep = page.locator('[data-testid=timeline-hits] rect[data-path*="."]').first();
  const path = await deep.getAttribute('data-path');
  const tip = await deep.locator('title').textContent();
  assert.ok(tip.startsWith(path) && /(forward|backward)/.test(tip) && /B/.test(tip), tip);
  await deep.hover();
  await deep.click();
  // its row (inside a block that was folded) is opened and focused
  await page.waitForFunction((p) => document.activeElement?.closest('[data-testid=layer-row]')?.dataset.path === p, path);
  // "Peak at": a link to the row of the layer whose op reaches the peak
  const link = page.getByTestId('peak-at-link');
  const peakPath = await link.getAttribute('data-path');
  await link.click();
  await page.waitForFunction((p) => document.activeElement?.closest('[data-testid=layer-row]')?.dataset.path === p, peakPath);
  // the batch chart: a click on a swept batch sets it
  const current = await page.getByTestId('batch-input').inputValue();
  const column = page.locator(`[data-testid=batch-hits] rect:not([data-batch="${current}"])`).nth(2);
  const batch = await column.getAttribute('data-batch');
  await column.click();
  await page.waitForFunction((b) => document.querySelector('[data-testid=batch-input]')?.value === b, batch);
  assert.deepEqual(errors, []);
});

test('the page reads top-down: the model first, then the setup, then the LLM setup (desktop and phone)', async () => {
  for (const viewport of [{ width: 1440, height: 900 }, { width: 390, height: 844 }]) {
    const { context, page, errors } = await open(browser, { viewport });
    const y = async (id) => (await page.getByTestId(id).boundingBox()).y;
    const [model, setup, llm] = [await y('model-panel'), await y('settings'), await y('llm')];
    assert.ok(model < setup && setup < llm, `model ${model}, setup ${setup}, llm ${llm} at ${viewport.width} px`);
    assert.ok(await y('preset-select') < viewport.height, 'the model picker is on the first screen');
    assert.deepEqual(errors, []);
    await context.close();
  }
});
