#include "apishape/responses.h"

#include <chrono>

#include <fmt/format.h>

#include "apishape/anthropic.h"  // named_event
#include "apishape/fields.h"

namespace cadenza::apishape {

using ojson = nlohmann::ordered_json;
using detail::one_of;
using detail::present;

namespace {

// One input item, checked and normalised (a "type" always present).
std::optional<ShapeError> normalize_item(const ojson& item, size_t i, ojson& out) {
  const std::string at = fmt::format("input[{}]", i);
  if (!item.is_object()) return invalid(at + " must be an object", "input");
  std::string type = "message";
  if (present(item, "type")) {
    if (!item.at("type").is_string()) return invalid(at + ".type must be a string", "input");
    type = item.at("type").get<std::string>();
  }
  out = item;
  out["type"] = type;
  if (type == "message") {
    if (auto e = detail::unknown_field(item, {"type", "role", "content", "id", "status"}, at)) return e;
    if (!item.contains("role") || !item.at("role").is_string() ||
        !one_of(item.at("role").get<std::string>(), {"user", "system", "developer", "assistant"}))
      return invalid(at + ".role must be user, system, developer or assistant", "input");
    if (!item.contains("content")) return invalid(at + ".content is required", "input");
    const ojson& c = item.at("content");
    if (c.is_string()) return std::nullopt;
    if (!c.is_array()) return invalid(at + ".content must be a string or an array of parts", "input");
    for (size_t j = 0; j < c.size(); ++j) {
      const ojson& p = c[j];
      const std::string pat = fmt::format("{}.content[{}]", at, j);
      if (!p.is_object() || !p.contains("type") || !p.at("type").is_string())
        return invalid(pat + " must be a part with a 'type'", "input");
      const std::string pt = p.at("type").get<std::string>();
      if (pt == "input_image") {
        // {"type": "input_image", "image_url": "data:..." | "https://...", "detail": ...}
        if (auto e = detail::unknown_field(p, {"type", "image_url", "detail"}, pat)) return e;
        if (!p.contains("image_url") || !p.at("image_url").is_string())
          return invalid(pat + ".image_url must be a string (file_id is not supported)", "input");
        continue;
      }
      if (!one_of(pt, {"input_text", "output_text"}))
        return unsupported(pat + ".type", "part type '" + pt + "' (only input_text, output_text and input_image)");
      if (!p.contains("text") || !p.at("text").is_string())
        return invalid(pat + ".text must be a string", "input");
      if (auto e = detail::unknown_field(p, {"type", "text", "annotations", "logprobs"}, pat)) return e;
    }
    return std::nullopt;
  }
  if (type == "function_call") {
    if (auto e = detail::unknown_field(item, {"type", "call_id", "name", "arguments", "id", "status"}, at))
      return e;
    for (const char* k : {"call_id", "name", "arguments"})
      if (!item.contains(k) || !item.at(k).is_string())
        return invalid(at + "." + k + " must be a string", "input");
    return std::nullopt;
  }
  if (type == "function_call_output") {
    if (auto e = detail::unknown_field(item, {"type", "call_id", "output", "id", "status"}, at)) return e;
    if (!item.contains("call_id") || !item.at("call_id").is_string())
      return invalid(at + ".call_id must be a string", "input");
    if (!item.contains("output") || !item.at("output").is_string())
      return invalid(at + ".output must be a string", "input");
    return std::nullopt;
  }
  return unsupported(at + ".type", "item type '" + type + "'");
}

// Normalised items -> chat messages appended to `out`.
void items_to_messages(const ojson& items, ojson& out) {
  for (const ojson& item : items) {
    const std::string type = item.at("type").get<std::string>();
    if (type == "message") {
      std::string role = item.at("role").get<std::string>();
      if (role == "developer") role = "system";
      const ojson& c = item.at("content");
      ojson content;
      if (c.is_string()) {
        content = c;
      } else {
        content = ojson::array();
        for (const ojson& p : c) {
          if (p.at("type") == "input_image")
            content.push_back({{"type", "image_url"}, {"image_url", {{"url", p.at("image_url")}}}});
          else
            content.push_back({{"type", "text"}, {"text", p.at("text")}});
        }
      }
      out.push_back({{"role", role}, {"content", std::move(content)}});
    } else if (type == "function_call") {
      ojson call = {{"id", item.at("call_id")},
                    {"type", "function"},
                    {"function", {{"name", item.at("name")}, {"arguments", item.at("arguments")}}}};
      // Consecutive calls (and calls right after the assistant's text) are one assistant turn.
      if (!out.empty() && out.back().at("role") == "assistant") {
        ojson& prev = out.back();
        if (!prev.contains("tool_calls")) prev["tool_calls"] = ojson::array();
        prev["tool_calls"].push_back(std::move(call));
      } else {
        out.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      out.push_back({{"role", "tool"}, {"tool_call_id", item.at("call_id")}, {"content", item.at("output")}});
    }
  }
}

std::optional<ShapeError> convert_tools(const ojson& body, ojson& chat) {
  if (present(body, "tools")) {
    const ojson& tools = body.at("tools");
    if (!tools.is_array()) return invalid("'tools' must be an array", "tools");
    ojson out = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      const ojson& t = tools[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object() || !t.contains("type") || !t.at("type").is_string())
        return invalid(at + " must be an object with a 'type'", "tools");
      if (t.at("type") != "function")
        return unsupported(at + ".type", "tool type '" + t.at("type").get<std::string>() + "' (only function tools)");
      if (auto e = detail::unknown_field(t, {"type", "name", "description", "parameters", "strict"}, at))
        return e;
      if (!t.contains("name") || !t.at("name").is_string())
        return invalid(at + ".name must be a string", "tools");
      ojson fn = {{"name", t.at("name")}};
      if (present(t, "description")) fn["description"] = t.at("description");
      if (present(t, "parameters")) fn["parameters"] = t.at("parameters");
      if (present(t, "strict")) fn["strict"] = t.at("strict");
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(out);
  }
  if (present(body, "tool_choice")) {
    const ojson& tc = body.at("tool_choice");
    if (tc.is_string()) {
      if (!one_of(tc.get<std::string>(), {"auto", "none", "required"}))
        return invalid("tool_choice must be auto, none, required or a function", "tool_choice");
      chat["tool_choice"] = tc;
    } else if (tc.is_object() && tc.contains("type") && tc.at("type") == "function" &&
               tc.contains("name") && tc.at("name").is_string()) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc.at("name")}}}};
    } else {
      return unsupported("tool_choice", "only auto, none, required or {\"type\":\"function\",\"name\"}");
    }
  }
  if (present(body, "parallel_tool_calls")) {
    if (!body.at("parallel_tool_calls").is_boolean())
      return invalid("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    chat["parallel_tool_calls"] = body.at("parallel_tool_calls");
  }
  return std::nullopt;
}

