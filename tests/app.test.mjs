// End-to-end tests of the vramcalc web app in headless Chromium (run by tests/e2e.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { launch, open, bytes, waitAttr, pickPreset, setBatch, shot, topKinds, openRow } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The CLI's peak for the same settings (the app must show the same number). */
function cliPeak(preset, batch) {
  const out = execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', 'estimate', '--preset', preset, '--batch', String(batch), '--json'],
    { encoding: 'utf8', timeout: 600_000, stdio: ['ignore', 'pipe', 'pipe'] });
  return JSON.parse(out).peak_bytes;
}

test('VGG16: 138,357,544 parameters and the same peak as the CLI', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'vgg16');
  await waitAttr(page, 'params', 'data-count', (v) => v === '138357544');
  assert.equal(await page.getByTestId('params').textContent(), '138,357,544');
  await setBatch(page, 16);
  await page.waitForFunction(() => document.querySelector('[data-testid=batch-input]').value === '16');
  const peak16 = Number(await waitAttr(page, 'peak', 'data-bytes', (v) => v && v !== '0'));
  assert.equal(peak16, cliPeak('vgg16', 16), 'peak at batch 16 equals `vramcalc estimate --preset vgg16 --batch 16 --json`');
  await setBatch(page, 32);
  const peak32 = Number(await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) !== peak16));
  assert.equal(peak32, cliPeak('vgg16', 32));
  await shot(page, '01-vgg16-desktop');
  assert.deepEqual(errors, []);
  await context.close();
});

test('changing the batch size changes the peak and the charts', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'resnet50');
  const p32 = await bytes(page, 'peak');
  await setBatch(page, 8);
  const p8 = Number(await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) !== p32));
  const timeline8 = await page.locator('[data-testid=chart-timeline] path.line').getAttribute('d');
  const capacity8 = await page.locator('[data-testid=chart-capacity] rect.bar').first().getAttribute('width');
  // the slider
  await page.getByTestId('batch-slider').evaluate((el) => { el.value = '6'; el.dispatchEvent(new Event('input', { bubbles: true })); });
  const p64 = Number(await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) !== p8));
  assert.ok(p64 > p8, `peak grows with the batch (${p8} → ${p64})`);
  assert.equal(await page.getByTestId('batch-input').inputValue(), '64');
  assert.notEqual(await page.locator('[data-testid=chart-timeline] path.line').getAttribute('d'), timeline8);
  assert.notEqual(await page.locator('[data-testid=chart-capacity] rect.bar').first().getAttribute('width'), capacity8);
  assert.ok(Number(await page.getByTestId('max-batch').getAttribute('data-max')) > 0);
  // a run of batch edits is one undo step: undo goes back to 32, redo to 64
  await page.getByTestId('undo').click();
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === p32);
  assert.equal(await page.getByTestId('batch-input').inputValue(), '32');
  await page.getByTestId('redo').click();
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) === p64);
  // a what-if applies its setting
  await page.getByTestId('whatif-amp').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=precision-select]').value === 'amp-bf16');
  assert.ok((await bytes(page, 'peak')) < p64, 'AMP lowers the peak');
  await shot(page, '02-resnet50-batch64-amp');
  assert.deepEqual(errors, []);
  await context.close();
});

