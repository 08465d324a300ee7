#include "apishape/anthropic.h"

#include <algorithm>

#include <fmt/format.h>

#include "apishape/fields.h"

namespace cadenza::apishape {

using ojson = nlohmann::ordered_json;
using detail::one_of;
using detail::present;

std::string named_event(const std::string& name, const ojson& data) {
  return "event: " + name + "\ndata: " + data.dump(-1, ' ', false, ojson::error_handler_t::replace) +
         "\n\n";
}

namespace {

// Text of a string or an array of text blocks (system prompts, tool results).
std::optional<ShapeError> text_of(const ojson& v, const std::string& where, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return invalid(where + " must be a string or an array of text blocks", where);
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& b = v[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!b.is_object() || !b.contains("type") || !b.at("type").is_string())
      return invalid(at + " must be a block with a 'type'", where);
    if (b.at("type") != "text")
      return unsupported(at + ".type", "block type '" + b.at("type").get<std::string>() + "'");
    if (!b.contains("text") || !b.at("text").is_string())
      return invalid(at + ".text must be a string", where);
    if (auto e = detail::unknown_field(b, {"type", "text", "cache_control", "citations"}, at)) return e;
    out += b.at("text").get<std::string>();
  }
  return std::nullopt;
}

// One Anthropic message -> chat messages appended to `out` (a user turn with tool results gives
// one `tool` message per result, then the user's text if any).
std::optional<ShapeError> convert_message(const ojson& m, size_t i, ojson& out) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) return invalid(where + " must be an object", "messages");
  if (auto e = detail::unknown_field(m, {"role", "content"}, where)) return e;
  if (!m.contains("role") || !m.at("role").is_string() ||
      !one_of(m.at("role").get<std::string>(), {"user", "assistant"}))
    return invalid(where + ".role must be 'user' or 'assistant'", "messages");
  const std::string role = m.at("role").get<std::string>();
  if (!m.contains("content")) return invalid(where + ".content is required", "messages");
  const ojson& c = m.at("content");
  if (c.is_string()) {
    out.push_back({{"role", role}, {"content", c.get<std::string>()}});
    return std::nullopt;
  }
  if (!c.is_array()) return invalid(where + ".content must be a string or an array of blocks", "messages");
  ojson parts = ojson::array();
  ojson calls = ojson::array();
  for (size_t j = 0; j < c.size(); ++j) {
    const ojson& b = c[j];
    const std::string at = fmt::format("{}.content[{}]", where, j);
    if (!b.is_object() || !b.contains("type") || !b.at("type").is_string())
      return invalid(at + " must be a block with a 'type'", "messages");
    const std::string type = b.at("type").get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b.at("text").is_string())
        return invalid(at + ".text must be a string", "messages");
      if (auto e = detail::unknown_field(b, {"type", "text", "cache_control", "citations"}, at)) return e;
      parts.push_back({{"type", "text"}, {"text", b.at("text")}});
    } else if (type == "image" && role == "user") {
      // {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ...}}
      // or a {"type": "url", "url": ...} source: a chat image_url part (the server checks it).
      if (auto e = detail::unknown_field(b, {"type", "source", "cache_control"}, at)) return e;
      const ojson* src = b.contains("source") && b.at("source").is_object() ? &b.at("source") : nullptr;
      const std::string st = src && src->contains("type") && src->at("type").is_string()
                                 ? src->at("type").get<std::string>() : "";
      if (st == "base64") {
        if (!src->contains("media_type") || !src->at("media_type").is_string() ||
            !src->contains("data") || !src->at("data").is_string())
          return invalid(at + ".source needs a string 'media_type' and 'data'", "messages");
        parts.push_back({{"type", "image_url"},
                         {"image_url", {{"url", "data:" + src->at("media_type").get<std::string>() +
                                                    ";base64," + src->at("data").get<std::string>()}}}});
      } else if (st == "url") {
        if (!src->contains("url") || !src->at("url").is_string())
          return invalid(at + ".source.url must be a string", "messages");
        parts.push_back({{"type", "image_url"}, {"image_url", {{"url", src->at("url")}}}});
      } else {
        return invalid(at + ".source must be {\"type\": \"base64\", ...} or {\"type\": \"url\", ...}",
                       "messages");
      }
    } else if (type == "tool_use" && role == "assistant") {
      if (auto e = detail::unknown_field(b, {"type", "id", "name", "input", "cache_control"}, at)) return e;
      if (!b.contains("id") || !b.at("id").is_string() || !b.contains("name") ||
          !b.at("name").is_string())
        return invalid(at + " needs a string 'id' and 'name'", "messages");
      const ojson input = b.contains("input") ? b.at("input") : ojson::object();
      if (!input.is_object()) return invalid(at + ".input must be an object", "messages");
      calls.push_back({{"id", b.at("id")},
                       {"type", "function"},
                       {"function", {{"name", b.at("name")}, {"arguments", input.dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      if (auto e = detail::unknown_field(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, at))
        return e;
      if (!b.contains("tool_use_id") || !b.at("tool_use_id").is_string())
        return invalid(at + ".tool_use_id must be a string", "messages");
      std::string text;
      if (present(b, "content"))
        if (auto e = text_of(b.at("content"), at + ".content", text)) return e;
      if (present(b, "is_error") && !b.at("is_error").is_boolean())
        return invalid(at + ".is_error must be a boolean", "messages");
      if (present(b, "is_error") && b.at("is_error").get<bool>()) text = "Error: " + text;
      out.push_back({{"role", "tool"}, {"tool_call_id", b.at("tool_use_id")}, {"content", text}});
    } else {
      return unsupported(at + ".type", "block type '" + type + "' in a " + role + " message");
    }
  }
  if (role == "assistant") {
    ojson msg = {{"role", "assistant"}, {"content", parts.empty() ? ojson("") : parts}};
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    out.push_back(std::move(msg));
  } else if (!parts.empty() || c.empty()) {
    out.push_back({{"role", "user"}, {"content", parts.empty() ? ojson("") : parts}});
  }
  return std::nullopt;
}

std::optional<ShapeError> convert_tools(const ojson& body, ojson& chat) {
  if (present(body, "tools")) {
    const ojson& tools = body.at("tools");
    if (!tools.is_array()) return invalid("'tools' must be an array", "tools");
    ojson out = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      const ojson& t = tools[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object()) return invalid(at + " must be an object", "tools");
      if (present(t, "type") && t.at("type") != "custom")
        return unsupported(at + ".type", "tool type '" +
                                          (t.at("type").is_string() ? t.at("type").get<std::string>() : "?") +
                                          "' (only custom client tools)");
      if (auto e = detail::unknown_field(t, {"type", "name", "description", "input_schema", "cache_control"}, at))
        return e;
      if (!t.contains("name") || !t.at("name").is_string())
        return invalid(at + ".name must be a string", "tools");
      ojson fn = {{"name", t.at("name")}};
      if (present(t, "description")) {
        if (!t.at("description").is_string()) return invalid(at + ".description must be a string", "tools");
        fn["description"] = t.at("description");
      }
      if (!t.contains("input_schema") || !t.at("input_schema").is_object())
        return invalid(at + ".input_schema must be an object", "tools");
      fn["parameters"] = t.at("input_schema");
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(out);
  }
  if (present(body, "tool_choice")) {
    const ojson& tc = body.at("tool_choice");
    if (!tc.is_object() || !tc.contains("type") || !tc.at("type").is_string())
      return invalid("'tool_choice' must be an object with a 'type'", "tool_choice");
    if (auto e = detail::unknown_field(tc, {"type", "name", "disable_parallel_tool_use"}, "tool_choice")) return e;
    const std::string type = tc.at("type").get<std::string>();
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool") {
      if (!tc.contains("name") || !tc.at("name").is_string())
        return invalid("tool_choice.name must be a string", "tool_choice");
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc.at("name")}}}};
    } else {
      return invalid("tool_choice.type must be auto, any, tool or none", "tool_choice");
    }
    bool no_parallel = false;
    if (auto e = detail::read_bool(tc, "disable_parallel_tool_use", no_parallel)) {
      e->param = "tool_choice";
      return e;
    }
    if (no_parallel) chat["parallel_tool_calls"] = false;
  }
  return std::nullopt;
}

