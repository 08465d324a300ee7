// `cadenza serve` through the official OpenAI Node client: chat and completions, streamed and
// not, n > 1, stop, usage, structured output (response_format through the SDK's parse helper,
// tools streamed and not) and error cases. Exits non-zero on the first failure.
import assert from "node:assert/strict";
import OpenAI from "openai";
import * as zlibModule from "node:zlib";

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

// Structured output (docs/structured-output.md). Every string and number is bounded so that the
// random-weight model finishes well within max_tokens at temperature 1.
const recordSchema = {
  type: "object",
  properties: {
    color: { enum: ["red", "green", "blue"] },
    count: { type: "integer", minimum: 0, maximum: 99 },
    ok: { type: "boolean" },
  },
  required: ["color", "count", "ok"],
  additionalProperties: false,
};
const tools = [{
  type: "function",
  function: {
    name: "get_weather", strict: true,
    parameters: {
      type: "object",
      properties: { city: { enum: ["Paris", "Oslo"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
      required: ["city", "days"], additionalProperties: false,
    },
  },
}];
function checkWeatherArgs(args) {
  assert.ok(["Paris", "Oslo"].includes(args.city), JSON.stringify(args));
  assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, JSON.stringify(args));
  assert.deepEqual(Object.keys(args).sort(), ["city", "days"]);
}

await check("response_format json_schema through the parse helper", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.beta.chat.completions.parse({
      model, messages: [{ role: "user", content: "A record" }], temperature: 1, seed, max_tokens: 200,
      response_format: { type: "json_schema", json_schema: { name: "record", strict: true, schema: recordSchema } },
    });
    const parsed = r.choices[0].message.parsed;
    assert.ok(["red", "green", "blue"].includes(parsed.color), JSON.stringify(parsed));
    assert.ok(Number.isInteger(parsed.count) && parsed.count >= 0 && parsed.count <= 99);
    assert.equal(typeof parsed.ok, "boolean");
    assert.equal(r.choices[0].finish_reason, "stop");
  }
});

await check("tools, required, not streamed (and parsed arguments)", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather?" }], temperature: 1, seed: 4, max_tokens: 200,
    tools, tool_choice: "required",
  });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.ok(m.tool_calls.length >= 1);
  for (const call of m.tool_calls) {
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "get_weather");
    checkWeatherArgs(JSON.parse(call.function.arguments));
  }
  const p = await client.beta.chat.completions.parse({
    model, messages: [{ role: "user", content: "Weather?" }], temperature: 1, seed: 4, max_tokens: 200,
    tools, tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  for (const call of p.choices[0].message.tool_calls) checkWeatherArgs(call.function.parsed_arguments);
});

await check("tools, required, streamed: the SDK's accumulated message", async () => {
  const stream = client.beta.chat.completions.stream({
    model, messages: [{ role: "user", content: "Weather?" }], temperature: 1, seed: 5, max_tokens: 200,
    tools, tool_choice: "required", parallel_tool_calls: false,
  });
  const done = await stream.finalChatCompletion();
  const m = done.choices[0].message;
  assert.equal(done.choices[0].finish_reason, "tool_calls");
  assert.equal(m.tool_calls.length, 1);
  assert.match(m.tool_calls[0].id, /^call_/);
  checkWeatherArgs(JSON.parse(m.tool_calls[0].function.arguments));
  // The raw deltas, as a client without the helper sees them.
  const raw = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather?" }], temperature: 1, seed: 5, max_tokens: 200,
    tools, tool_choice: "required", parallel_tool_calls: false, stream: true,
  });
  let args = "", name = null, finish = null;
  for await (const chunk of raw) {
    for (const c of chunk.choices) {
      for (const tc of c.delta?.tool_calls ?? []) {
        if (tc.function?.name) name = tc.function.name;
        args += tc.function?.arguments ?? "";
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(name, "get_weather");
  assert.equal(finish, "tool_calls");
  assert.equal(args, m.tool_calls[0].function.arguments);  // same seed, same call
});

await check("structured output errors", async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", not: {} } } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && /\/not/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({
      model, messages: [{ role: "user", content: "x" }], tools,
      tool_choice: { type: "function", function: { name: "nope" } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && /nope/.test(e.message));
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

// A 32 x 32 RGB PNG written here (zlib from node, CRC-32 by hand): the test's own image.
function png(seed) {
  const { deflateSync } = zlibModule;
  const w = 32, h = 32;
  const raw = Buffer.alloc(h * (1 + w * 3));
  for (let y = 0; y < h; y++) {
    raw[y * (1 + w * 3)] = 0;
    for (let x = 0; x < w; x++)
      for (let c = 0; c < 3; c++) raw[y * (1 + w * 3) + 1 + x * 3 + c] = (x * 7 + y * 13 + c * 50 + seed * 31) & 255;
  }
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 255] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr),
                        chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

// Images (the server runs with --mmproj: run_e2e.sh sets CADENZA_E2E_IMAGES=1).
if (process.env.CADENZA_E2E_IMAGES === "1") {
  await check("chat with a data-URL image", async () => {
    const url = `data:image/png;base64,${png(1).toString("base64")}`;
    const ask = () => client.chat.completions.create({
      model, max_tokens: 4, temperature: 0,
      messages: [{ role: "user", content: [{ type: "text", text: "What is this?" },
                                           { type: "image_url", image_url: { url, detail: "auto" } }] }],
    });
    const r = await ask();
    const plain = await client.chat.completions.create({
      model, max_tokens: 4, temperature: 0, messages: [{ role: "user", content: "What is this?" }],
    });
    assert.equal(r.usage.prompt_tokens, plain.usage.prompt_tokens + 16);  // clip-tiny: 16 image tokens
    const again = await ask();
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 16, JSON.stringify(again.usage));
    assert.equal(again.choices[0].message.content, r.choices[0].message.content);
    const broken = png(2).subarray(0, 60).toString("base64");
    await assert.rejects(
      client.chat.completions.create({
        model, max_tokens: 4,
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${broken}` } }] }],
      }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /image 0/.test(e.message));
  });
}

console.log("all OpenAI client checks passed");
