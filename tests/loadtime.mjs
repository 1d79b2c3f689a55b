// The load-time benchmark (issue 23), replacing the 300,000 B byte budget: headless Chromium with
// network and CPU throttling through the DevTools protocol (Network.emulateNetworkConditions,
// Emulation.setCPUThrottlingRate), the cache off, a fresh context per load, dist/ served gzipped
// as static hosts serve it. Each figure is the median of RUNS loads: the ms from navigation until
// the page shows the answer (the first chart; a share link's figures; the embed card's peak).
// The goals are assertions: the script exits 1 and names every goal missed.
// Usage: bash scripts/build.sh && node tests/loadtime.mjs [--profile mobile|desktop]  (RUNS=5)
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { join, extname } from 'node:path';
import { launch } from './helpers.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';
const RUNS = Number(process.env.RUNS ?? 5);
const only = process.argv.includes('--profile') ? process.argv[process.argv.indexOf('--profile') + 1] : null;

// Lighthouse's "Slow 4G" (150 ms RTT, 1.6 Mbit/s down, 750 kbit/s up, CPU 4× slower) and a desktop.
const PROFILES = {
  mobile: { latency: 150, down: 1.6e6 / 8, up: 750e3 / 8, cpu: 4, goals: { first: 1500, link: 3500, embed: 1500 } },
  desktop: { latency: 40, down: 10e6 / 8, up: 5e6 / 8, cpu: 1, goals: { first: 500, link: 1000, embed: 1000 } },
};

const links = Object.fromEntries(readFileSync('tests/data/bench_links.txt', 'utf8').split('\n')
  .filter((l) => l.trim() && !l.startsWith('#')).map((l) => l.split(' ')));
// what "fully answered" means for each: the figure that needs the whole job computed
const CASES = [
  { name: 'first chart (default)', path: '', testid: 'chart-capacity', goal: 'first' },
  { name: 'Llama-3.1-8B QLoRA link', path: `#${links['llama-8b-qlora']}`, testid: 'trainable', goal: 'link' },
  { name: 'its generate link', path: `#${links['llama-8b-generate']}`, testid: 'decode-peak', goal: 'link' },
  { name: 'its serve link', path: `#${links['llama-8b-serve']}`, testid: 'serve-tokens', goal: 'link' },
  { name: 'Llama-3.1-70B FSDP×8 link', path: `#${links['llama-70b-fsdp8']}`, testid: 'fewest-gpus', attr: 'data-gpus', goal: 'link' },
  { name: 'embed card', path: `embed.html#${links['llama-8b-qlora']}`, testid: 'peak', goal: 'embed' },
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
  await page.addInitScript(({ testid, attr }) => {
    new MutationObserver((_, obs) => {
      const el = document.querySelector(`[data-testid=${testid}]`);
      if (el && (!attr || el.getAttribute(attr))) {
        window.__answered = performance.now();
        obs.disconnect();
      }
    }).observe(document, { childList: true, subtree: true, attributes: true });
  }, { testid: c.testid, attr: c.attr });
  await page.goto(base + c.path);
  await page.waitForFunction(() => window.__answered !== undefined, null, { timeout: 120000 });
  const ms = await page.evaluate(() => window.__answered);
  await context.close();
  return ms;
}

const missed = [];
const rows = [];
for (const [name, p] of Object.entries(PROFILES)) {
  if (only && only !== name) continue;
  for (const c of CASES) {
    const times = [];
    for (let i = 0; i < RUNS; i++) times.push(await load(p, c));
    const m = median(times);
    const goal = p.goals[c.goal];
    rows.push({ profile: name, case: c.name, median: m, goal, times });
    console.log(`${name.padEnd(7)} ${c.name.padEnd(28)} median ${(m / 1000).toFixed(2)} s (goal ≤ ${(goal / 1000).toFixed(1)} s) [${times.map((t) => (t / 1000).toFixed(2)).join(', ')}]`);
    if (m > goal) missed.push(`${name} ${c.name}: ${(m / 1000).toFixed(2)} s > ${(goal / 1000).toFixed(1)} s`);
  }
}
await browser.close();
server.close();
if (process.argv.includes('--markdown')) {
  console.log('| profile | case | median of ' + RUNS + ' | goal |\n|---|---|---:|---:|');
  for (const r of rows) console.log(`| ${r.profile} | ${r.case} | ${(r.median / 1000).toFixed(2)} s | ≤ ${(r.goal / 1000).toFixed(1)} s |`);
}
if (missed.length) {
  console.error(`goals missed:\n  ${missed.join('\n  ')}`);
  process.exit(1);
}