std::optional<ShapeError> convert_text(const ojson& body, ojson& chat) {
  if (!present(body, "text")) return std::nullopt;
  const ojson& t = body.at("text");
  if (!t.is_object()) return invalid("'text' must be an object", "text");
  if (auto e = detail::unknown_field(t, {"format", "verbosity"}, "text")) return e;
  if (!present(t, "format")) return std::nullopt;
  const ojson& f = t.at("format");
  if (!f.is_object() || !f.contains("type") || !f.at("type").is_string())
    return invalid("text.format must be an object with a 'type'", "text");
  const std::string type = f.at("type").get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  if (type != "json_schema") return unsupported("text.format.type", "format type '" + type + "'");
  if (auto e = detail::unknown_field(f, {"type", "name", "schema", "strict", "description"}, "text.format"))
    return e;
  if (!f.contains("schema") || !f.at("schema").is_object())
    return invalid("text.format.schema must be an object", "text");
  ojson js = {{"name", f.contains("name") && f.at("name").is_string() ? f.at("name") : ojson("response")},
              {"schema", f.at("schema")}};
  if (present(f, "strict")) js["strict"] = f.at("strict");
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
  return std::nullopt;
}

// Fields sent with neutral values by clients; anything else in them is refused.
std::optional<ShapeError> check_tolerated(const ojson& body) {
  if (present(body, "truncation") && body.at("truncation") != "disabled")
    return unsupported("truncation", "only \"disabled\"");
  if (present(body, "background") && body.at("background") != false)
    return unsupported("background", "responses run in the foreground");
  if (present(body, "include") && !(body.at("include").is_array() && body.at("include").empty()))
    return unsupported("include");
  if (present(body, "reasoning")) return unsupported("reasoning");
  if (present(body, "metadata") && !body.at("metadata").is_object())
    return invalid("'metadata' must be an object", "metadata");
  for (const char* k : {"user", "service_tier", "prompt_cache_key", "safety_identifier"})
    if (present(body, k) && !body.at(k).is_string())
      return invalid(std::string("'") + k + "' must be a string", k);
  return std::nullopt;
}

}  // namespace

