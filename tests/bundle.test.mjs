// The release bundles: their sizes (printed; the budgets are load times now, tests/loadtime.mjs,
// issue 23) and what index.html loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { bundles } from './bundles.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';

test('index.html loads the app only; the embed page\'s two bundles are built beside it; there is no second module', () => {
  const b = bundles(DIST);
  const list = (g) => g.files.map((f) => `${f.name} ${f.gz}`).join(', ');
  console.log(`app ${b.app.gz} B (${list(b.app)}); its split-off views ${b.lazy.gz} B (${list(b.lazy)}); its worker ${b.worker.gz} B; embed ${b.embed.gz} B; its card for PyTorch links ${b.card.gz} B`);
  assert.ok(b.app.files.some((f) => f.name.endsWith('.wasm')) && b.app.files.some((f) => f.name.endsWith('.js')), list(b.app));
  // the app's wasm is split (src/split.rs): the views' files beside it, and their loader in the app
  assert.ok(b.lazy.files.length >= 6, `split-off files: ${list(b.lazy)}`);
  assert.ok(b.app.files.some((f) => /_split-[0-9a-f]{16}\.js$/.test(f.name)), `no split loader in ${list(b.app)}`);
  const index = readFileSync(`${DIST}/index.html`, 'utf8');
  assert.ok(!index.includes('vramcalc-embed') && !index.includes('vramcalc-card') && !index.includes('vramcalc-worker'), 'index.html loads only the app');
  // the app's worker (the importers) is built beside it and loaded on first use
  assert.ok(b.worker.files.length === 3, list(b.worker));
  assert.ok(b.extras.files.length === 0 && b.embed.files.length === 2 && b.card.files.length === 2, 'the embed bundles are built, no second module');
  // the card's bundle is the small one: no importer, llama.cpp or pipeline code
  assert.ok(b.card.gz < b.embed.gz, `card ${b.card.gz} B, embed ${b.embed.gz} B`);
});
