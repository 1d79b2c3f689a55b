// The load-time benchmark (issue 23), replacing the 300,000 B byte budget: headless Chromium with
// network and CPU throttling through the DevTools protocol (Network.emulateNetworkConditions,
// Emulation.setCPUThrottlingRate), the cache off, a fresh context per load, dist/ served gzipped
// as static hosts serve it. Each figure is the median of RUNS loads: the ms from navigation until
// the page shows the answer (the first chart; a share link's figures; the embed card's peak).
// The goals are assertions: the script exits 1 and names every goal missed.
// Usage: bash scripts/build.sh && node tests/loadtime.mjs [--profile mobile|desktop] [--case 70B]  (RUNS=5)
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { join, extname } from 'node:path';
import { launch } from './helpers.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';
const RUNS = Number(process.env.RUNS ?? 5);
const arg = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : null);
const only = arg('--profile');
const onlyCase = arg('--case'); // a part of a case's name: measure only those

// Lighthouse's "Slow 4G" (150 ms RTT, 1.6 Mbit/s down, 750 kbit/s up, CPU 4× slower) and a desktop.
const PROFILES = {
  mobile: { latency: 150, down: 1.6e6 / 8, up: 750e3 / 8, cpu: 4, goals: { first: 1500, link: 3500, embed: 1500 } },
  desktop: { latency: 40, down: 10e6 / 8, up: 5e6 / 8, cpu: 1, goals: { first: 500, link: 1000, embed: 1000 } },
};

// No main-thread task over this while the multi-GPU sizing runs (either profile).
const LONG_TASK_MS = 200;

const links = Object.fromEntries(readFileSync('tests/data/bench_links.txt', 'utf8').split('\n')
  .filter((l) => l.trim() && !l.startsWith('#')).map((l) => l.split(' ')));
// what "fully answered" means for each: the figure that needs the whole job computed
const CASES = [
  // index.html carries the default page drawn at build time (src/bin/prerender.rs, its test ids
  // renamed data-pre-testid): the first chart is on screen before the app is; the second row is
  // the app itself, live (no goal: reported so the prerender's gain is not mistaken for it)
  { name: 'first chart (default)', path: '', selector: '[data-testid=chart-capacity], [data-pre-testid=chart-capacity]', goal: 'first' },
  { name: 'first chart, app live', path: '', testid: 'chart-capacity', goal: null },
  { name: 'Llama-3.1-8B QLoRA link', path: `#${links['llama-8b-qlora']}`, testid: 'trainable', goal: 'link' },
  { name: 'its generate link', path: `#${links['llama-8b-generate']}`, testid: 'decode-peak', goal: 'link' },
  { name: 'its serve link', path: `#${links['llama-8b-serve']}`, testid: 'serve-tokens', goal: 'link' },
  // `tasks`: also the longest main-thread task (PerformanceObserver 'longtask', CPU-throttled
  // time) that starts while the multi-GPU sizing runs: from its placeholder on the page
  // (`gpu-answers`) until the fewest GPUs are shown.
  { name: 'Llama-3.1-70B FSDP×8 link', path: `#${links['llama-70b-fsdp8']}`, testid: 'fewest-gpus', attr: 'data-gpus', goal: 'link', tasks: 'gpu-answers' },
  { name: 'embed card', path: `embed.html#${links['llama-8b-qlora']}`, testid: 'peak', goal: 'embed' },
  // the views that search (issue 26): the longest task from the moment the page shows the setup
  // (or the click that opens the view) until the view's list is complete. A 70B full training on
  // one H100 does not fit: the cheapest fixes are searched, one estimate per task
  // (`solve::fix::FixSearch`), from the verdict on (the page's other answers, the largest batch
  // and length and the what-ifs, run in the same window).
  { name: 'Llama-3.1-70B cheapest fixes', path: `#${links['llama-70b-fixes']}`, testid: 'fixes', goal: null, tasks: 'fit-status', onlyTasks: true },
  // "what fits my GPU" for full training (the default page's mode): every preset × 6 formats, a
  // row in up to three tasks (`solve::fits::RowSteps`), opened once the app is live
  { name: 'what fits: full training table', path: '', testid: 'fits-progress', goal: null, tasks: 'fits-progress', onlyTasks: true,
    click: '[data-testid=fits-table] summary', after: 'chart-capacity', done: 'fits' },
];

