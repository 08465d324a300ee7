// The Anthropic Messages and OpenAI Responses APIs through the official SDKs (@anthropic-ai/sdk
// messages.create / messages.stream, openai responses.create streamed and not). Run against
// `cadenza serve` (run_e2e.sh) and against `cadenza gateway` in front of it (the gateway e2e).
// Env: CADENZA_ROOT_URL (no /v1), CADENZA_API_KEY, CADENZA_MODEL, CADENZA_STORE=1 when the server
// keeps responses (previous_response_id). Exits non-zero on the first failure.
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const rootURL = process.env.CADENZA_ROOT_URL;
const apiKey = process.env.CADENZA_API_KEY;
const model = process.env.CADENZA_MODEL ?? "tiny-e2e";
const store = process.env.CADENZA_STORE === "1";
const countTokens = process.env.CADENZA_COUNT_TOKENS !== "0";
const label = process.env.CADENZA_LABEL ?? "server";
const anthropic = new Anthropic({ baseURL: rootURL, apiKey, maxRetries: 0, timeout: 60_000 });
const openai = new OpenAI({ baseURL: `${rootURL}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   [${label}] ${name}`);
  } catch (e) {
    console.error(`FAIL [${label}] ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

await check("anthropic messages.create", async () => {
  const m = await anthropic.messages.create({
    model, max_tokens: 8, system: "Be brief.", messages: [{ role: "user", content: "Hello!" }],
  });
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.content[0].type, "text");
  assert.equal(typeof m.content[0].text, "string");
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 8);
});

await check("anthropic messages.stream", async () => {
  let streamed = "";
  const stream = anthropic.messages.stream({
    model, max_tokens: 10, temperature: 0, messages: [{ role: "user", content: "Stream please" }],
  });
  stream.on("text", (t) => { streamed += t; });
  const final = await stream.finalMessage();
  assert.equal(final.content[0].text, streamed);
  assert.ok(final.usage.output_tokens > 0);
  assert.ok(["end_turn", "max_tokens"].includes(final.stop_reason));
  // The same request not streamed gives the same greedy text.
  const once = await anthropic.messages.create({
    model, max_tokens: 10, temperature: 0, messages: [{ role: "user", content: "Stream please" }],
  });
  assert.equal(once.content[0].text, streamed);
});

await check("anthropic tool_use", async () => {
  const m = await anthropic.messages.create({
    model, max_tokens: 200,
    messages: [{ role: "user", content: "Weather?" }],
    tools: [{ name: "get_weather", input_schema: {
      type: "object", properties: { city: { enum: ["Paris", "Oslo"] } }, required: ["city"],
      additionalProperties: false } }],
    tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
  });
  assert.equal(m.stop_reason, "tool_use");
  const call = m.content.find((b) => b.type === "tool_use");
  assert.ok(call, JSON.stringify(m.content));
  assert.ok(["Paris", "Oslo"].includes(call.input.city));
});

await check("anthropic errors", async () => {
  await assert.rejects(
    anthropic.messages.create({ model, messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof Anthropic.BadRequestError && /max_tokens/.test(e.message));
  const wrong = new Anthropic({ baseURL: rootURL, apiKey: "wrong-key", maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model, max_tokens: 2, messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});

await check("anthropic count_tokens", async () => {
  if (!countTokens) {
    await assert.rejects(
      anthropic.messages.countTokens({ model, messages: [{ role: "user", content: "Hello!" }] }),
      (e) => e instanceof Anthropic.BadRequestError && /count_tokens/.test(e.message));
    return;
  }
  const n = await anthropic.messages.countTokens({ model, messages: [{ role: "user", content: "Hello!" }] });
  assert.ok(n.input_tokens > 0);
});

await check("openai responses.create", async () => {
  const r = await openai.responses.create({
    model, input: "Hello!", instructions: "Be brief.", max_output_tokens: 8, temperature: 0,
  });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, "response");
  assert.ok(["completed", "incomplete"].includes(r.status));
  assert.equal(typeof r.output_text, "string");
  assert.equal(r.output[0].type, "message");
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  if (store) {
    const again = await openai.responses.retrieve(r.id);  // (the SDK adds output_text on create only)
    assert.equal(again.id, r.id);
    assert.equal(again.output[0].content[0].text, r.output_text);
    const next = await openai.responses.create({
      model, input: "And then?", previous_response_id: r.id, max_output_tokens: 4,
    });
    assert.ok(next.usage.input_tokens > r.usage.input_tokens);
    await openai.responses.del(next.id);
    await assert.rejects(openai.responses.retrieve(next.id), (e) => e instanceof OpenAI.NotFoundError);
  }
});

await check("openai responses.create streamed", async () => {
  const stream = await openai.responses.create({
    model, input: [{ role: "user", content: "Stream please" }], max_output_tokens: 10, temperature: 0,
    stream: true,
  });
  let text = "", last = null, seq = -1;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq + 1);
    seq = ev.sequence_number;
    if (ev.type === "response.output_text.delta") text += ev.delta;
    last = ev;
  }
  assert.ok(["response.completed", "response.incomplete"].includes(last.type), last.type);
  assert.equal(last.response.output[0].content[0].text, text);
  const once = await openai.responses.create({
    model, input: "Stream please", max_output_tokens: 10, temperature: 0,
  });
  assert.equal(once.output_text, text);
});

await check("openai responses errors", async () => {
  await assert.rejects(
    openai.responses.create({ model, input: "x", tools: [{ type: "web_search_preview" }] }),
    (e) => e instanceof OpenAI.BadRequestError && /tools\[0\]\.type/.test(e.message));
});

console.log(`all Messages/Responses SDK checks passed (${label})`);
