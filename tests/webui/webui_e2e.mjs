// The web console in headless Chromium (puppeteer-core) against a real `cadenza serve` (the
// trained licenses-tiny model, an API key set) and a `cadenza gateway` in front of two servers.
// Env: CADENZA_SERVE_URL, CADENZA_GATEWAY_URL, CADENZA_API_KEY, CHROMIUM, ARTIFACTS (screenshots).
// Checks: the key prompt, a message streamed in, stop (the server's running count back to 0),
// the conversation after a reload, the language switch, the server view, the gateway's replicas,
// and no console errors (besides the 401 that makes the page ask for the key).
import puppeteer from 'puppeteer-core';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';

const serve = process.env.CADENZA_SERVE_URL;
const gateway = process.env.CADENZA_GATEWAY_URL;
const key = process.env.CADENZA_API_KEY;
const artifacts = process.env.ARTIFACTS;
const step = (s) => console.log(`webui e2e: ${s}`);

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
const errors = [];
let allow401 = true;
function watch(page) {
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (allow401 && /status of 401/.test(m.text())) return;
    errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
}

async function running() {
  const text = await (await fetch(`${serve}/metrics`)).text();
  const m = /^cadenza_num_requests_running(?:\{[^}]*\})? (\S+)$/m.exec(text);
  return m ? Number(m[1]) : NaN;
}
const assistantTexts = (page) => page.$$eval('article[data-role="assistant"] .content', (els) => els.map((e) => e.textContent));