std::optional<ShapeError> previous_response_id(const ojson& body, std::string& out) {
  out.clear();
  if (!present(body, "previous_response_id")) return std::nullopt;
  if (!body.at("previous_response_id").is_string() || body.at("previous_response_id").get<std::string>().empty())
    return invalid("'previous_response_id' must be a non-empty string", "previous_response_id");
  out = body.at("previous_response_id").get<std::string>();
  return std::nullopt;
}

ResponsesRequest responses_to_chat(const ojson& body, const ojson* previous_items) {
  ResponsesRequest r;
  auto fail = [&](ShapeError e) {
    r.error = std::move(e);
    return std::move(r);
  };
  if (!body.is_object()) return fail(invalid("the request body must be a JSON object"));
  if (auto e = detail::unknown_field(
          body, {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p",
                 "stream", "tools", "tool_choice", "parallel_tool_calls", "text", "store",
                 "previous_response_id", "metadata", "user", "service_tier", "prompt_cache_key",
                 "safety_identifier", "truncation", "background", "include", "reasoning"}))
    return fail(*e);
  if (auto e = check_tolerated(body)) return fail(*e);
  if (auto e = previous_response_id(body, r.previous_response_id)) return fail(*e);
  ojson& chat = r.chat = ojson::object();
  ojson& echo = r.echo = ojson::object();
  if (present(body, "model")) {
    if (!body.at("model").is_string()) return fail(invalid("'model' must be a string", "model"));
    chat["model"] = body.at("model");
  }

  r.items = previous_items && previous_items->is_array() ? *previous_items : ojson::array();
  if (!body.contains("input") || !(body.at("input").is_string() || body.at("input").is_array()))
    return fail(invalid("'input' must be a string or an array of items", "input"));
  const ojson& input = body.at("input");
  if (input.is_string()) {
    r.items.push_back({{"type", "message"}, {"role", "user"}, {"content", input}});
  } else {
    if (input.empty() && r.items.empty()) return fail(invalid("'input' must not be empty", "input"));
    for (size_t i = 0; i < input.size(); ++i) {
      ojson item;
      if (auto e = normalize_item(input[i], i, item)) return fail(*e);
      r.items.push_back(std::move(item));
    }
  }
  ojson messages = ojson::array();
  echo["instructions"] = nullptr;
  if (present(body, "instructions")) {
    if (!body.at("instructions").is_string())
      return fail(invalid("'instructions' must be a string", "instructions"));
    messages.push_back({{"role", "system"}, {"content", body.at("instructions")}});
    echo["instructions"] = body.at("instructions");
  }
  items_to_messages(r.items, messages);
  chat["messages"] = std::move(messages);

  if (auto e = detail::copy_positive_int(body, "max_output_tokens", chat, "max_tokens")) return fail(*e);
  echo["max_output_tokens"] = present(body, "max_output_tokens") ? body.at("max_output_tokens") : ojson(nullptr);
  for (const char* k : {"temperature", "top_p"}) {
    if (auto e = detail::copy_number(body, k, chat)) return fail(*e);
    echo[k] = present(body, k) ? body.at(k) : ojson(1.0);
  }
  if (auto e = detail::read_bool(body, "stream", r.stream)) return fail(*e);
  if (r.stream) {
    chat["stream"] = true;
    chat["stream_options"] = {{"include_usage", true}};
  }
  if (auto e = detail::read_bool(body, "store", r.store)) return fail(*e);
  if (auto e = convert_tools(body, chat)) return fail(*e);
  if (auto e = convert_text(body, chat)) return fail(*e);

  echo["tools"] = present(body, "tools") ? body.at("tools") : ojson::array();
  echo["tool_choice"] = present(body, "tool_choice") ? body.at("tool_choice") : ojson("auto");
  echo["parallel_tool_calls"] = present(body, "parallel_tool_calls") ? body.at("parallel_tool_calls") : ojson(true);
  echo["text"] = present(body, "text") && present(body.at("text"), "format")
                     ? ojson{{"format", body.at("text").at("format")}}
                     : ojson{{"format", {{"type", "text"}}}};
  echo["previous_response_id"] = r.previous_response_id.empty() ? ojson(nullptr) : ojson(r.previous_response_id);
  echo["store"] = r.store;
  echo["metadata"] = present(body, "metadata") ? body.at("metadata") : ojson::object();
  return r;
}