ChatRequest convert(const ojson& body, bool count_only) {
  ChatRequest r;
  auto fail = [&](ShapeError e) {
    r.error = std::move(e);
    return std::move(r);
  };
  if (!body.is_object()) return fail(invalid("the request body must be a JSON object"));
  if (count_only) {
    if (auto e = detail::unknown_field(body, {"model", "messages", "system", "tools", "tool_choice", "thinking"}))
      return fail(*e);
  } else if (auto e = detail::unknown_field(
                 body, {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
                        "top_p", "top_k", "stream", "tools", "tool_choice", "metadata",
                        "service_tier", "thinking"})) {
    return fail(*e);
  }
  ojson& chat = r.chat = ojson::object();
  if (present(body, "model")) {
    if (!body.at("model").is_string()) return fail(invalid("'model' must be a string", "model"));
    chat["model"] = body.at("model");
  }
  if (present(body, "thinking")) {
    const ojson& t = body.at("thinking");
    if (!t.is_object() || !t.contains("type") || t.at("type") != "disabled")
      return fail(unsupported("thinking", "only {\"type\": \"disabled\"}"));
  }
  if (present(body, "metadata") && !body.at("metadata").is_object())
    return fail(invalid("'metadata' must be an object", "metadata"));
  if (present(body, "service_tier") && !body.at("service_tier").is_string())
    return fail(invalid("'service_tier' must be a string", "service_tier"));

  ojson messages = ojson::array();
  if (present(body, "system")) {
    std::string system;
    if (auto e = text_of(body.at("system"), "system", system)) return fail(*e);
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  if (!body.contains("messages") || !body.at("messages").is_array() || body.at("messages").empty())
    return fail(invalid("'messages' must be a non-empty array", "messages"));
  const ojson& in = body.at("messages");
  for (size_t i = 0; i < in.size(); ++i)
    if (auto e = convert_message(in[i], i, messages)) return fail(*e);
  chat["messages"] = std::move(messages);

  if (!count_only) {
    if (!present(body, "max_tokens")) return fail(invalid("'max_tokens' is required", "max_tokens"));
    if (auto e = detail::copy_positive_int(body, "max_tokens", chat, "max_tokens")) return fail(*e);
    if (present(body, "stop_sequences")) {
      const ojson& s = body.at("stop_sequences");
      if (!s.is_array()) return fail(invalid("'stop_sequences' must be an array of strings", "stop_sequences"));
      for (const ojson& x : s)
        if (!x.is_string() || x.get<std::string>().empty())
          return fail(invalid("'stop_sequences' must hold non-empty strings", "stop_sequences"));
      if (!s.empty()) chat["stop"] = s;
    }
    for (const char* k : {"temperature", "top_p"})
      if (auto e = detail::copy_number(body, k, chat)) return fail(*e);
    if (present(body, "top_k")) {
      if (!body.at("top_k").is_number_integer())
        return fail(invalid("'top_k' must be an integer", "top_k"));
      chat["top_k"] = body.at("top_k");
    }
    if (auto e = detail::read_bool(body, "stream", r.stream)) return fail(*e);
    if (r.stream) {
      chat["stream"] = true;
      chat["stream_options"] = {{"include_usage", true}};
    }
  }
  if (auto e = convert_tools(body, chat)) return fail(*e);
  return r;
}

}  // namespace

