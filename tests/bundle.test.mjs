// The web app's download budget (issue: ≤ 300 KB gzipped wasm + JS before the first chart).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { bundles } from './bundles.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';
const BUDGET = 300_000; // bytes, gzip -9

test(`the app's bundle is at most ${BUDGET} bytes gzipped; the lazily loaded module is not part of it`, () => {
  const b = bundles(DIST);
  const list = (g) => g.files.map((f) => `${f.name} ${f.gz}`).join(', ');
  console.log(`app ${b.app.gz} B (${list(b.app)}); extras ${b.extras.gz} B; embed ${b.embed.gz} B`);
  assert.ok(b.app.files.some((f) => f.name.endsWith('.wasm')) && b.app.files.some((f) => f.name.endsWith('.js')), list(b.app));
  assert.ok(b.app.gz <= BUDGET, `app bundle ${b.app.gz} B gzipped > ${BUDGET} B: ${list(b.app)}`);
  // index.html must not load the module meant for first use, nor the embed page's bundle
  const index = readFileSync(`${DIST}/index.html`, 'utf8');
  assert.ok(!index.includes('vramcalc-web-extras') && !index.includes('vramcalc-embed'), 'index.html loads only the app');
  assert.ok(b.extras.files.length === 2 && b.embed.files.length === 2, 'the extras and embed bundles are built');
});