ResponseInfo new_response_info(ojson echo) {
  ResponseInfo info;
  info.id = random_id("resp_");
  info.created_at = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  info.echo = std::move(echo);
  return info;
}

namespace {

ojson message_item(const std::string& id, const std::string& status, const std::string& text,
                   bool with_part) {
  ojson content = ojson::array();
  if (with_part) content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}});
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

ojson call_item(const std::string& id, const std::string& status, const ChatToolCall& c) {
  return {{"id", id},       {"type", "function_call"}, {"status", status},
          {"call_id", c.id}, {"name", c.name},          {"arguments", c.arguments}};
}

std::string final_status(const ChatResult& r) {
  return r.finish_reason == "length" ? "incomplete" : "completed";
}

}  // namespace

ojson output_items(const ChatResult& r) {
  ojson out = ojson::array();
  if (!r.text.empty() || r.calls.empty()) out.push_back(message_item(random_id("msg_"), "completed", r.text, true));
  for (const ChatToolCall& c : r.calls) out.push_back(call_item(random_id("fc_"), "completed", c));
  return out;
}

ojson response_object(const ResponseInfo& info, const std::string& status, const ojson& output,
                      const ChatResult* r) {
  ojson o = {{"id", info.id},
             {"object", "response"},
             {"created_at", info.created_at},
             {"status", status},
             {"error", nullptr},
             {"incomplete_details", nullptr}};
  if (status == "incomplete") o["incomplete_details"] = {{"reason", "max_output_tokens"}};
  o["model"] = r ? ojson(r->model) : ojson("");
  if (info.echo.contains("model") && !r) o["model"] = info.echo.at("model");
  o["output"] = output;
  for (const auto& [k, v] : info.echo.items())
    if (k != "model") o[k] = v;
  if (r)
    o["usage"] = {{"input_tokens", r->prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", r->cached_tokens}}},
                  {"output_tokens", r->completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", r->prompt_tokens + r->completion_tokens}};
  else
    o["usage"] = nullptr;
  return o;
}

ojson chat_to_response(const ChatResult& r, const ResponseInfo& info) {
  return response_object(info, final_status(r), output_items(r), &r);
}

ResponsesStream::ResponsesStream(ResponseInfo info) : info_(std::move(info)) {}

std::string ResponsesStream::event(const std::string& type, ojson data) {
  ojson e = {{"type", type}, {"sequence_number", seq_++}};
  for (auto& [k, v] : data.items()) e[k] = std::move(v);
  return named_event(type, e);
}

std::string ResponsesStream::start() {
  if (started_) return {};
  started_ = true;
  info_.echo["model"] = acc_.model;
  const ojson r = response_object(info_, "in_progress", ojson::array(), nullptr);
  std::string out = event("response.created", {{"response", r}});  // in order: sequence numbers
  out += event("response.in_progress", {{"response", r}});
  return out;
}

std::string ResponsesStream::close_item() {
  if (open_ < 0) return {};
  std::string out;
  ojson item;
  if (open_is_text_) {
    const ojson part = {{"type", "output_text"}, {"text", open_text_}, {"annotations", ojson::array()}};
    out += event("response.output_text.done", {{"item_id", open_id_}, {"output_index", open_}, {"content_index", 0},
                                               {"text", open_text_}, {"logprobs", ojson::array()}});
    out += event("response.content_part.done",
                 {{"item_id", open_id_}, {"output_index", open_}, {"content_index", 0}, {"part", part}});
    item = message_item(open_id_, "completed", open_text_, true);
  } else {
    const ChatToolCall& c = acc_.calls[open_call_];
    out += event("response.function_call_arguments.done",
                 {{"item_id", open_id_}, {"output_index", open_}, {"name", c.name}, {"arguments", c.arguments}});
    item = call_item(open_id_, "completed", c);
  }
  out += event("response.output_item.done", {{"output_index", open_}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = -1;
  return out;
}

std::string ResponsesStream::on_chunk(const ojson& chunk) {
  if (finished_) return {};
  std::vector<ChatDelta> events = decode_chat_chunk(chunk, acc_);
  std::string out = start();
  for (const ChatDelta& d : events) {
    switch (d.kind) {
      case ChatDelta::Kind::kText:
        if (open_ < 0 || !open_is_text_) {
          out += close_item();
          open_ = static_cast<int>(output_.size());
          open_is_text_ = true;
          open_id_ = random_id("msg_");
          open_text_.clear();
          out += event("response.output_item.added",
                       {{"output_index", open_}, {"item", message_item(open_id_, "in_progress", "", false)}});
          out += event("response.content_part.added",
                       {{"item_id", open_id_}, {"output_index", open_}, {"content_index", 0},
                        {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", ojson::array()}}}});
        }
        open_text_ += d.text;
        out += event("response.output_text.delta", {{"item_id", open_id_}, {"output_index", open_}, {"content_index", 0},
                                                    {"delta", d.text}, {"logprobs", ojson::array()}});
        break;
      case ChatDelta::Kind::kToolStart: {
        out += close_item();
        open_ = static_cast<int>(output_.size());
        open_is_text_ = false;
        open_call_ = d.tool_index;
        open_id_ = random_id("fc_");
        ChatToolCall empty = acc_.calls[d.tool_index];
        empty.arguments.clear();
        out += event("response.output_item.added",
                     {{"output_index", open_}, {"item", call_item(open_id_, "in_progress", empty)}});
        break;
      }
      case ChatDelta::Kind::kToolArguments:
        if (open_ >= 0 && !open_is_text_ && d.tool_index == open_call_)
          out += event("response.function_call_arguments.delta",
                       {{"item_id", open_id_}, {"output_index", open_}, {"delta", d.text}});
        break;
      case ChatDelta::Kind::kFinish: break;
    }
  }
  return out;
}

std::string ResponsesStream::finish() {
  if (finished_) return {};
  std::string out = start();
  out += close_item();
  finished_ = true;
  // A response with neither text nor calls still has its (empty) message item, as non-streamed.
  if (output_.empty()) output_.push_back(message_item(random_id("msg_"), "completed", "", true));
  const std::string status = final_status(acc_);
  final_ = response_object(info_, status, output_, &acc_);
  out += event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", final_}});
  return out;
}

std::string ResponsesStream::fail(const ShapeError& e) {
  if (finished_) return {};
  std::string out = start();
  finished_ = true;
  ojson r = response_object(info_, "failed", output_, &acc_);
  r["error"] = {{"code", e.code.empty() ? (e.status >= 500 ? "server_error" : "invalid_request") : e.code},
                {"message", e.message}};
  out += event("response.failed", {{"response", std::move(r)}});
  return out;
}

}  // namespace cadenza::apishape
