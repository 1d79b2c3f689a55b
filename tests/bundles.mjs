// The release bundles in dist/, grouped as the browser loads them, with their compressed sizes.
// Used by tests/bundle.test.mjs (the size budget) and tests/measure.mjs (the README's figures).
import { readFileSync, readdirSync } from 'node:fs';
import { gzipSync, brotliCompressSync, constants } from 'node:zlib';
import { join } from 'node:path';

/** `{ app, lazy, extras, worker, embed, card }`, each `{ files: [{ name, raw, gz, br }], gz, br }`. `app` is what
 *  index.html loads before the first chart (its wasm and JS, the wasm-bindgen snippets they
 *  import, and the loader of its split-off files); `lazy` the files cut out of the app's wasm
 *  that its views fetch on first use (src/split.rs, tools/wasm-split: `…_{part}-{hash}.wasm`);
 *  `extras` a second module the app loads on first use (none since issue 23); `worker` the
 *  app's worker, loaded when a user needs the importers (src/bin/worker.rs, static/worker.js);
 *  `embed` the embed page's full bundle, `card` its small one for PyTorch links
 *  (static/embed.html loads one of the two). */
export function bundles(dist = 'dist') {
  const files = readdirSync(dist, { recursive: true }).filter((f) => f.endsWith('.wasm') || f.endsWith('.js'));
  const index = readFileSync(join(dist, 'index.html'), 'utf8');
  const groups = {
    app: (f) => index.includes(f) || f.startsWith('snippets') || /^vramcalc-web-.*_split-[0-9a-f]{16}\.js$/.test(f),
    lazy: (f) => /^vramcalc-web-.*_[a-z0-9]+-[0-9a-f]{16}\.wasm$/.test(f),
    extras: (f) => f.startsWith('vramcalc-web-extras'),
    worker: (f) => f.startsWith('vramcalc-worker') || f === 'worker.js',
    embed: (f) => f.startsWith('vramcalc-embed'),
    card: (f) => f.startsWith('vramcalc-card'),
  };
  const out = {};
  for (const [name, member] of Object.entries(groups)) {
    const list = files.filter(member).map((f) => {
      const b = readFileSync(join(dist, f));
      return { name: f, raw: b.length, gz: gzipSync(b, { level: 9 }).length, br: brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }).length };
    });
    out[name] = { files: list, gz: list.reduce((s, f) => s + f.gz, 0), br: list.reduce((s, f) => s + f.br, 0) };
  }
  return out;
}
