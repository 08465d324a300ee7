#include "apishape/chat_result.h"

#include <random>

#include <fmt/format.h>

namespace cadenza::apishape {

using ojson = nlohmann::ordered_json;

std::string random_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

ojson arguments_object(const std::string& arguments) {
  auto j = ojson::parse(arguments, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return ojson::object();
  return j;
}

namespace {

std::string str_or_empty(const ojson& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o.at(key).is_string()) return {};
  return o.at(key).get<std::string>();
}

void read_usage(const ojson& body, ChatResult& out) {
  if (!body.contains("usage") || !body.at("usage").is_object()) return;
  const ojson& u = body.at("usage");
  if (u.contains("prompt_tokens") && u.at("prompt_tokens").is_number_integer())
    out.prompt_tokens = u.at("prompt_tokens").get<int64_t>();
  if (u.contains("completion_tokens") && u.at("completion_tokens").is_number_integer())
    out.completion_tokens = u.at("completion_tokens").get<int64_t>();
  if (u.contains("prompt_tokens_details") && u.at("prompt_tokens_details").is_object()) {
    const ojson& d = u.at("prompt_tokens_details");
    if (d.contains("cached_tokens") && d.at("cached_tokens").is_number_integer())
      out.cached_tokens = d.at("cached_tokens").get<int64_t>();
  }
}

void read_finish(const ojson& choice, ChatResult& out) {
  if (choice.contains("finish_reason") && choice.at("finish_reason").is_string())
    out.finish_reason = choice.at("finish_reason").get<std::string>();
  if (choice.contains("stop_reason") && choice.at("stop_reason").is_string())
    out.stop_string = choice.at("stop_reason").get<std::string>();
}

const ojson* choice0(const ojson& body) {
  if (!body.is_object() || !body.contains("choices") || !body.at("choices").is_array())
    return nullptr;
  for (const ojson& c : body.at("choices"))
    if (c.is_object() && (!c.contains("index") || c.at("index") == 0)) return &c;
  return nullptr;
}

}  // namespace

std::optional<ShapeError> decode_chat_body(const ojson& body, ChatResult& out) {
  const ojson* c = choice0(body);
  if (!c || !c->contains("message") || !c->at("message").is_object()) {
    ShapeError e;
    e.status = 502;
    e.type = "server_error";
    e.message = "the chat completion has no choices[0].message";
    return e;
  }
  out.model = str_or_empty(body, "model");
  const ojson& m = c->at("message");
  out.text = str_or_empty(m, "content");
  if (m.contains("tool_calls") && m.at("tool_calls").is_array())
    for (const ojson& call : m.at("tool_calls")) {
      if (!call.is_object()) continue;
      const ojson fn = call.contains("function") ? call.at("function") : ojson::object();
      out.calls.push_back({str_or_empty(call, "id"), str_or_empty(fn, "name"),
                           str_or_empty(fn, "arguments")});
    }
  read_finish(*c, out);
  read_usage(body, out);
  return std::nullopt;
}

std::vector<ChatDelta> decode_chat_chunk(const ojson& chunk, ChatResult& acc) {
  std::vector<ChatDelta> events;
  if (!chunk.is_object()) return events;
  if (acc.model.empty()) acc.model = str_or_empty(chunk, "model");
  read_usage(chunk, acc);
  const ojson* c = choice0(chunk);
  if (!c) return events;
  if (c->contains("delta") && c->at("delta").is_object()) {
    const ojson& d = c->at("delta");
    if (const std::string t = str_or_empty(d, "content"); !t.empty()) {
      acc.text += t;
      events.push_back({ChatDelta::Kind::kText, 0, t, {}, {}});
    }
    if (d.contains("tool_calls") && d.at("tool_calls").is_array())
      for (const ojson& tc : d.at("tool_calls")) {
        if (!tc.is_object()) continue;
        size_t index = acc.calls.empty() ? 0 : acc.calls.size() - 1;
        if (tc.contains("index") && tc.at("index").is_number_unsigned())
          index = tc.at("index").get<size_t>();
        const ojson fn = tc.contains("function") && tc.at("function").is_object()
                             ? tc.at("function")
                             : ojson::object();
        const std::string id = str_or_empty(tc, "id");
        const std::string name = str_or_empty(fn, "name");
        if ((!id.empty() || !name.empty()) && index >= acc.calls.size()) {
          // A new call. Indices are dense in practice; a gap would give empty calls, so the new
          // call takes the next slot whatever its index says.
          acc.calls.push_back({id.empty() ? random_id("call_") : id, name, ""});
          index = acc.calls.size() - 1;
          events.push_back({ChatDelta::Kind::kToolStart, index, {}, acc.calls.back().id, name});
        }
        const std::string args = str_or_empty(fn, "arguments");
        if (!args.empty() && index < acc.calls.size()) {
          acc.calls[index].arguments += args;
          events.push_back({ChatDelta::Kind::kToolArguments, index, args, {}, {}});
        }
      }
  }
  if (c->contains("finish_reason") && c->at("finish_reason").is_string()) {
    read_finish(*c, acc);
    events.push_back({ChatDelta::Kind::kFinish, 0, acc.finish_reason, {}, {}});
  }
  return events;
}

}  // namespace cadenza::apishape
