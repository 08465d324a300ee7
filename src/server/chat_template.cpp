#include "server/chat_template.h"

#include <optional>

#include <spdlog/spdlog.h>

#ifdef CADENZA_SERVER_HAS_TEMPLATE
#include "template/template.h"
#endif

namespace cadenza::server {

struct ChatRenderer::Impl {
#ifdef CADENZA_SERVER_HAS_TEMPLATE
  std::optional<tmpl::Template> tmpl;
#endif
};

ChatRenderer::ChatRenderer(const Tokenizer& tokenizer, std::unique_ptr<Impl> impl)
    : tokenizer_(tokenizer), impl_(std::move(impl)) {}
ChatRenderer::~ChatRenderer() = default;

Result<std::unique_ptr<ChatRenderer>> ChatRenderer::create(const gguf::GgufFile& file,
                                                          const Tokenizer& tokenizer,
                                                          const std::string& override_source) {
  std::string source = override_source;
  std::string name = override_source.empty() ? "" : "file";
  if (source.empty()) {
    auto t = file.get_string_or("tokenizer.chat_template", "");
    if (!t) return t.error_value();
    if (!t->empty()) {
      source = *t;
      name = "gguf";
    }
  }
  auto impl = std::make_unique<Impl>();
#ifdef CADENZA_SERVER_HAS_TEMPLATE
  if (source.empty()) {
    source = std::string(tmpl::chatml_template());
    name = "chatml (built in)";
  }
  auto parsed = tmpl::Template::parse(source);
  if (!parsed) return make_error("chat template ({}): {}", name, parsed.error());
  impl->tmpl = std::move(*parsed);
#else
  if (!source.empty()) {
    if (name == "file")
      return Error("--chat-template: this build has no template interpreter (ChatML only)");
    spdlog::warn("the model's chat template is ignored: this build renders ChatML only");
  }
  name = "chatml (built in)";
#endif
  std::unique_ptr<ChatRenderer> r(new ChatRenderer(tokenizer, std::move(impl)));
  r->source_name_ = name;
  r->source_ = source;
  if (tokenizer.bos_id() >= 0) r->bos_text_ = tokenizer.token_piece(tokenizer.bos_id(), true);
  if (tokenizer.eos_id() >= 0) r->eos_text_ = tokenizer.token_piece(tokenizer.eos_id(), true);
  return r;
}

namespace {

// Assistant messages' tool_calls[].function.arguments: a JSON string becomes its object.
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      auto& f = call["function"];
      if (!f.contains("arguments") || !f["arguments"].is_string()) continue;
      auto parsed = nlohmann::ordered_json::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) f["arguments"] = std::move(parsed);
    }
  }
  return out;
}

}  // namespace

Result<std::string> ChatRenderer::render(const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& tools,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& kwargs) const {
#ifdef CADENZA_SERVER_HAS_TEMPLATE
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  if (kwargs.is_object())
    for (const auto& [key, value] : kwargs.items()) ctx[key] = value;
  ctx["messages"] = template_messages(messages);
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_text_;
  ctx["eos_token"] = eos_text_;
  if (!tools.is_null()) ctx["tools"] = tools;
  return impl_->tmpl->render(ctx);
#else
  (void)kwargs;
  std::string out;
  for (const auto& m : messages) {
    out += "<|im_start|>";
    out += m.at("role").get<std::string>();
    out += "\n";
    out += m.at("content").get<std::string>();
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
#endif
}

std::vector<int32_t> ChatRenderer::encode(const std::string& rendered) const {
  const bool has_bos = !bos_text_.empty() && rendered.rfind(bos_text_, 0) == 0;
  return tokenizer_.encode(rendered, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace cadenza::server
