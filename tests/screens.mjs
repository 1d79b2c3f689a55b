// Screenshots of an LLM fine-tuning setup (issue 23's before/after): Llama-3.1-8B, QLoRA r=16,
// desktop and phone. Usage: VRAMCALC_URL=… node tests/screens.mjs <suffix>
import { launch, open, pickPreset, ARTIFACTS } from './helpers.mjs';

const suffix = process.argv[2] ?? 'now';
const browser = await launch();
for (const [name, viewport] of [['desktop', { width: 1280, height: 900 }], ['phone', { width: 390, height: 844 }]]) {
  const { page } = await open(browser, { viewport });
  await pickPreset(page, 'llama-3.1-8b');
  await page.getByTestId('finetune').selectOption('qlora');
  await page.getByTestId('lora-r').fill('16');
  await page.getByTestId('lora-r').press('Tab');
  await page.getByTestId('trainable').waitFor({ timeout: 30000 });
  await page.waitForTimeout(500);
  // a full-page picture: panels far below the viewport skip painting (`content-visibility: auto`)
  await page.addStyleTag({ content: 'section.panel { content-visibility: visible !important; }' });
  await page.screenshot({ path: `${ARTIFACTS}/issue23-${suffix}-${name}.png`, fullPage: true });
  await page.context().close();
}
await browser.close();
