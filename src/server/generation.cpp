#include "server/generation.h"

#include <chrono>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "server/sse.h"

namespace cadenza::server {

using json = nlohmann::ordered_json;

std::string random_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

namespace {
std::string finish_reason_text(engine::FinishReason r) { return engine::to_string(r); }

// JSON has no -inf: suppressed tokens get OpenAI's stand-in.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

json GenerationJob::logprobs_json(const std::vector<engine::TokenLogprob>& entries,
                                  size_t text_offset) const {
  if (logprobs_ < 0) return nullptr;
  if (endpoint_ == Endpoint::kChat) {
    json content = json::array();
    for (const auto& e : entries) {
      const std::string piece = tokenizer_.token_piece(e.token);
      json top = json::array();
      for (const auto& t : e.top) {
        const std::string tp = tokenizer_.token_piece(t.token);
        top.push_back({{"token", tp}, {"logprob", finite_logprob(t.logprob)}, {"bytes", bytes_of(tp)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", finite_logprob(e.logprob)},
                         {"bytes", bytes_of(piece)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& e : entries) {
    const std::string piece = tokenizer_.token_piece(e.token);
    tokens.push_back(piece);
    token_logprobs.push_back(finite_logprob(e.logprob));
    json alternatives = json::object();
    for (const auto& t : e.top) alternatives[tokenizer_.token_piece(t.token)] = finite_logprob(t.logprob);
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

void GenerationJob::append_logprobs(json& into, const json& more) const {
  if (more.is_null()) return;
  if (into.is_null()) {
    into = more;
    return;
  }
  for (const auto& [key, value] : more.items())
    for (const auto& v : value) into[key].push_back(v);
}

GenerationJob::GenerationJob(const CompletionRequest& request, std::string model_name,
                             int32_t prompt_tokens, const Tokenizer& tokenizer,
                             OutputParsing parsing)
    : tokenizer_(tokenizer),
      logprobs_(request.logprobs),
      endpoint_(request.endpoint),
      stream_(request.stream),
      include_usage_(request.include_usage),
      id_(random_id(request.endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      model_(std::move(model_name)),
      prompt_tokens_(prompt_tokens),
      parsing_(std::move(parsing)),
      choices_(static_cast<size_t>(request.n)) {
  if (endpoint_ != Endpoint::kChat || !parsing_.active()) return;
  for (size_t i = 0; i < choices_.size(); ++i) {
    toolcall::ParseOptions options = parsing_.options;
    options.id_seed += i;  // distinct call ids per choice
    choices_[i].parser.emplace(parsing_.tools, options);
  }
}

std::vector<toolcall::OutputDelta> GenerationJob::parse(Choice& c, const std::string& text,
                                                        bool finish) {
  std::vector<toolcall::OutputDelta> events = c.parser->feed(text);
  if (finish) {
    std::vector<toolcall::OutputDelta> tail = c.parser->finish();
    events.insert(events.end(), std::make_move_iterator(tail.begin()),
                  std::make_move_iterator(tail.end()));
  }
  using Kind = toolcall::OutputDelta::Kind;
  for (const toolcall::OutputDelta& d : events) {
    switch (d.kind) {
      case Kind::kContent: c.content += d.text; break;
      case Kind::kReasoning: c.reasoning += d.text; break;
      case Kind::kToolCallStart: c.calls.push_back({d.id, d.name, ""}); break;
      case Kind::kToolCallArguments:
        if (d.index < c.calls.size()) c.calls[d.index].arguments += d.text;
        break;
    }
  }
  if (finish && !c.calls.empty() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
  return events;
}

std::string GenerationJob::delta_chunks(size_t index, const std::vector<toolcall::OutputDelta>& events,
                                        const json& logprobs) {
  using Kind = toolcall::OutputDelta::Kind;
  std::string sse;
  json lp = logprobs;  // on the first chunk only
  for (const toolcall::OutputDelta& d : events) {
    json delta;
    switch (d.kind) {
      case Kind::kContent: delta = {{"content", d.text}}; break;
      case Kind::kReasoning: delta = {{"reasoning_content", d.text}}; break;
      case Kind::kToolCallStart:
        delta = {{"tool_calls",
                  json::array({{{"index", d.index},
                                {"id", d.id},
                                {"type", "function"},
                                {"function", {{"name", d.name}, {"arguments", ""}}}}})}};
        break;
      case Kind::kToolCallArguments:
        delta = {{"tool_calls",
                  json::array({{{"index", d.index}, {"function", {{"arguments", d.text}}}}})}};
        break;
    }
    sse += emit(chunk(json::array({{{"index", index},
                                         {"delta", std::move(delta)},
                                         {"logprobs", std::move(lp)},
                                         {"finish_reason", nullptr}}})));
    lp = nullptr;
  }
  // Tokens whose text the parser holds back still carry their logprobs.
  if (sse.empty() && !logprobs.is_null())
    sse += emit(chunk(json::array({{{"index", index},
                                         {"delta", {{"content", ""}}},
                                         {"logprobs", logprobs},
                                         {"finish_reason", nullptr}}})));
  return sse;
}

json GenerationJob::chunk(json choices) const {
  json c = {{"id", id_},
            {"object", endpoint_ == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", std::move(choices)}};
  if (include_usage_) c["usage"] = nullptr;
  return c;
}

json GenerationJob::usage() const {
  const int32_t completion = completion_tokens();
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens_ + completion},
          {"prompt_tokens_details", {{"cached_tokens", std::min(cached_tokens_, prompt_tokens_)}}}};
}

int32_t GenerationJob::completion_tokens() const {
  int32_t n = 0;
  for (const auto& c : choices_) n += c.tokens;
  return n;
}

std::string GenerationJob::on_event(const GenEvent& e) {
  if (e.index >= choices_.size()) return {};
  Choice& c = choices_[e.index];
  if (c.finished) return {};
  const auto& out = e.out;
  c.tokens += static_cast<int32_t>(out.new_token_ids.size());
  if (out.finished) {
    c.finished = true;
    ++finished_;
    // Sample 0 computed the prompt (the others are forked from it): its prefix-cache hit is the
    // request's.
    if (e.index == 0) cached_tokens_ = out.metrics.num_cached_prompt_tokens;
    c.finish_reason = finish_reason_text(out.finish_reason);
    c.stop_string = out.stop_string;
    if (out.finish_reason == engine::FinishReason::kError && !error_ && (e.rejected || !started_)) {
      ApiError err;
      err.status = e.rejected ? 400 : 500;
      err.type = e.rejected ? "invalid_request_error" : "server_error";
      err.message = out.error.empty() ? "generation failed" : out.error;
      error_ = err;
    }
  }
  if (error_) return {};
  if (!stream_) {
    append_logprobs(c.logprobs, logprobs_json(out.logprobs, c.text.size()));
    c.text += out.text;
    if (c.parser) parse(c, out.text, out.finished);
    return {};
  }
  const json lp = logprobs_json(out.logprobs, c.text.size());
  c.text += out.text;
  std::string sse;
  const json index = static_cast<int64_t>(e.index);
  if (endpoint_ == Endpoint::kChat) {
    if (!c.role_sent) {
      c.role_sent = true;
      sse += emit(chunk(json::array({{{"index", index},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}})));
    }
    // One chunk per generated token, even when its text is held back (part of a UTF-8
    // character, a possible stop string) or empty (a special token), as vLLM does: clients
    // time tokens by chunks. With a parser, chunks follow what it settles instead (a held-back
    // marker must not reach the client as content).
    if (c.parser)
      sse += delta_chunks(e.index, parse(c, out.text, out.finished), lp);
    else if (!out.text.empty() || !out.logprobs.empty() || !out.new_token_ids.empty())
      sse += emit(chunk(json::array({{{"index", index},
                                           {"delta", {{"content", out.text}}},
                                           {"logprobs", lp},
                                           {"finish_reason", nullptr}}})));
    if (out.finished) {  // after parse(): a choice that called a tool finishes with tool_calls
      json last = {{"index", index},
                   {"delta", json::object()},
                   {"logprobs", nullptr},
                   {"finish_reason", c.finish_reason}};
      if (!c.stop_string.empty()) last["stop_reason"] = c.stop_string;  // vLLM's field
      sse += emit(chunk(json::array({std::move(last)})));
    }
  } else if (!out.text.empty() || !out.logprobs.empty() || !out.new_token_ids.empty() ||
             out.finished) {
    sse += emit(chunk(json::array({{{"index", index},
                                         {"text", out.text},
                                         {"logprobs", lp},
                                         {"finish_reason", out.finished ? json(c.finish_reason)
                                                                        : json(nullptr)}}})));
  }
  if (!sse.empty()) started_ = true;
  return sse;
}

std::string GenerationJob::emit(const json& c) {
  if (shape_.stream) return shape_.stream->on_chunk(c);
  return sse_event(c.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string GenerationJob::stream_tail() {
  std::string out;
  if (include_usage_) {
    json c = chunk(json::array());
    c["usage"] = usage();
    out += emit(c);
  }
  if (shape_.stream) {
    out += shape_.stream->finish();
    if (shape_.finished) shape_.finished(nullptr);
    return out;
  }
  out += sse_event("[DONE]");
  return out;
}

std::string GenerationJob::stream_error(const ApiError& e) {
  if (shape_.stream) {
    apishape::ShapeError se{e.status, e.message, e.type, e.param, e.code};
    return shape_.stream->fail(se);
  }
  return sse_event(error_body(e).dump()) + sse_event("[DONE]");
}

json shaped_error_body(apishape::Api api, const ApiError& e) {
  if (api == apishape::Api::kChat) return json::parse(error_body(e).dump());
  return apishape::error_body(api, apishape::ShapeError{e.status, e.message, e.type, e.param, e.code});
}

json GenerationJob::body() {
  json b = chat_body();
  if (shape_.body) b = shape_.body(b);
  if (shape_.finished) shape_.finished(b);
  return b;
}

json GenerationJob::message(const Choice& c) const {
  if (!c.parser) return {{"role", "assistant"}, {"content", c.text}};
  // OpenAI: content is null when the message is only tool calls.
  json m = {{"role", "assistant"},
            {"content", c.calls.empty() || !c.content.empty() ? json(c.content) : json(nullptr)}};
  if (!c.reasoning.empty()) m["reasoning_content"] = c.reasoning;
  if (!c.calls.empty()) {
    json calls = json::array();
    for (const toolcall::ToolCall& call : c.calls)
      calls.push_back({{"id", call.id},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

json GenerationJob::chat_body() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    if (endpoint_ == Endpoint::kChat) {
      choices.push_back({{"index", i},
                         {"message", message(c)},
                         {"logprobs", c.logprobs},
                         {"finish_reason", c.finish_reason}});
      if (!c.stop_string.empty()) choices.back()["stop_reason"] = c.stop_string;
    } else
      choices.push_back({{"index", i},
                         {"text", c.text},
                         {"logprobs", c.logprobs},
                         {"finish_reason", c.finish_reason}});
  }
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::kChat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(choices)},
          {"usage", usage()}};
}

}  // namespace cadenza::server
