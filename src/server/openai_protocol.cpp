#include "server/openai_protocol.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace cadenza::server {

using nlohmann::json;

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", std::move(err)}};
}

ApiError bad_request(const ParamError& e) { return bad_request(e.message, e.param); }

SamplingParams openai_sampling_defaults() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  return p;
}

ApiError api_error(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

bool json_nesting_exceeds(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // skip the escaped character
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::optional<ApiError> parse_json_object(const std::string& text, json& out) {
  // Serializing, copying and rendering JSON recurse once per level: a deep body (8 MiB of '[')
  // would overflow an I/O thread's stack. Real requests nest a few levels (tool schemas ~10).
  if (json_nesting_exceeds(text, kMaxJsonDepth)) {
    out = json();
    return bad_request(fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth));
  }
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return bad_request("the request body is not valid JSON");
  if (!out.is_object()) return bad_request("the request body must be a JSON object");
  return std::nullopt;
}

namespace {

ApiError not_supported(const std::string& what, const std::string& param) {
  return bad_request(fmt::format("{} is not supported yet", what), param);
}

// The shared readers (request/sampling_json.h), with their errors as 400s.
bool present(const json& body, const char* key) { return json_present(body, key); }

std::optional<ApiError> as_api(std::optional<ParamError> e) {
  if (!e) return std::nullopt;
  return bad_request(*e);
}

std::optional<ApiError> get_int(const json& body, const char* key, int64_t lo, int64_t hi,
                                std::optional<int64_t>& out) {
  return as_api(read_integer(body, key, lo, hi, out));
}

std::optional<ApiError> get_bool(const json& body, const char* key, bool& out) {
  return as_api(read_bool(body, key, out));
}

std::optional<ApiError> get_token_array(const json& v, const char* key, std::vector<int32_t>& out,
                                        bool allow_empty) {
  return as_api(read_token_ids(v, key, out, allow_empty));
}

// logprobs into `r`: completions' `logprobs` (0..20), chat's `logprobs` + `top_logprobs`.
std::optional<ApiError> parse_logprobs(const json& body, Endpoint endpoint, CompletionRequest& r) {
  std::optional<int64_t> i;
  if (endpoint == Endpoint::kChat) {
    bool want = false;
    if (auto e = get_bool(body, "logprobs", want)) return e;
    i.reset();
    if (auto e = get_int(body, "top_logprobs", 0, 20, i)) return e;
    if (i && !want)
      return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (want) r.logprobs = i ? static_cast<int32_t>(*i) : 0;
  } else {
    if (auto e = get_int(body, "logprobs", 0, 20, i)) return e;
    if (i) r.logprobs = static_cast<int32_t>(*i);
  }
  return std::nullopt;
}

// Parameters the engine cannot honour yet: fine at their neutral value, a 400 otherwise.
std::optional<ApiError> check_unsupported(const json& body, Endpoint endpoint) {
  if (present(body, "echo")) {
    bool echo = false;
    if (auto e = get_bool(body, "echo", echo)) return e;
    if (echo) return not_supported("'echo'", "echo");
  }
  if (present(body, "suffix")) return not_supported("'suffix'", "suffix");
  if (present(body, "best_of")) {
    std::optional<int64_t> n;
    if (auto e = get_int(body, "best_of", 1, 16, n)) return e;
    if (*n > 1) return not_supported("'best_of' > 1", "best_of");
  }
  if (present(body, "user") && !body.at("user").is_string())
    return bad_request("'user' must be a string", "user");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> normalize_messages(const json& in, nlohmann::ordered_json& out,
                                           std::vector<std::string>* image_urls) {
  if (!in.is_array() || in.empty())
    return bad_request("'messages' must be a non-empty array", "messages");
  out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < in.size(); ++i) {
    const json& m = in[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return bad_request(where + " must be an object", "messages");
    if (!m.contains("role") || !m.at("role").is_string())
      return bad_request(where + ".role must be a string", "messages");
    nlohmann::ordered_json msg = nlohmann::ordered_json::object();
    msg["role"] = m.at("role").get<std::string>();
    std::string content;
    const size_t urls_before = image_urls != nullptr ? image_urls->size() : 0;
    if (m.contains("content")) {
      const json& c = m.at("content");
      if (c.is_string()) {
        content = c.get<std::string>();
      } else if (c.is_array()) {
        for (const json& part : c) {
          if (!part.is_object() || !part.contains("type") || !part.at("type").is_string())
            return bad_request(where + ".content parts must be objects with a 'type'", "messages");
          const std::string type = part.at("type").get<std::string>();
          if (type == "image_url" && image_urls != nullptr) {
            // {"type": "image_url", "image_url": {"url": "...", "detail": ...}} (or the URL as
            // a string): the image's place in the text is a marker, its URL goes to the list.
            const json* u = part.contains("image_url") ? &part.at("image_url") : nullptr;
            if (u != nullptr && u->is_object() && u->contains("url")) u = &u->at("url");
            if (u == nullptr || !u->is_string() || u->get_ref<const std::string&>().empty())
              return bad_request(where + ".content image_url parts need a string 'image_url.url'",
                                 "messages");
            image_urls->push_back(u->get<std::string>());
            content += kImageMarker;
            continue;
          }
          if (type != "text")
            return not_supported(where + ".content of type '" + type + "'", "messages");
          if (!part.contains("text") || !part.at("text").is_string())
            return bad_request(where + ".content text parts need a string 'text'", "messages");
          content += part.at("text").get<std::string>();
        }
      } else if (!c.is_null()) {
        return bad_request(where + ".content must be a string, an array or null", "messages");
      }
    }
    if (image_urls != nullptr) {
      // The marker is where images go: text that holds it would be taken for one.
      size_t markers = 0;
      for (size_t at = content.find(kImageMarker); at != std::string::npos;
           at = content.find(kImageMarker, at + 1))
        ++markers;
      if (markers != image_urls->size() - urls_before)
        return bad_request(where + ".content holds the text '" + std::string(kImageMarker) +
                               "', which this server reserves for images",
                           "messages");
    }
    msg["content"] = content;
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content") msg[key] = nlohmann::ordered_json::parse(value.dump());
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

ParsedCompletion parse_completion_request(const json& body, Endpoint endpoint) {
  ParsedCompletion p;
  CompletionRequest& r = p.request;
  r.endpoint = endpoint;
  auto fail = [&](ApiError e) {
    p.error = std::move(e);
    return p;
  };
  if (!body.is_object()) return fail(bad_request("the request body must be a JSON object"));

  if (present(body, "model")) {
    if (!body.at("model").is_string()) return fail(bad_request("'model' must be a string", "model"));
    r.model = body.at("model").get<std::string>();
  }
  if (endpoint == Endpoint::kCompletions) {
    if (!present(body, "prompt")) return fail(bad_request("'prompt' is required", "prompt"));
    const json& pr = body.at("prompt");
    if (pr.is_string()) {
      r.prompt_text = pr.get<std::string>();
    } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
      r.prompt_text = pr[0].get<std::string>();
    } else if (pr.is_array() && pr.size() == 1 && pr[0].is_array()) {
      if (auto e = get_token_array(pr[0], "prompt", r.prompt_tokens, false)) return fail(*e);
      r.prompt_is_tokens = true;
    } else if (pr.is_array() && !pr.empty() && pr[0].is_number()) {
      if (auto e = get_token_array(pr, "prompt", r.prompt_tokens, false)) return fail(*e);
      r.prompt_is_tokens = true;
    } else if (pr.is_array() && pr.size() > 1) {
      return fail(not_supported("more than one prompt per request", "prompt"));
    } else {
      return fail(bad_request("'prompt' must be a string or an array of token ids", "prompt"));
    }
  } else {
    if (!present(body, "messages")) return fail(bad_request("'messages' is required", "messages"));
    if (auto e = normalize_messages(body.at("messages"), r.messages, &r.image_urls)) return fail(*e);
    if (present(body, "tools")) {
      if (!body.at("tools").is_array()) return fail(bad_request("'tools' must be an array", "tools"));
      r.tools = nlohmann::ordered_json::parse(body.at("tools").dump());
    }
  }

  if (auto e = get_bool(body, "stream", r.stream)) return fail(*e);
  if (present(body, "stream_options")) {
    const json& so = body.at("stream_options");
    if (!so.is_object()) return fail(bad_request("'stream_options' must be an object", "stream_options"));
    if (!r.stream)
      return fail(bad_request("'stream_options' is only allowed when 'stream' is true",
                              "stream_options"));
    if (auto e = get_bool(so, "include_usage", r.include_usage)) return fail(*e);
  }
  std::optional<int64_t> i;
  if (auto e = get_int(body, "n", 1, 16, i)) return fail(*e);
  if (i) r.n = static_cast<int32_t>(*i);
  i.reset();
  if (auto e = get_int(body, "priority", std::numeric_limits<int32_t>::min(),
                       std::numeric_limits<int32_t>::max(), i))
    return fail(*e);
  if (i) r.priority = static_cast<int32_t>(*i);
  if (auto e = read_sampling_params(body, r.sampling, &r.given)) return fail(bad_request(*e));
  if (auto e = parse_logprobs(body, endpoint, r)) return fail(*e);
  if (auto e = check_unsupported(body, endpoint)) return fail(*e);
  return p;
}

ParsedTokenize parse_tokenize_request(const json& body) {
  ParsedTokenize p;
  TokenizeRequest& r = p.request;
  if (present(body, "messages")) {
    r.has_messages = true;
    if (auto e = normalize_messages(body.at("messages"), r.messages)) {
      p.error = e;
      return p;
    }
    if (present(body, "tools")) r.tools = nlohmann::ordered_json::parse(body.at("tools").dump());
  } else if (present(body, "prompt") && body.at("prompt").is_string()) {
    r.prompt = body.at("prompt").get<std::string>();
  } else {
    p.error = bad_request("'prompt' (a string) or 'messages' is required", "prompt");
    return p;
  }
  bool b = false;
  if (present(body, "add_special")) {
    if (auto e = get_bool(body, "add_special", b)) {
      p.error = e;
      return p;
    }
    r.add_special = b;
  }
  if (auto e = get_bool(body, "add_generation_prompt", r.add_generation_prompt)) p.error = e;
  return p;
}

ParsedDetokenize parse_detokenize_request(const json& body) {
  ParsedDetokenize p;
  if (!present(body, "tokens")) {
    p.error = bad_request("'tokens' is required", "tokens");
    return p;
  }
  if (auto e = get_token_array(body.at("tokens"), "tokens", p.tokens, true)) p.error = e;
  return p;
}

}  // namespace cadenza::server
