// The built site hosted under a sub-path, as a project site on a static host is
// (`https://host/vramcalc/`): the same dist/ must work there as at the root. This test serves dist/
// itself, under /vramcalc/ only, so any URL that escapes to the site root is a 404 and fails.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { launch, openRow } from './helpers.mjs';

const DIST = process.env.VRAMCALC_DIST ?? 'dist';
const PREFIX = '/vramcalc/';
/** What a static host sends; docs/deploy.md asks for the same (`.wasm` must be application/wasm). */
const MIME = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css',
  '.wasm': 'application/wasm', '.json': 'application/json',
};

let browser, server, base;
before(async () => {
  browser = await launch();
  server = createServer(async (req, res) => {
    const path = decodeURIComponent(new globalThis.URL(req.url, 'http://x').pathname);
    if (!path.startsWith(PREFIX)) return res.writeHead(404).end();
    const rel = normalize(path.slice(PREFIX.length) || 'index.html');
    if (rel.startsWith('..')) return res.writeHead(404).end();
    try {
      const body = await readFile(join(DIST, rel.endsWith('/') ? `${rel}index.html` : rel));
      res.writeHead(200, { 'content-type': MIME[extname(rel)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  base = `http://127.0.0.1:${server.address().port}${PREFIX}`;
});
after(async () => {
  await browser?.close();
  server?.close();
});

/** A fresh page that fails the test on any request outside the sub-path or answered >= 400. */
async function page() {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const p = await context.newPage();
  const problems = [];
  p.on('pageerror', (e) => problems.push(String(e)));
  p.on('response', (r) => {
    const u = new globalThis.URL(r.url());
    if (u.protocol.startsWith('http') && (!u.pathname.startsWith(PREFIX) || r.status() >= 400)) problems.push(`${r.status()} ${u.pathname}`);
  });
  return { context, page: p, problems };
}

test('under a sub-path: the app, share links and the embed card all load', async () => {
  const { context, page: app, problems } = await page();
  await app.goto(base);
  await app.getByTestId('chart-capacity').waitFor();
  // an edit makes the model custom: its link carries the spec
  await app.getByTestId('preset-select').selectOption('vgg11');
  await app.waitForFunction(() => document.querySelector('[data-testid=model-panel]')?.dataset.preset === 'vgg11');
  await openRow(app.locator('[data-testid=layer-row]').last());
  await app.locator('[data-testid=layer-row]').last().getByTestId('layer-delete').click();
  await app.waitForFunction(() => location.hash.startsWith('#v1.s='));
  const fragment = new globalThis.URL(app.url()).hash.slice(1);
  assert.equal(app.url(), `${base}#${fragment}`, 'the share link is the sub-path address');

  // the embed builder opens beside the app, and its snippet points at the sub-path
  const [builder] = await Promise.all([context.waitForEvent('page'), app.getByTestId('open-embed').click()]);
  await builder.getByTestId('embed-snippet').waitFor();
  assert.equal(builder.url(), `${base}embed.html?builder#${fragment}`);
  assert.ok((await builder.getByTestId('embed-snippet').inputValue()).startsWith(`<iframe src="${base}embed.html?embed#${fragment}"`));
  await builder.frameLocator('[data-testid=embed-preview]').getByTestId('embed-card').waitFor();

  // the custom model's link opens in a new visitor's browser at the sub-path
  const visitor = await page();
  await visitor.page.goto(`${base}#${fragment}`);
  await visitor.page.getByTestId('chart-capacity').waitFor();
  assert.equal(await visitor.page.getByTestId('link-notice').getAttribute('data-kind'), 'opened');
  assert.equal(await visitor.page.getByTestId('peak').getAttribute('data-bytes'), await app.getByTestId('peak').getAttribute('data-bytes'));

  // the first release's embed address forwards to the card beside the app
  const card = await page();
  await card.page.goto(`${base}?embed#v1.p=resnet18,b=8`);
  await card.page.getByTestId('embed-card').waitFor();
  assert.equal(card.page.url(), `${base}embed.html?embed#v1.p=resnet18,b=8`);

  assert.deepEqual([...problems, ...visitor.problems, ...card.problems], []);
  await Promise.all([context.close(), visitor.context.close(), card.context.close()]);
});
