#include "apishape/error.h"

namespace cadenza::apishape {

using ojson = nlohmann::ordered_json;

ShapeError invalid(std::string message, std::string param) {
  ShapeError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ShapeError unsupported(const std::string& field, const std::string& why) {
  ShapeError e;
  e.message = "'" + field + "' is not supported" + (why.empty() ? "" : ": " + why);
  e.param = field;
  e.code = "unsupported_parameter";
  return e;
}

std::string anthropic_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

ojson error_body(Api api, const ShapeError& e) {
  if (api == Api::kMessages)
    return {{"type", "error"},
            {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? ojson(nullptr) : ojson(e.param)},
            {"code", e.code.empty() ? ojson(nullptr) : ojson(e.code)}}}};
}

ShapeError from_openai_error(int status, const std::string& body) {
  ShapeError e;
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.message = "upstream error (HTTP " + std::to_string(status) + ")";
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return e;
  const nlohmann::json* err = nullptr;
  if (j.contains("error") && j.at("error").is_object()) err = &j.at("error");
  if (!err) {
    // llama-server and some proxies answer {"message": ...} or {"detail": ...}.
    for (const char* k : {"message", "detail"})
      if (j.contains(k) && j.at(k).is_string()) e.message = j.at(k).get<std::string>();
    return e;
  }
  auto str = [&](const char* k) -> std::string {
    return err->contains(k) && err->at(k).is_string() ? err->at(k).get<std::string>() : "";
  };
  if (!str("message").empty()) e.message = str("message");
  if (!str("type").empty()) e.type = str("type");
  e.param = str("param");
  e.code = str("code");
  return e;
}

}  // namespace cadenza::apishape
