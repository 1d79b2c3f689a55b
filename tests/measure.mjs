// Measures the release bundle: wasm + JS gzipped (and brotli) sizes, the time from navigation to
// the first chart in headless Chromium on localhost, and how long a live edit takes: ResNet-152
// and DeepSeek-V3 (671 B parameters, MoE and MLA), both by the app's own core.
// Usage: bash scripts/build.sh && node tests/measure.mjs   (serves dist/ itself); `--markdown`
// prints the README's table instead (`tools/readme.py` runs it).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join, extname } from 'node:path';
import { launch } from './helpers.mjs';
import { bundles } from './bundles.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';
const RUNS = Number(process.env.RUNS ?? 7);
// The live edits: how many (RUNS by default: right after the model loads, as the README's
// table has them) and the pause between them (0: one after another; 300 ms lets each edit's
// deferred work, the what-ifs and the link, finish first).
const EDITS = Number(process.env.EDITS ?? RUNS);
const EDIT_GAP_MS = Number(process.env.EDIT_GAP_MS ?? 0);
const MARKDOWN = process.argv.includes('--markdown');
const log = (line) => { if (!MARKDOWN) console.log(line); };
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
const labels = { app: 'APP (index.html)', extras: 'EXTRAS (none since issue 23)', worker: 'WORKER (the importers, on first use)', embed: 'EMBED (embed.html, full)', card: 'CARD (embed.html, PyTorch links)' };
const sizes = bundles(DIST);
for (const [name, g] of Object.entries(sizes)) {
  for (const f of g.files) log(`  ${f.name}: ${kb(f.raw)} raw, ${kb(f.gz)} gzip -9, ${kb(f.br)} brotli`);
  log(`${labels[name]} wasm+js: ${kb(g.gz)} gzipped (${g.gz} bytes), ${kb(g.br)} brotli`);
}

const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
const server = createServer((req, res) => {
  const name = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
  try {
    const body = readFileSync(join(DIST, name.includes('..') ? 'index.html' : name));
    res.writeHead(200, { 'content-type': types[extname(name)] ?? 'application/octet-stream' });
    res.end(body);
  } catch { res.writeHead(404); res.end(); }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/`;

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const browser = await launch();

/** A fresh context's page at `address`, and the ms from navigation to its first chart. */
async function firstChart(address) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  await context.addInitScript(() => {
    new MutationObserver((_, obs) => {
      if (document.querySelector('[data-testid=chart-capacity]')) {
        window.__firstChart = performance.now(); // ms since navigation start
        obs.disconnect();
      }
    }).observe(document, { childList: true, subtree: true });
  });
  const page = await context.newPage();
  await page.goto(address);
  await page.waitForFunction(() => window.__firstChart !== undefined);
  return { context, page, ms: await page.evaluate(() => window.__firstChart) };
}

// A custom model's link (the spec in the fragment).
const customLink = readFileSync('crates/core/tests/data/share_links.txt', 'utf8').match(/^custom-cnn (\S+)$/m)[1];
const linked = [];
for (let i = 0; i < RUNS; i++) {
  const { context, ms } = await firstChart(`${url}#${customLink}`);
  linked.push(ms);
  await context.close();
}

/** Picks `preset`, waits for its parameter count, then times `EDITS` batch changes from `from`
 *  until the peak figure changes on screen. */
async function batchEdits(page, preset, params, from) {
  await page.getByTestId('preset-select').selectOption(preset);
  await page.waitForFunction((n) => document.querySelector('[data-testid=params]')?.dataset.count === n, params, { timeout: 60000 });
  await page.waitForFunction(() => document.querySelector('[data-testid=peak]')?.dataset.bytes, null, { timeout: 60000 });
  const edits = [];
  for (let b = from; b < from + EDITS; b++) {
    if (EDIT_GAP_MS > 0) await page.waitForTimeout(EDIT_GAP_MS);
    edits.push(await page.evaluate((b) => new Promise((resolve) => {
      const peak = document.querySelector('[data-testid=peak]');
      const input = document.querySelector('[data-testid=batch-input]');
      const obs = new MutationObserver(() => { obs.disconnect(); resolve(performance.now() - t0); });
      obs.observe(peak, { attributes: true });
      const t0 = performance.now();
      input.value = String(b);
      input.dispatchEvent(new Event('input', { bubbles: true }));
    }), b));
  }
  return edits;
}

const first = [];
let resnet = [];
let deepseek = [];
for (let i = 0; i < RUNS; i++) {
  const { context, page, ms } = await firstChart(url);
  first.push(ms);
  if (i === RUNS - 1) {
    // live edits: ResNet-152 and DeepSeek-V3 (MoE, MLA), both in the app's core
    resnet = await batchEdits(page, 'resnet152', '60192808', 33);
    deepseek = await batchEdits(page, 'deepseek-v3', '671026404352', 2);
  }
  await context.close();
}
const list = (xs, digits) => xs.map((x) => x.toFixed(digits)).join(', ');
log(`EDIT ResNet-152 batch change → new peak on screen: median ${median(resnet).toFixed(1)} ms (${list(resnet, 1)})`);
log(`EDIT DeepSeek-V3 batch change → new peak on screen: median ${median(deepseek).toFixed(1)} ms (${list(deepseek, 1)})`);
log(`FIRST CHART navigation → first chart (localhost, unthrottled): median ${median(first).toFixed(0)} ms over ${RUNS} loads (${list(first, 0)}); throttled goals: tests/loadtime.mjs`);
log(`FIRST CHART of a custom model's link: median ${median(linked).toFixed(0)} ms over ${RUNS} loads (${list(linked, 0)})`);
if (MARKDOWN) {
  const bytes = (n) => `${n.toLocaleString('en-US')} B`;
  console.log([
    '| | measured | target |',
    '|---|---:|---:|',
    `| app bundle: wasm + JS gzipped (\`gzip -9\`) | **${bytes(sizes.app.gz)}** (${kb(sizes.app.gz)}) | load times: tests/loadtime.mjs |`,
    `| the app's worker, loaded when a config is pasted or fetched (\`vramcalc-worker\`) | ${bytes(sizes.worker.gz)} | |`,
    `| embed page: a PyTorch link's card (\`vramcalc-card\`) | ${bytes(sizes.card.gz)} | |`,
    `| embed page: other links and the snippet builder (\`vramcalc-embed\`) | ${bytes(sizes.embed.gz)} | |`,
    `| navigation → first chart (localhost, unthrottled), median of ${RUNS} loads | ${median(first).toFixed(0)} ms | |`,
    `| the same from a custom model's link | ${median(linked).toFixed(0)} ms | |`,
    `| ResNet-152 batch change → new peak on screen, median of ${EDITS} | ${median(resnet).toFixed(1)} ms | ≤ 16 ms |`,
    `| DeepSeek-V3 (671 B, MoE + MLA) batch change → new peak on screen, median of ${EDITS} | ${median(deepseek).toFixed(1)} ms | ≤ 50 ms |`,
  ].join('\n'));
}
await browser.close();
server.close();
