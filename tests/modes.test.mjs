// The one setup panel's mode (issue 23): train, fine-tune, infer, generate, serve. Each mode
// shows its own length fields only, the verdict follows the mode (vLLM's for serving), and the
// mode travels in the link and through undo.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { launch, open, pickPreset, waitAttr, serveSetup } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

function cliJson(...args) {
  return JSON.parse(execFileSync('cargo', ['run', '-q', '-p', 'vramcalc-cli', '--', ...args, '--json'], { encoding: 'utf8' }));
}

const visible = async (page, id) => (await page.getByTestId(id).count()) > 0 && page.getByTestId(id).isVisible();

test('each mode shows only its own length fields, in one setup panel below the model', async () => {
  const { page, errors } = await open(browser);
  await pickPreset(page, 'gpt2');
  const settings = page.getByTestId('settings');
  // the LLM settings are part of the one setup panel
  assert.equal(await settings.getByTestId('llm').count(), 1);
  assert.equal(await settings.getByTestId('mode-select').count(), 1);
  const want = {
    train: { 'seq-input': true, 'prompt-len': false, 'new-tokens': false, 'optimizer-select': true, 'lora-r': false },
    finetune: { 'seq-input': true, 'prompt-len': false, 'lora-r': true, 'optimizer-select': true },
    infer: { 'seq-input': true, 'prompt-len': false, 'optimizer-select': false, 'finetune': false },
    generate: { 'seq-input': false, 'prompt-len': true, 'new-tokens': true, 'kv-cache': true, 'optimizer-select': false },
    serve: { 'seq-input': true, 'prompt-len': false, 'new-tokens': false, 'kv-cache': false, 'kv-dtype': true, 'offload': false },
  };
  for (const [mode, fields] of Object.entries(want)) {
    await page.getByTestId('mode-select').selectOption(mode);
    await page.waitForFunction((m) => document.querySelector('[data-testid=settings]')?.dataset.mode === m, mode);
    for (const [id, shown] of Object.entries(fields)) {
      assert.equal(await visible(page, id), shown, `${mode}: ${id}`);
    }
  }
  // generating, the prompt field shows the length the model runs at, and the input shape follows it
  await page.getByTestId('mode-select').selectOption('generate');
  await page.getByTestId('prompt-len').fill('96');
  await page.waitForFunction(() => document.querySelector('[data-testid=input-shape]')?.value?.startsWith('96'));
  assert.deepEqual(errors, []);
});

test('the serve mode\'s verdict is vLLM\'s (the CLI\'s `vramcalc serve`); the mode survives undo and the link', async () => {
  const { page, errors } = await open(browser);
  const { gpu, context, concurrency } = await serveSetup(page, 'gpt2');
  const want = cliJson('serve', '--preset', 'gpt2', '--gpu', gpu, '--context', context, '--concurrency', concurrency);
  await waitAttr(page, 'fit-status', 'data-count', (v) => v === String(want.max_concurrency), 20000);
  assert.equal(await page.getByTestId('fit-status').getAttribute('data-fits'), String(want.max_concurrency >= Number(concurrency)));
  await waitAttr(page, 'serve-kv-pool', 'data-bytes', (v) => Number(v) === want.kv_pool_bytes, 20000);
  // the link carries the mode
  await page.waitForFunction(() => location.hash.includes('e=vllm'));
  const second = await browser.newPage();
  await second.goto(page.url());
  await second.getByTestId('chart-capacity').waitFor();
  assert.equal(await second.getByTestId('mode-select').inputValue(), 'serve');
  await second.close();
  // undo goes back to training
  await page.getByTestId('undo').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=mode-select]')?.value === 'train');
  assert.equal(await page.getByTestId('summary').getAttribute('data-engine'), null);
  assert.deepEqual(errors, []);
});