try {
  const page = await browser.newPage();
  watch(page);
  await page.setViewport({ width: 1280, height: 860 });
  await page.evaluateOnNewDocument(() => { if (!localStorage.getItem('cadenza.lang')) localStorage.setItem('cadenza.lang', 'en');
    // Short first answers: the conversation must fit the model's 512-token context.
    if (!localStorage.getItem('cadenza.settings')) localStorage.setItem('cadenza.settings', JSON.stringify({ max_tokens: 48 })); });

  // Load time: navigation start to the load event, from the browser's own timing.
  await page.goto(`${serve}/`, { waitUntil: 'load' });
  const nav = await page.evaluate(() => JSON.parse(JSON.stringify(performance.getEntriesByType('navigation')[0])));
  step(`page load ${nav.loadEventEnd.toFixed(1)} ms (DOMContentLoaded ${nav.domContentLoadedEventEnd.toFixed(1)} ms, ${nav.transferSize} bytes of HTML)`);

  // The server has an API key: the page asks for it.
  await page.waitForSelector('[data-testid="key-dialog"][open]', { timeout: 10000 });
  if (artifacts) await page.screenshot({ path: `${artifacts}/key-prompt.png` });
  step('the API key prompt is shown');
  await page.type('#api-key', key);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.querySelector('[data-testid="key-dialog"]'), { timeout: 10000 });
  await page.waitForFunction(() => !document.querySelector('[data-testid="send"]').disabled, { timeout: 10000 });
  allow401 = false;

  // A message; the answer streams in (several updates of the answer's text before it ends).
  await page.type('#prompt', 'Permission is hereby granted');
  const updates = page.evaluate(() => new Promise((resolve) => {
    const seen = new Set();
    const obs = new MutationObserver(() => {
      const a = document.querySelector('article[data-role="assistant"] .content');
      if (a) seen.add(a.textContent.length);
      if (document.querySelector('[data-testid="send"]') && a && a.textContent.length) { obs.disconnect(); resolve(seen.size); }
    });
    obs.observe(document.body, { subtree: true, childList: true, characterData: true });
  }));
  await page.keyboard.press('Enter');
  const distinct = await updates;
  const [answer] = await assistantTexts(page);
  assert.ok(answer.trim().length > 0, 'an answer');
  assert.ok(distinct >= 3, `the answer streamed in (${distinct} distinct lengths seen)`);
  const stats = await page.$eval('[data-testid="stats"]', (e) => e.textContent);
  assert.match(stats, /TTFT [\d.]+ s/);
  assert.match(stats, /tok\/s/);
  step(`answer streamed (${distinct} updates): ${JSON.stringify(answer.slice(0, 80))}; ${stats}`);
  if (artifacts) await page.screenshot({ path: `${artifacts}/chat.png` });

  // Stop: the button is clicked as soon as the first token shows; the server cancels the request.
  await page.click('.settings summary');  // open the settings: max tokens 300 (context 512: 48 + 300 + the prompts)
  await page.$eval('.settings input[type="number"]', (el) => { el.value = ''; });
  await page.type('.settings input[type="number"]', '300');
  await page.type('#prompt', 'The software is provided');
  const stopped = page.evaluate(() => new Promise((resolve) => {
    const obs = new MutationObserver(() => {
      const all = document.querySelectorAll('article[data-role="assistant"] .content');
      const stop = document.querySelector('[data-testid="stop"]');
      if (stop && all.length === 2 && all[1].textContent.length > 0) { obs.disconnect(); stop.click(); resolve(true); }
      if (document.querySelector('[data-role="assistant"] .error')) { obs.disconnect(); resolve(false); }
    });
    obs.observe(document.body, { subtree: true, childList: true, characterData: true });
  }));
  await page.keyboard.press('Enter');
  assert.ok(await stopped, 'the second answer started (no error)');
  await page.waitForSelector('[data-testid="send"]', { timeout: 10000 });
  const stopStats = await page.$$eval('[data-testid="stats"]', (els) => els[els.length - 1].textContent);
  assert.match(stopStats, /stopped/);
  let r = NaN;
  for (let i = 0; i < 100 && r !== 0; i++) { r = await running(); if (r !== 0) await new Promise((ok) => setTimeout(ok, 100)); }
  assert.equal(r, 0, 'cadenza_num_requests_running back to 0 after stop');
  const aborted = /cadenza_request_success_total\{finished_reason="abort"[^}]*\} (\d+)/.exec(await (await fetch(`${serve}/metrics`)).text());
  step(`stopped: ${stopStats}; running = 0; finished_reason="abort" count ${aborted ? aborted[1] : 'absent'}`);

  // Reload: the conversation is still there.
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('article[data-role="user"]', { timeout: 10000 });
  const users = await page.$$eval('article[data-role="user"] .content', (els) => els.map((e) => e.textContent));
  assert.deepEqual(users, ['Permission is hereby granted', 'The software is provided']);
  const titles = await page.$$eval('.convs .conv', (els) => els.map((e) => e.textContent));
  assert.ok(titles.includes('Permission is hereby granted'), `the sidebar lists the conversation: ${titles}`);
  step('the conversation survived a reload');

  // Import a conversation: its answer's math is typeset (KaTeX) and its code highlighted.
  const importPath = `${process.env.ARTIFACTS || '.'}/import.json`;
  writeFileSync(importPath, JSON.stringify({ cadenza_conversations: 1, conversations: [{
    id: 'imported-1', title: 'Imported math', model: '', updated: 1, messages: [
      { role: 'user', content: 'Euler?' },
      { role: 'assistant', content: 'It is $e^{i\\pi} + 1 = 0$.\n\n```python\ndef f(x):\n    return x\n```\n<script>alert(1)</script>' }] }] }));
  const [chooser] = await Promise.all([page.waitForFileChooser(), page.click('.sidebar .row button:nth-child(2)')]);
  await chooser.accept([importPath]);
  await page.waitForFunction(() => [...document.querySelectorAll('.convs .conv')].some((b) => b.textContent === 'Imported math'));
  await page.evaluate(() => [...document.querySelectorAll('.convs .conv')].find((b) => b.textContent === 'Imported math').click());
  await page.waitForSelector('article[data-role="assistant"] .katex', { timeout: 5000 });
  assert.ok(await page.$('article[data-role="assistant"] .hljs-keyword'), 'the code block is highlighted');
  assert.equal(await page.$('article[data-role="assistant"] script'), null, 'markup from the model is sanitized');
  step('imported a conversation: math typeset, code highlighted, HTML sanitized');
  if (artifacts) await page.screenshot({ path: `${artifacts}/chat-math.png` });

  // Language: Chinese.
  await page.select('[data-testid="lang"]', 'zh');
  await page.waitForFunction(() => document.querySelector('[data-testid="send"]').textContent === '发送');
  assert.equal(await page.$eval('[data-testid="tab-server"]', (e) => e.textContent), '服务器');
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'zh-CN');
  step('switched to Chinese');
  if (artifacts) await page.screenshot({ path: `${artifacts}/chat-zh.png` });
  await page.select('[data-testid="lang"]', 'en');

  // The dark theme: the toggle switches it and the page's background follows.
  const lightBg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.click('[data-testid="theme"]');
  const theme = await page.evaluate(() => document.documentElement.dataset.theme);
  const darkBg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(lightBg, darkBg, `the background changes with the theme (${lightBg})`);
  if (artifacts) await page.screenshot({ path: `${artifacts}/chat-${theme}.png` });
  await page.click('[data-testid="theme"]');
  step(`theme toggled to ${theme} (${darkBg}) and back`);

  // The server view: the model, running 0, charts.
  await page.click('[data-testid="tab-server"]');
  await page.waitForFunction(() => document.querySelectorAll('.chart').length >= 4 &&
    document.querySelector('[data-testid="running"] .value')?.textContent === '0', { timeout: 15000 });
  const modelsText = await page.$eval('[data-testid="models"]', (e) => e.textContent);
  assert.match(modelsText, /licenses-tiny/);
  // The KV tier table: the server runs with --kv-offload-memory 16MiB.
  await page.waitForSelector('[data-testid="kv-tiers"] tr[data-tier="memory"]', { timeout: 15000 });
  const tierRow = await page.$eval('[data-testid="kv-tiers"] tr[data-tier="memory"]', (e) => e.textContent);
  assert.match(tierRow, /16\.0 MiB/);
  await new Promise((ok) => setTimeout(ok, 4500));  // a few scrapes for the charts
  if (artifacts) await page.screenshot({ path: `${artifacts}/server.png`, fullPage: true });
  step('server view: model listed, running 0, KV tier table, charts drawn');

  // A phone-sized screen: the chat still fits (no horizontal scrolling).
  await page.setViewport({ width: 390, height: 800, isMobile: true });
  await page.click('[data-testid="tab-chat"]');
  await page.waitForSelector('#prompt');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal overflow on a phone (${overflow}px)`);
  if (artifacts) await page.screenshot({ path: `${artifacts}/chat-phone.png` });
  step('phone-sized layout fits');

  // The gateway: both replicas listed.
  const gw = await browser.newPage();
  watch(gw);
  await gw.setViewport({ width: 1280, height: 860 });
  await gw.goto(`${gateway}/#server`, { waitUntil: 'load' });
  await gw.waitForFunction(() => document.querySelectorAll('[data-testid="replicas"] tbody tr').length === 2, { timeout: 20000 });
  const replicas = await gw.$$eval('[data-testid="replicas"] tbody tr', (rows) => rows.map((r) => r.textContent));
  step(`gateway replicas: ${JSON.stringify(replicas)}`);
  if (artifacts) await gw.screenshot({ path: `${artifacts}/gateway.png`, fullPage: true });

  assert.deepEqual(errors, [], 'no console errors');
  step('PASS');
} finally {
  await browser.close();
}
