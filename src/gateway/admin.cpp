#include "gateway/admin.h"

#include <openssl/crypto.h>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gateway/audit.h"
#include "gateway/auth.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"

namespace cadenza::gateway {

namespace http = boost::beast::http;

namespace {

nlohmann::ordered_json bucket(double per_minute, double available) {
  if (per_minute <= 0) return nullptr;  // unlimited
  return {{"per_minute", per_minute}, {"available", std::isfinite(available) ? available : -1}};
}

Reply tenants_reply(const GatewayState& st) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const auto now = TokenBucket::Clock::now();
  for (const auto& t : st.tenants->all()) {
    const auto [requests, tokens] = t->available(now);
    const TenantConfig& c = t->config();
    list.push_back({{"name", c.name},
                    {"key_sha256_prefix", c.key_sha256.substr(0, 8)},
                    {"models", c.models},
                    {"requests", bucket(c.requests_per_minute, requests)},
                    {"tokens", bucket(c.tokens_per_minute, tokens)}});
  }
  Reply r;
  r.body = nlohmann::ordered_json{{"tenants", std::move(list)}}.dump();
  return r;
}

}  // namespace

bool is_admin_route(const std::string& target) { return target.rfind("/admin/", 0) == 0; }

Reply admin_reply(Gateway& gw, const http::request<http::string_body>& req,
                  const std::string& target, const std::string& request_id) {
  auto st = gw.state();
  const std::string_view key = presented_key(req);
  nlohmann::ordered_json who{{"route", target},
                             {"key_sha256_prefix", key_fingerprint(key)},
                             {"request_id", request_id}};
  auto refuse = [&](int status, const char* reason, std::string message) {
    who["reason"] = reason;
    audit_log("auth_failed", {{"scope", "admin"}, {"details", who}}, true);
    return error_reply(status, message, "invalid_request_error",
                       status == 401 ? "invalid_api_key" : "forbidden");
  };
  const std::string& want = st->config.admin_key_sha256;
  if (want.empty())
    return refuse(403, "admin_disabled",
                  "the admin endpoints are off (no admin_key_sha256 or admin_key_env configured)");
  if (key.empty())
    return refuse(401, "missing_key", "missing admin key (Authorization: Bearer KEY)");
  const std::string got = sha256_hex(key);
  if (got.size() != want.size() || CRYPTO_memcmp(got.data(), want.data(), got.size()) != 0)
    return refuse(403, "wrong_key", "this key is not the admin key");

  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;
  if (target == "/admin/reload" && post) {
    const Status s = gw.reload_from_file();
    who["result"] = s ? "ok" : "error";
    audit_log("admin_action", {{"action", "reload"}, {"details", who}}, false);
    if (!s) return error_reply(400, s.error(), "invalid_request_error", "reload_failed");
    return Reply{200, "application/json", R"({"status":"reloaded"})", {}};
  }
  if (target == "/admin/tenants" && get) {
    audit_log("admin_action", {{"action", "tenants"}, {"details", who}}, false);
    return tenants_reply(*st);
  }
  if (target == "/admin/cache/clear" && post) {
    if (!st->cache) {
      who["result"] = "no_cache";
      audit_log("admin_action", {{"action", "cache_clear"}, {"details", who}}, false);
      return error_reply(409, "the response cache is off (cache.backend: off)",
                         "invalid_request_error", "cache_off");
    }
    const Result<size_t> dropped = st->cache->clear();
    who["result"] = dropped ? "ok" : "error";
    if (dropped) who["dropped"] = *dropped;
    audit_log("admin_action", {{"action", "cache_clear"}, {"details", who}}, false);
    if (!dropped) return error_reply(502, dropped.error(), "api_error", "cache_unavailable");
    return Reply{200, "application/json",
                 nlohmann::ordered_json{{"status", "cleared"},
                                        {"backend", st->cache->backend()},
                                        {"dropped", *dropped}}
                     .dump(),
                 {}};
  }
  if (target == "/admin/reload" || target == "/admin/tenants" || target == "/admin/cache/clear")
    return error_reply(405, fmt::format("method {} not allowed on {}",
                                        std::string(req.method_string()), target),
                       "invalid_request_error", "method_not_allowed");
  return error_reply(404, fmt::format("no route {}", target), "invalid_request_error", "not_found");
}

}  // namespace cadenza::gateway