test('add, edit, reorder, duplicate, group and delete layers', async () => {
  const { context, page, errors } = await open(browser);
  await page.getByTestId('start-empty').click();
  await page.getByTestId('no-layers').waitFor();
  await page.getByTestId('input-shape').fill('3, 32, 32');
  const add = async (kind) => {
    await page.getByTestId('add-layer').click();
    await page.getByTestId('add-layer-search').fill(kind);
    await page.getByTestId(`add-kind-${kind}`).click();
  };
  await add('conv2d');
  await add('relu');
  await page.getByTestId('add-layer').click();
  await page.getByTestId('add-layer-search').fill('flat');
  await page.getByTestId('add-layer-search').press('Enter'); // first match
  await add('linear');
  assert.deepEqual(await topKinds(page), ['conv2d', 'relu', 'flatten', 'linear']);
  // input sizes were fitted to the incoming shapes: conv 3→16 (448), linear 16·32·32→128
  await waitAttr(page, 'params', 'data-count', (v) => v === String(448 + 16 * 32 * 32 * 128 + 128));
  const linear = page.locator('[data-testid=layer-row][data-path="layers[3]"]');
  assert.equal(await linear.getByTestId('field-in_features').inputValue(), '16384');
  assert.match(await linear.getByTestId('layer-shape').textContent(), /\[128\]/);
  // edit
  await linear.getByTestId('field-out_features').fill('10');
  await waitAttr(page, 'params', 'data-count', (v) => v === String(448 + 16384 * 10 + 10));
  // reorder with buttons: flatten up, then back down with the keyboard
  await page.locator('[data-testid=layer-row][data-path="layers[2]"]').getByTestId('layer-up').click();
  assert.deepEqual(await topKinds(page), ['conv2d', 'flatten', 'relu', 'linear']);
  await page.locator('[data-testid=layer-row][data-path="layers[1]"] .row-handle').focus();
  await page.keyboard.press('Alt+ArrowDown');
  await page.waitForFunction(() => document.querySelector('[data-testid=layer-row][data-path="layers[2]"]').dataset.kind === 'flatten');
  assert.deepEqual(await topKinds(page), ['conv2d', 'relu', 'flatten', 'linear']);
  // duplicate and delete
  await page.locator('[data-testid=layer-row][data-path="layers[1]"]').getByTestId('layer-duplicate').click();
  assert.deepEqual(await topKinds(page), ['conv2d', 'relu', 'relu', 'flatten', 'linear']);
  await page.locator('[data-testid=layer-row][data-path="layers[2]"]').getByTestId('layer-delete').click();
  assert.deepEqual(await topKinds(page), ['conv2d', 'relu', 'flatten', 'linear']);
  // group conv + relu into a residual block, see its children, then ungroup
  await page.locator('[data-testid=layer-row][data-path="layers[0]"]').getByTestId('layer-select').check();
  await page.locator('[data-testid=layer-row][data-path="layers[1]"]').getByTestId('layer-select').check();
  await page.getByTestId('group-residual').click();
  assert.deepEqual(await topKinds(page), ['residual', 'flatten', 'linear']);
  await page.locator('[data-testid=layer-row][data-path="layers[0].body[1]"]').waitFor();
  await shot(page, '03-custom-model-grouped');
  await page.locator('[data-testid=layer-row][data-path="layers[0]"]').getByTestId('layer-ungroup').click();
  assert.deepEqual(await topKinds(page), ['conv2d', 'relu', 'flatten', 'linear']);
  await page.keyboard.press('Escape');
  assert.equal(await page.getByTestId('estimate-error').count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('an invalid value shows an error at the field and the page keeps working', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'vgg16');
  await waitAttr(page, 'params', 'data-count', (v) => v === '138357544');
  const good = await bytes(page, 'peak');
  // a shape mismatch: the core's error at the row, the last good estimate stays
  const row = page.locator('[data-testid=layer-row][data-kind=linear]').first();
  const path = await row.getAttribute('data-path');
  await openRow(row);
  await row.getByTestId('field-in_features').fill('1234');
  const err = await row.getByTestId('layer-error').textContent();
  assert.ok(err.includes(path) && err.includes('linear'), err);
  await page.getByTestId('estimate-error').waitFor();
  assert.equal(await bytes(page, 'peak'), good, 'the last good result stays on screen');
  await shot(page, '04-error-at-field');
  // not a number: serde's message at the field, nothing dispatched
  await row.getByTestId('field-out_features').fill('abc');
  await row.getByTestId('field-error').waitFor();
  // batch 0 is refused at the batch field
  await page.getByTestId('batch-input').fill('0');
  await page.getByTestId('batch-input-error').waitFor();
  // fixing the value brings everything back
  await row.getByTestId('field-in_features').fill('25088');
  await row.getByTestId('field-out_features').fill('4096');
  await setBatch(page, 32);
  await page.getByTestId('estimate-error').waitFor({ state: 'detached' });
  assert.equal(await row.getByTestId('layer-error').count(), 0);
  assert.equal(await bytes(page, 'peak'), good);
  // still responsive
  await setBatch(page, 4);
  await waitAttr(page, 'peak', 'data-bytes', (v) => Number(v) < good);
  assert.deepEqual(errors, []);
  await context.close();
});

test('paste a BERT config.json', async () => {
  const { context, page, errors } = await open(browser);
  await page.getByTestId('paste').locator('summary').click();
  await page.getByTestId('paste-text').fill('{"model_type": "bert", "hidden_size": ');
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-error').waitFor();
  const config = readFileSync(new globalThis.URL('./data/bert-base-uncased.config.json', import.meta.url), 'utf8');
  await page.getByTestId('paste-text').fill(config);
  await page.getByTestId('paste-load').click();
  await page.getByTestId('paste-ok').waitFor();
  // BertModel, bert-base-uncased: 109,482,240 parameters (PyTorch; ../shared/reference/hf/params.json)
  await waitAttr(page, 'params', 'data-count', (v) => v === '109482240');
  await page.getByTestId('seq-input').waitFor();
  assert.equal(await page.getByTestId('preset-select').inputValue(), '');
  await shot(page, '05-bert-config-pasted');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a reload keeps the model and the settings', async () => {
  const { context, page, errors } = await open(browser);
  await pickPreset(page, 'vgg16');
  await setBatch(page, 8);
  await page.waitForFunction(() => document.querySelector('[data-testid=batch-input]').value === '8');
  await openRow(page.locator('[data-testid=layer-row]').last());
  await page.locator('[data-testid=layer-row]').last().getByTestId('layer-delete').click();
  const params = await page.getByTestId('params').getAttribute('data-count');
  const peak = await bytes(page, 'peak');
  await page.reload();
  await page.getByTestId('chart-capacity').waitFor();
  assert.equal(await page.getByTestId('batch-input').inputValue(), '8');
  assert.equal(await page.getByTestId('params').getAttribute('data-count'), params);
  assert.equal(await bytes(page, 'peak'), peak);
  assert.deepEqual(errors, []);
  await context.close();
});

test('switch to 中文 (and it survives a reload)', async () => {
  const { context, page, errors } = await open(browser);
  await page.getByTestId('lang-select').selectOption('zh');
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  assert.match(await page.getByTestId('results').textContent(), /峰值分配/);
  assert.match(await page.getByTestId('settings').textContent(), /批大小/);
  await shot(page, '06-zh');
  await page.reload();
  await page.getByTestId('chart-capacity').waitFor();
  assert.match(await page.getByTestId('results').textContent(), /峰值分配/);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a 360 px phone in dark mode: readable, no horizontal scrolling', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 360, height: 780 }, colorScheme: 'dark' });
  await page.getByTestId('theme-select').selectOption('dark');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `page is ${overflow}px wider than the screen`);
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(bg, 'rgb(246, 247, 249)', 'dark background');
  await shot(page, '07-phone-360-dark');
  await shot(page, '07-phone-360-dark-top', { fullPage: false });
  await page.getByTestId('model-panel').scrollIntoViewIfNeeded();
  await shot(page, '07-phone-360-dark-layers', { fullPage: false });
  // custom capacity, in MiB
  await page.getByTestId('gpu-select').selectOption('custom');
  await page.getByTestId('capacity-input').fill('2 GiB');
  await waitAttr(page, 'fit-status', 'data-fits', (v) => v === 'false');
  await page.getByTestId('unit-select').selectOption('MiB');
  assert.match(await page.getByTestId('peak').textContent(), /GiB|MiB/);
  assert.deepEqual(errors, []);
  await context.close();
});
