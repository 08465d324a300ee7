// Errors in each API's own shape. Converters return a ShapeError; the caller writes it with the
// body of the API the client spoke.
//   OpenAI (Chat Completions, Responses): {"error": {"message", "type", "param", "code"}}
//   Anthropic Messages: {"type": "error", "error": {"type", "message"}}; the type follows the
//   HTTP status (400 invalid_request_error, 401 authentication_error, 403 permission_error,
//   404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503/529 overloaded_error,
//   other 5xx api_error).
// Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace cadenza::apishape {

// The API a client speaks.
enum class Api { kChat, kMessages, kResponses };

struct ShapeError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's type; Anthropic's follows the status
  std::string param;                           // empty: null
  std::string code;                            // empty: null
};

ShapeError invalid(std::string message, std::string param = {});
// "'<field>' is not supported" (a 400 naming the field).
ShapeError unsupported(const std::string& field, const std::string& why = {});

// Anthropic's error type for an HTTP status.
std::string anthropic_error_type(int status);

// The error body in `api`'s shape.
nlohmann::ordered_json error_body(Api api, const ShapeError& e);

// Reads an OpenAI error body ({"error": {...}}) back into a ShapeError with `status`; a body of
// another shape gives a generic message. Used to re-shape errors of the chat path.
ShapeError from_openai_error(int status, const std::string& body);

}  // namespace cadenza::apishape
