// libFuzzer target for the OpenAI request parser (src/server/openai_protocol.cpp) and the chat
// message handling behind POST /v1/chat/completions and /tokenize: the input is a request body.
//
// For every input: parse_json_object; then the embeddings and rerank parsers, the completions,
// chat, tokenize and detokenize parsers;
// every error must be a 400/404 with a JSON error body that serializes; every accepted request must
// satisfy the documented ranges; chat messages are rendered through a chat template (ChatML, a
// tool-calling template, and the *.jinja files of $CADENZA_FUZZ_TEMPLATES when set) exactly as
// ChatRenderer builds the context. Template errors are fine (the server answers 400); exceptions,
// crashes, hangs and runaway memory are not. The structured-output fields (response_format, tools,
// grammar, guided_*) go through parse_structured_output, the schema / regex converters and the
// GBNF compiler over a byte vocabulary, and a compiled grammar gives one token mask.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/json_grammar.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/matcher.h"
#include "grammar/regex_to_gbnf.h"
#include "server/embeddings_protocol.h"
#include "server/openai_protocol.h"
#include "server/structured_output.h"
#include "template/template.h"

namespace {

using cadenza::server::ApiError;
using cadenza::server::Endpoint;
using nlohmann::json;
using nlohmann::ordered_json;

void check(bool ok) {
  if (!ok) std::abort();
}

// A tool-calling template in the style of Hermes/Qwen: system prompt with tools, tool calls and
// tool results, raise_exception on a bad role order.
constexpr const char* kToolTemplate = R"({%- if tools %}<|im_start|>system
{%- if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}
<tools>{% for t in tools %}{{ t | tojson }}
{% endfor %}</tools><|im_end|>
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and loop.first and tools %}{# done above #}
{%- elif m.role in ['user', 'system'] or (m.role == 'assistant' and not m.tool_calls) %}<|im_start|>{{ m.role }}
{{ m.content | trim }}<|im_end|>
{%- elif m.role == 'assistant' %}<|im_start|>assistant
{%- for c in m.tool_calls %}{% set f = c.function if c.function is defined else c %}
<tool_call>{"name": "{{ f.name }}", "arguments": {{ f.arguments | tojson }}}</tool_call>
{%- endfor %}<|im_end|>
{%- elif m.role == 'tool' %}<|im_start|>user
<tool_response>{{ m.content }}</tool_response><|im_end|>
{%- else %}{{ raise_exception('unknown role: ' ~ m.role) }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %})";

std::vector<cadenza::tmpl::Template>& templates() {
  static std::vector<cadenza::tmpl::Template> t;
  return t;
}

void load_templates() {
  auto add = [](std::string_view source) {
    auto parsed = cadenza::tmpl::Template::parse(source);
    if (parsed) templates().push_back(std::move(*parsed));
  };
  add(cadenza::tmpl::chatml_template());
  add(kToolTemplate);
  check(templates().size() == 2);
  if (const char* dir = std::getenv("CADENZA_FUZZ_TEMPLATES"); dir && *dir) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() != ".jinja") continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      add(ss.str());
    }
  }
}

void check_error(const ApiError& e) {
  check(e.status == 400 || e.status == 404);
  check(!e.message.empty());
  (void)cadenza::server::error_body(e).dump();  // must not throw (valid UTF-8)
}

void check_messages(const ordered_json& messages) {
  check(messages.is_array() && !messages.empty());
  for (const auto& m : messages) {
    check(m.is_object());
    check(m.at("role").is_string());
    check(m.at("content").is_string());
  }
  (void)messages.dump();
}

void render(const ordered_json& messages, const ordered_json& tools, size_t which) {
  ordered_json ctx = ordered_json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = true;
  ctx["bos_token"] = "<s>";
  ctx["eos_token"] = "</s>";
  if (!tools.is_null()) ctx["tools"] = tools;
  cadenza::tmpl::RenderOptions opts;
  opts.strftime_now = cadenza::tmpl::fixed_clock(2024, 7, 1);
  opts.max_steps = 200'000;  // keep each input fast; the limit itself is what the server relies on
  opts.max_output_bytes = size_t{1} << 20;
  auto out = templates()[which % templates().size()].render(ctx, opts);
  if (out) check(out->size() <= opts.max_output_bytes);
}

