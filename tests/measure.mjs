// Measures the release bundle: wasm + JS gzipped (and brotli) sizes, the time from navigation to
// the first chart in headless Chromium on localhost, and how long a live edit of ResNet-152 takes.
// Usage: trunk build --release --offline && node tests/measure.mjs   (serves dist/ itself)
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join, extname } from 'node:path';
import { launch } from './helpers.mjs';
import { bundles } from './bundles.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';
const RUNS = Number(process.env.RUNS ?? 7);
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
const labels = { app: 'APP (index.html, before the first chart)', extras: 'EXTRAS (loaded on first use)', embed: 'EMBED (embed.html)' };
for (const [name, g] of Object.entries(bundles(DIST))) {
  for (const f of g.files) console.log(`  ${f.name}: ${kb(f.raw)} raw, ${kb(f.gz)} gzip -9, ${kb(f.br)} brotli`);
  console.log(`${labels[name]} wasm+js: ${kb(g.gz)} gzipped (${g.gz} bytes), ${kb(g.br)} brotli${name === 'app' ? '; target ≤ 300 KB gzipped' : ''}`);
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

// A custom model's link needs the lazily loaded codec module before the first chart.
const customLink = readFileSync('crates/core/tests/data/share_links.txt', 'utf8').match(/^custom-cnn (\S+)$/m)[1];
const linked = [];
for (let i = 0; i < RUNS; i++) {
  const { context, ms } = await firstChart(`${url}#${customLink}`);
  linked.push(ms);
  await context.close();
}

const first = [];
for (let i = 0; i < RUNS; i++) {
  const { context, page, ms } = await firstChart(url);
  first.push(ms);
  if (i === RUNS - 1) {
    // live edit: ResNet-152, batch changes, time until the peak figure changes
    await page.getByTestId('preset-select').selectOption('resnet152');
    await page.waitForFunction(() => document.querySelector('[data-testid=params]').dataset.count === '60192808');
    const edits = [];
    for (let b = 33; b < 33 + RUNS; b++) {
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
    console.log(`EDIT ResNet-152 batch change → new peak on screen: median ${median(edits).toFixed(1)} ms (${edits.map((x) => x.toFixed(1)).join(', ')})`);
  }
  await context.close();
}
console.log(`FIRST CHART navigation → first chart: median ${median(first).toFixed(0)} ms over ${RUNS} loads (${first.map((x) => x.toFixed(0)).join(', ')}); target ≤ 300 ms`);
console.log(`FIRST CHART of a custom model's link (codec module loaded first): median ${median(linked).toFixed(0)} ms over ${RUNS} loads (${linked.map((x) => x.toFixed(0)).join(', ')})`);
await browser.close();
server.close();