ChatRequest messages_to_chat(const ojson& body) { return convert(body, false); }
ChatRequest count_tokens_to_chat(const ojson& body) { return convert(body, true); }

std::string anthropic_stop_reason(const ChatResult& r) {
  // The length limit first: a call cut off by it is not a finished tool_use turn.
  if (r.finish_reason == "length") return "max_tokens";
  if (!r.calls.empty() || r.finish_reason == "tool_calls") return "tool_use";
  if (r.stop_string) return "stop_sequence";
  return "end_turn";
}

namespace {
// Anthropic's usage: input_tokens counts the prompt tokens that were not read from the cache;
// cache_read_input_tokens the ones that were (Cadenza's prefix cache, with its tiers).
ojson usage(int64_t prompt_tokens, int64_t cached_tokens, int64_t output_tokens) {
  const int64_t cached = std::clamp<int64_t>(cached_tokens, 0, prompt_tokens);
  return {{"input_tokens", prompt_tokens - cached},
          {"cache_read_input_tokens", cached},
          {"output_tokens", output_tokens}};
}

ojson stop_sequence(const ChatResult& r) {
  return anthropic_stop_reason(r) == "stop_sequence" ? ojson(*r.stop_string) : ojson(nullptr);
}
}  // namespace

ojson chat_to_message(const ChatResult& r, const std::string& id) {
  ojson content = ojson::array();
  if (!r.text.empty() || r.calls.empty()) content.push_back({{"type", "text"}, {"text", r.text}});
  for (const ChatToolCall& c : r.calls)
    content.push_back({{"type", "tool_use"},
                       {"id", c.id},
                       {"name", c.name},
                       {"input", arguments_object(c.arguments)}});
  return {{"id", id.empty() ? random_id("msg_") : id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", r.model},
          {"content", std::move(content)},
          {"stop_reason", anthropic_stop_reason(r)},
          {"stop_sequence", stop_sequence(r)},
          {"usage", usage(r.prompt_tokens, r.cached_tokens, r.completion_tokens)}};
}

MessagesStream::MessagesStream(int64_t input_tokens, std::string id)
    : id_(id.empty() ? random_id("msg_") : std::move(id)), input_tokens_(input_tokens) {}

std::string MessagesStream::start() {
  if (started_) return {};
  started_ = true;
  ojson msg = {{"id", id_},
               {"type", "message"},
               {"role", "assistant"},
               {"model", acc_.model},
               {"content", ojson::array()},
               {"stop_reason", nullptr},
               {"stop_sequence", nullptr},
               {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
  return named_event("message_start", {{"type", "message_start"}, {"message", std::move(msg)}}) +
         named_event("ping", {{"type", "ping"}});
}

std::string MessagesStream::close_block() {
  if (block_ < 0) return {};
  std::string out = named_event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_}});
  block_ = -1;
  return out;
}

