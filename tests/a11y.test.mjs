// Issue 16, item 10: accessibility and polish. axe-core (npm devDependency, run in the page)
// reports no violations on the app and the embed card; Ctrl+Z; phone header; captions, tables and
// chart labels inside their cards; a CJK font that renders on Linux (fonts-noto-cjk, installed
// by scripts/test.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { launch, open, URL as APP, waitAttr, pickPreset, shot } from './helpers.mjs';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** axe-core's violations on the page (WCAG 2.x A/AA and best practices), as readable lines. */
async function axe(page) {
  await page.addScriptTag({ path: AXE });
  const v = await page.evaluate(async () => (await window.axe.run(document)).violations);
  return v.map((x) => `${x.id} (${x.nodes.length}): ${x.help} — ${x.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
}

test('axe-core: no violations on the app (desktop and phone) and the embed card', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  await pickPreset(page, 'vgg16');
  assert.deepEqual(await axe(page), []);
  await page.setViewportSize({ width: 390, height: 844 });
  assert.deepEqual(await axe(page), []);
  const frag = (await page.evaluate(() => location.hash)).slice(1);
  const card = await context.newPage();
  await card.goto(`${APP}embed.html?embed&controls=batch,gpu,precision#${frag}`);
  await card.getByTestId('embed-card').waitFor();
  assert.deepEqual(await axe(card), []);
  assert.deepEqual(errors, []);
  await context.close();
});

test('Ctrl+Z: the app undoes outside a text field; inside one it is the field\'s own', async () => {
  const { context, page, errors } = await open(browser);
  await page.getByTestId('whatif-amp').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=precision-select]').value === 'amp-bf16');
  await page.getByTestId('batch-input').focus();
  await page.keyboard.press('Control+z');
  await page.waitForTimeout(100);
  assert.equal(await page.getByTestId('precision-select').inputValue(), 'amp-bf16', 'a text field keeps Ctrl+Z');
  await page.getByTestId('batch-slider').focus();
  await page.keyboard.press('Control+z');
  await page.waitForFunction(() => document.querySelector('[data-testid=precision-select]').value === 'fp32');
  await page.keyboard.press('Control+Shift+z');
  await page.waitForFunction(() => document.querySelector('[data-testid=precision-select]').value === 'amp-bf16');
  assert.deepEqual(errors, []);
  await context.close();
});

/** Elements of `selector` that stick out of their `.panel` (or the header) by more than 1 px. */
function overflowing(page, selector) {
  return page.$$eval(selector, (els) => els.flatMap((el) => {
    const box = el.closest('.panel, header, .sumbar')?.getBoundingClientRect();
    const r = el.getBoundingClientRect();
    if (!box || r.width === 0) return [];
    return r.left < box.left - 1 || r.right > box.right + 1 ? [`${el.textContent.slice(0, 40)} [${Math.round(r.left)}, ${Math.round(r.right)}] in [${Math.round(box.left)}, ${Math.round(box.right)}]`] : [];
  }));
}

test('polish: phone header labels, captions and chart labels inside their cards, a scrollable table with a hint', async () => {
  for (const viewport of [{ width: 390, height: 844 }, { width: 1440, height: 900 }]) {
    const { context, page, errors } = await open(browser, { viewport });
    await pickPreset(page, 'vgg16');
    const phone = viewport.width < 500;
    // the header keeps its labels
    for (const label of ['Units', 'Language', 'Theme']) {
      assert.ok(await page.locator('header.top label', { hasText: label }).isVisible(), `${label} label at ${viewport.width}px`);
    }
    assert.deepEqual(await overflowing(page, '.figure small, .figure b, .chart text, header.top *'), [], `at ${viewport.width}px`);
    const wrap = page.locator('.table-scroll');
    const { sw, cw } = await wrap.evaluate((el) => ({ sw: el.scrollWidth, cw: el.clientWidth }));
    if (phone) {
      assert.ok(sw > cw, 'the table scrolls on a phone');
      assert.ok(await page.locator('.scroll-hint').isVisible(), 'with a visible hint');
    } else {
      assert.ok(sw <= cw + 1, `all columns show on a desktop (${sw} > ${cw})`);
      assert.ok(!(await page.locator('.scroll-hint').isVisible()));
    }
    assert.deepEqual(errors, []);
    await context.close();
  }
});

test('中文 renders with a CJK font on Linux (Noto Sans CJK)', async () => {
  const { context, page, errors } = await open(browser, { viewport: { width: 1440, height: 900 } });
  await page.getByTestId('lang-select').selectOption('zh');
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  const family = await page.evaluate(() => getComputedStyle(document.body).fontFamily);
  assert.match(family, /Noto Sans CJK SC/);
  // installed: text set in it measures differently from the monospace fallback
  const differs = await page.evaluate(() => {
    const c = document.createElement('canvas').getContext('2d');
    const width = (font) => { c.font = font; return c.measureText('WWW abc 峰值分配').width; };
    return width('32px "Noto Sans CJK SC", monospace') !== width('32px monospace');
  });
  assert.ok(differs, 'Noto Sans CJK SC is installed (fonts-noto-cjk, scripts/test.sh)');
  await shot(page, '35-ux-zh-cjk', { fullPage: false });
  assert.deepEqual(errors, []);
  await context.close();
});