// dist/ gzipped once (level 6, what nginx/CDNs use), served with Content-Encoding: gzip
const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
const cache = new Map();
const server = createServer((req, res) => {
  const name = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
  try {
    if (!cache.has(name)) cache.set(name, gzipSync(readFileSync(join(DIST, name.includes('..') ? 'index.html' : name)), { level: 6 }));
    res.writeHead(200, { 'content-type': types[extname(name)] ?? 'application/octet-stream', 'content-encoding': 'gzip', 'cache-control': 'no-store' });
    res.end(cache.get(name));
  } catch { res.writeHead(404); res.end(); }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}/`;
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const browser = await launch();

/** ms from navigation until `testid` is on the page (with `attr` set, when given). */
async function load(p, c) {
  const context = await browser.newContext({ viewport: p.cpu > 1 ? { width: 390, height: 844 } : { width: 1440, height: 1000 } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: p.latency, downloadThroughput: p.down, uploadThroughput: p.up });
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: p.cpu });
  await page.addInitScript(({ selector, attr, tasks, done }) => {
    window.__tasks = [];
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__tasks.push([e.startTime, e.duration]); })
      .observe({ type: 'longtask', buffered: true });
    // `done: 'fits'`: every row of the table computed
    const complete = (el) => done !== 'fits' || (el.dataset.all !== '0' && el.dataset.done === el.dataset.all);
    new MutationObserver((_, obs) => {
      if (tasks && window.__from === undefined && document.querySelector(`[data-testid=${tasks}]`)) window.__from = performance.now();
      const el = document.querySelector(selector);
      if (el && (!attr || el.getAttribute(attr)) && complete(el)) {
        // on screen: the frame that draws it (a stylesheet still loading holds the frame back)
        requestAnimationFrame(() => { window.__answered = performance.now(); });
        obs.disconnect();
      }
    }).observe(document, { childList: true, subtree: true, attributes: true });
  }, { selector: c.selector ?? `[data-testid=${c.testid}]`, attr: c.attr, tasks: c.tasks, done: c.done });
  await page.goto(base + c.path);
  if (c.click) {
    // the app live, then the click that starts the view's work (the window starts there)
    await page.locator(`[data-testid=${c.after}]`).waitFor({ timeout: 120000 });
    await page.evaluate(() => { window.__from = performance.now(); });
    await page.locator(c.click).click();
  }
  await page.waitForFunction(() => window.__answered !== undefined, null, { timeout: 120000 });
  // the long tasks are reported a moment after they end
  await page.waitForTimeout(c.tasks ? 200 : 0);
  const [ms, longest] = await page.evaluate(() => [window.__answered,
    Math.max(0, ...window.__tasks.filter(([s]) => s >= window.__from && s < window.__answered).map(([, d]) => d))]);
  await context.close();
  return { ms, longest };
}

const missed = [];
const rows = [];
for (const [name, p] of Object.entries(PROFILES)) {
  if (only && only !== name) continue;
  for (const c of CASES) {
    if (onlyCase && !c.name.includes(onlyCase)) continue;
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await load(p, c));
    const row = (label, times, goal) => {
      const m = median(times);
      rows.push({ profile: name, case: label, median: m, goal, times });
      const g = goal == null ? 'no goal' : `goal ≤ ${(goal / 1000).toFixed(1)} s`;
      console.log(`${name.padEnd(7)} ${label.padEnd(40)} median ${(m / 1000).toFixed(2)} s (${g}) [${times.map((t) => (t / 1000).toFixed(2)).join(', ')}]`);
      if (goal != null && m > goal) missed.push(`${name} ${label}: ${(m / 1000).toFixed(2)} s > ${(goal / 1000).toFixed(1)} s`);
    };
    if (!c.onlyTasks) row(c.name, runs.map((r) => r.ms), c.goal && p.goals[c.goal]);
    if (c.tasks) row(c.onlyTasks ? `${c.name}: longest task` : 'longest task while the sizing runs', runs.map((r) => r.longest), LONG_TASK_MS);
  }
}
await browser.close();
server.close();
if (process.argv.includes('--markdown')) {
  console.log('| profile | case | median of ' + RUNS + ' | goal |\n|---|---|---:|---:|');
  const s = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`);
  for (const r of rows) console.log(`| ${r.profile} | ${r.case} | ${s(r.median)} | ${r.goal == null ? '—' : `≤ ${s(r.goal)}`} |`);
}
if (missed.length) {
  console.error(`goals missed:\n  ${missed.join('\n  ')}`);
  process.exit(1);
}