std::string MessagesStream::on_chunk(const ojson& chunk) {
  if (finished_) return {};
  std::vector<ChatDelta> events = decode_chat_chunk(chunk, acc_);
  std::string out = start();
  for (const ChatDelta& d : events) {
    switch (d.kind) {
      case ChatDelta::Kind::kText:
        if (block_ < 0 || !text_open_) {
          out += close_block();
          block_ = next_block_++;
          text_open_ = true;
          out += named_event("content_block_start",
                             {{"type", "content_block_start"},
                              {"index", block_},
                              {"content_block", {{"type", "text"}, {"text", ""}}}});
        }
        out += named_event("content_block_delta",
                           {{"type", "content_block_delta"},
                            {"index", block_},
                            {"delta", {{"type", "text_delta"}, {"text", d.text}}}});
        break;
      case ChatDelta::Kind::kToolStart:
        out += close_block();
        block_ = next_block_++;
        text_open_ = false;
        tool_open_ = d.tool_index;
        out += named_event("content_block_start",
                           {{"type", "content_block_start"},
                            {"index", block_},
                            {"content_block",
                             {{"type", "tool_use"}, {"id", d.id}, {"name", d.name}, {"input", ojson::object()}}}});
        break;
      case ChatDelta::Kind::kToolArguments:
        // Fragments of a call other than the open one (interleaved calls) cannot be expressed in
        // Anthropic's block order; they stay in result() and the open block gets only its own.
        if (block_ >= 0 && !text_open_ && d.tool_index == tool_open_)
          out += named_event("content_block_delta",
                             {{"type", "content_block_delta"},
                              {"index", block_},
                              {"delta", {{"type", "input_json_delta"}, {"partial_json", d.text}}}});
        break;
      case ChatDelta::Kind::kFinish: break;  // closed in finish(), after the usage chunk
    }
  }
  return out;
}

std::string MessagesStream::finish() {
  if (finished_) return {};
  std::string out = start();
  out += close_block();
  finished_ = true;
  const int64_t input = acc_.prompt_tokens ? acc_.prompt_tokens : input_tokens_;
  out += named_event("message_delta",
                     {{"type", "message_delta"},
                      {"delta", {{"stop_reason", anthropic_stop_reason(acc_)}, {"stop_sequence", stop_sequence(acc_)}}},
                      {"usage", usage(input, acc_.cached_tokens, acc_.completion_tokens)}});
  out += named_event("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string MessagesStream::fail(const ShapeError& e) {
  if (finished_) return {};
  finished_ = true;
  return named_event("error", error_body(Api::kMessages, e));
}

}  // namespace cadenza::apishape
