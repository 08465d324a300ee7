// ChatRenderer: turns chat messages into the prompt text and token ids for one model.
//
// Template choice: --chat-template FILE, else the model's tokenizer.chat_template, else ChatML.
// Rendering context: {messages, add_generation_prompt, bos_token, eos_token, tools (if given)}.
// Tokenization: parse_special = true; BOS is added only when the rendered text does not already
// start with the BOS token's text (templates such as Llama 3's emit it themselves).
//
// Built with the Jinja interpreter (src/template) when CADENZA_SERVER_HAS_TEMPLATE is defined;
// otherwise only ChatML is available and a model template is reported and ignored.
// Ownership: borrows the Tokenizer (must outlive it). Thread-safety: render/encode are const and
// may run on any number of threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::server {

class ChatRenderer {
 public:
  // `override_source`: the text of --chat-template FILE, or empty. Errors: a template that does
  // not parse.
  static Result<std::unique_ptr<ChatRenderer>> create(const gguf::GgufFile& file,
                                                      const Tokenizer& tokenizer,
                                                      const std::string& override_source);
  ~ChatRenderer();

  // The prompt text. Errors (the template's, e.g. raise_exception) are the client's fault: 400.
  // `kwargs` (an object or null): extra template variables (chat_template_kwargs, such as
  // enable_thinking); they cannot replace the ones above. Assistant tool calls whose
  // function.arguments is a JSON string (OpenAI's shape) reach the template as the parsed object,
  // as templates that write `arguments | tojson` expect (a string that is not JSON stays).
  Result<std::string> render(const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                             const nlohmann::ordered_json& kwargs = nullptr) const;
  // Token ids of rendered text (see the header comment for BOS).
  std::vector<int32_t> encode(const std::string& rendered) const;

  // "gguf", "file" or "chatml (built in)": where the template came from, for the log.
  const std::string& source_name() const { return source_name_; }
  // The template text (tool-call and reasoning formats are detected from it).
  const std::string& source() const { return source_; }

 private:
  struct Impl;
  ChatRenderer(const Tokenizer& tokenizer, std::unique_ptr<Impl> impl);
  const Tokenizer& tokenizer_;
  std::unique_ptr<Impl> impl_;
  std::string source_name_;
  std::string source_;
  std::string bos_text_, eos_text_;
};

}  // namespace cadenza::server