// The structured-output path of the router, up to one mask: whatever the input, a value or an
// ApiError / compile error, never a crash; compilation bounded by tight limits.
void structured(const std::string& text, Endpoint ep) {
  const ordered_json body = ordered_json::parse(text, nullptr, false);
  if (body.is_discarded()) return;
  cadenza::server::StructuredOutput so;
  if (auto e = cadenza::server::parse_structured_output(body, ep, so)) {
    check_error(*e);
    return;
  }
  using Kind = cadenza::server::OutputConstraint::Kind;
  std::string gbnf;
  const auto& c = so.constraint;
  if (c.kind == Kind::kJsonSchema) {
    cadenza::SchemaGrammarOptions opt;
    opt.strict = c.strict;
    opt.max_output_bytes = size_t{1} << 18;
    auto g = cadenza::json_schema_to_gbnf(c.schema, opt);
    if (!g) return;
    gbnf = std::move(*g);
  } else if (c.kind == Kind::kRegex) {
    auto g = cadenza::regex_to_gbnf(c.text);
    if (!g) return;
    gbnf = std::move(*g);
  } else if (c.kind == Kind::kGrammar) {
    gbnf = c.text;
  } else if (c.kind == Kind::kJsonObject) {
    gbnf = cadenza::json_object_gbnf();
  }
  for (const auto& f : so.tools.functions) {  // tool parameters: converted like schemas
    cadenza::SchemaGrammarOptions opt;
    opt.strict = f.strict;
    opt.max_output_bytes = size_t{1} << 18;
    (void)cadenza::json_schema_to_gbnf(f.parameters, opt);
  }
  if (gbnf.empty()) return;
  static const auto index = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("ab");
    bytes.push_back("</s>");
    std::vector<uint8_t> special(bytes.size(), 0);
    special.back() = 1;
    return cadenza::grammar::TokenIndex::build(bytes, special, {257}, bytes);
  }();
  cadenza::grammar::CompileLimits limits;
  limits.max_seconds = 0.2;
  limits.max_grammar_bytes = size_t{1} << 18;
  auto compiled = cadenza::grammar::compile_gbnf(gbnf, index, limits);
  if (!compiled) return;
  cadenza::grammar::GrammarMatcher m(*compiled);
  std::vector<uint32_t> mask(m.mask_words());
  m.fill_next_token_bitmask(mask);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  load_templates();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  json body;
  if (auto e = cadenza::server::parse_json_object(text, body)) {
    check_error(*e);
    return 0;
  }
  // /v1/embeddings and /v1/rerank: an accepted body is within the parsers' bounds.
  if (auto e = cadenza::server::parse_embeddings_request(body); e.error) {
    check_error(*e.error);
  } else {
    check(!e.request.inputs.empty() && e.request.inputs.size() <= cadenza::server::kMaxEmbeddingInputs);
    for (const auto& in : e.request.inputs) {
      check(in.is_tokens ? !in.tokens.empty() : !in.text.empty());
      for (int32_t t : in.tokens) check(t >= 0);
    }
    check(!e.request.dimensions || *e.request.dimensions >= 1);
  }
  if (auto r = cadenza::server::parse_rerank_request(body); r.error) {
    check_error(*r.error);
  } else {
    check(!r.request.query.empty() && !r.request.documents.empty() &&
          r.request.documents.size() <= cadenza::server::kMaxRerankDocuments);
    check(!r.request.top_n || *r.request.top_n >= 1);
  }
  for (Endpoint ep : {Endpoint::kCompletions, Endpoint::kChat}) {
    if (cadenza::server::has_structured_output_fields(body)) structured(text, ep);
    auto p = cadenza::server::parse_completion_request(body, ep);
    if (p.error) {
      check_error(*p.error);
      continue;
    }
    const auto& r = p.request;
    check(r.n >= 1 && r.n <= 16);
    const cadenza::SamplingParams& sp = r.sampling;
    check(!r.given.max_tokens || sp.max_tokens >= 1);
    check(sp.temperature >= 0 && sp.temperature <= 2);
    check(sp.top_p >= 0 && sp.top_p <= 1);
    check(sp.min_p >= 0 && sp.min_p <= 1);
    check(sp.stop.size() <= 16);
    check(r.logprobs >= -1 && r.logprobs <= 20);
    check(sp.repetition_penalty >= 0 && sp.repetition_penalty <= 100);
    check(sp.logit_bias.size() <= 1024);
    for (const auto& [id, bias] : sp.logit_bias) check(id >= 0 && bias >= -100 && bias <= 100);
    // What the router then asks of validate_request (request/validate_request.h): accepted values
    // are in the engine's ranges.
    if (!cadenza::validate_request(std::vector<int32_t>{0}, sp, {1 << 30, int64_t{1} << 32})) {
      check(sp.top_p > 0 && sp.repetition_penalty > 0);
      for (const auto& s : sp.stop) check(!s.empty());
    }
    check(!r.include_usage || r.stream);
    if (ep == Endpoint::kCompletions) {
      check(r.prompt_is_tokens ? !r.prompt_tokens.empty() : true);
      for (int32_t t : r.prompt_tokens) check(t >= 0);
    } else {
      check_messages(r.messages);
      check(r.tools.is_null() || r.tools.is_array());
      render(r.messages, r.tools, size);
    }
  }
  auto t = cadenza::server::parse_tokenize_request(body);
  if (t.error) {
    check_error(*t.error);
  } else if (t.request.has_messages) {
    check_messages(t.request.messages);
    render(t.request.messages, t.request.tools, size + 1);
  }
  auto d = cadenza::server::parse_detokenize_request(body);
  if (d.error) check_error(*d.error);
  for (int32_t id : d.tokens) check(id >= 0);
  return 0;
}
