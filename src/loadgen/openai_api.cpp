#include "loadgen/openai_api.h"

#include <nlohmann/json.hpp>

namespace cadenza::loadgen {

std::string build_request_body(const WorkItem& item, const RequestOptions& o) {
  nlohmann::json j;
  j["model"] = o.model;
  if (o.api == ApiKind::chat)
    j["messages"] = item.messages;
  else
    j["prompt"] = item.prompt;
  j["max_tokens"] = item.max_tokens;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) j["ignore_eos"] = true;
  j["temperature"] = o.temperature;
  if (o.top_p >= 0) j["top_p"] = o.top_p;
  if (o.top_k >= 0) j["top_k"] = o.top_k;
  return j.dump();
}

Result<ChunkInfo> parse_chunk(std::string_view data, ApiKind api) {
  ChunkInfo c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error("stream chunk is not a JSON object");
  if (j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return make_error("server error in stream: {}", e["message"].get<std::string>());
    return make_error("server error in stream: {}", e.dump());
  }
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    const auto& ch = (*it)[0];
    if (!ch.is_object()) return Error("stream chunk choice is not an object");
    if (auto f = ch.find("finish_reason"); f != ch.end() && f->is_string())
      c.finish_reason = f->get<std::string>();
    if (api == ApiKind::chat) {
      if (auto d = ch.find("delta"); d != ch.end() && d->is_object()) {
        bool has_text = false;
        for (const char* key : {"reasoning_content", "content"})
          if (auto f = d->find(key); f != d->end() && f->is_string()) {
            has_text = true;
            c.content += f->get_ref<const std::string&>();
          }
        // The role chunk has "content": "" too; it announces the reply, it is not a token.
        c.token = !c.content.empty() || d->contains("tool_calls") ||
                  (has_text && !d->contains("role") && c.finish_reason.empty());
      }
    } else if (auto t = ch.find("text"); t != ch.end() && t->is_string()) {
      c.content = t->get<std::string>();
      // Empty text with a finish_reason: see empty_finish.
      c.token = !c.content.empty() || c.finish_reason.empty();
    }
    c.empty_finish = !c.token && !c.finish_reason.empty();
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer())
      c.prompt_tokens = p->get<int32_t>();
    if (auto p = u->find("completion_tokens"); p != u->end() && p->is_number_integer())
      c.completion_tokens = p->get<int32_t>();
  }
  return c;
}

}  // namespace cadenza::loadgen
