// `cadenza serve` through the official OpenAI Node client: chat and completions, streamed and
// not, n > 1, stop, usage, and error cases. Exits non-zero on the first failure.
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.CADENZA_BASE_URL;
const apiKey = process.env.CADENZA_API_KEY;
const rootURL = process.env.CADENZA_ROOT_URL;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = "tiny-e2e";

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.error(`FAIL ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

await check("models", async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, model);
});

await check("chat, not streamed", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 8, seed: 1,
  });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

await check("chat, streamed with usage", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Stream please" }], max_tokens: 10,
    stream: true, stream_options: { include_usage: true }, ignore_eos: true, seed: 2,
  });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 10);
  assert.equal(typeof text, "string");
});

await check("completions, not streamed, n > 1", async () => {
  const r = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 6, n: 3, seed: 5, ignore_eos: true,
  });
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 18);
});

await check("completions, streamed", async () => {
  const stream = await client.completions.create({
    model, prompt: "Hi", max_tokens: 7, stream: true, ignore_eos: true, seed: 3,
  });
  let text = "", finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "text_completion");
    text += chunk.choices[0]?.text ?? "";
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  const whole = await client.completions.create({
    model, prompt: "Hi", max_tokens: 7, ignore_eos: true, seed: 3,
  });
  assert.equal(finish, "length");
  assert.equal(whole.choices[0].text, text);
});

await check("stop", async () => {
  const base = await client.completions.create({
    model, prompt: "abc", max_tokens: 30, temperature: 0, ignore_eos: true,
  });
  const text = base.choices[0].text;
  const m = /[A-Za-z0-9]/.exec(text.slice(1));
  if (!m) return;  // nothing ASCII to stop on
  const stop = m[0];
  const r = await client.completions.create({
    model, prompt: "abc", max_tokens: 30, temperature: 0, ignore_eos: true, stop: [stop],
  });
  assert.equal(r.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, "stop");
});

await check("errors", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(
    client.completions.create({ model, prompt: "x", temperature: 9 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message));
  const anonymous = new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 });
  await assert.rejects(anonymous.models.list(),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const health = await fetch(`${rootURL}/health`);
  assert.equal(health.status, 200);
});

console.log("all OpenAI client checks passed");
