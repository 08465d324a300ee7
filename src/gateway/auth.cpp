#include "gateway/auth.h"

#include <string_view>

#include <boost/beast/core/string.hpp>

#include "gateway/audit.h"

namespace cadenza::gateway {

std::string_view presented_key(const boost::beast::http::fields& headers) {
  std::string_view authorization;
  if (auto it = headers.find(boost::beast::http::field::authorization); it != headers.end())
    authorization = std::string_view(it->value().data(), it->value().size());
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size() &&
      boost::beast::iequals(
          boost::beast::string_view(authorization.data(), kBearer.size()),
          boost::beast::string_view(kBearer.data(), kBearer.size())))
    return authorization.substr(kBearer.size());
  // Anthropic's clients send `x-api-key: KEY` instead (used when there is no Authorization).
  if (authorization.empty())
    if (auto it = headers.find("x-api-key"); it != headers.end())
      return std::string_view(it->value().data(), it->value().size());
  return {};
}

Caller identify_caller(const Tenants& tenants, const boost::beast::http::fields& headers,
                       std::string_view request_id) {
  Caller c;
  if (!tenants.enabled()) return c;
  const std::string_view key = presented_key(headers);
  c.tenant = tenants.find_by_key(key);
  if (!c.tenant) {
    audit_log("auth_failed",
              {{"scope", "tenant"},
               {"reason", key.empty() ? "missing_key" : "unknown_key"},
               {"key_sha256_prefix", key_fingerprint(key)},
               {"request_id", std::string(request_id)}},
              true);
    c.refusal = error_reply(401,
                            key.empty() ? "missing API key (Authorization: Bearer KEY or x-api-key: KEY)"
                                        : "invalid API key",
                            "invalid_request_error", "invalid_api_key");
  }
  return c;
}

}  // namespace cadenza::gateway
