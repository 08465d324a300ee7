#include "gateway/auth.h"

#include <string_view>

#include <boost/beast/core/string.hpp>

namespace cadenza::gateway {

Caller identify_caller(const Tenants& tenants, const boost::beast::http::fields& headers) {
  Caller c;
  if (!tenants.enabled()) return c;
  std::string_view authorization;
  if (auto it = headers.find(boost::beast::http::field::authorization); it != headers.end())
    authorization = std::string_view(it->value().data(), it->value().size());
  std::string_view key;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size() &&
      boost::beast::iequals(
          boost::beast::string_view(authorization.data(), kBearer.size()),
          boost::beast::string_view(kBearer.data(), kBearer.size())))
    key = authorization.substr(kBearer.size());
  // Anthropic's clients send `x-api-key: KEY` instead (used when there is no Authorization).
  if (authorization.empty())
    if (auto it = headers.find("x-api-key"); it != headers.end())
      key = std::string_view(it->value().data(), it->value().size());
  c.tenant = tenants.find_by_key(key);
  if (!c.tenant)
    c.refusal = error_reply(401,
                            key.empty() ? "missing API key (Authorization: Bearer KEY or x-api-key: KEY)"
                                        : "invalid API key",
                            "invalid_request_error", "invalid_api_key");
  return c;
}

}  // namespace cadenza::gateway
