// The gateway's admin endpoints (`/admin/...`), behind the admin key (`admin_key_sha256` or
// `admin_key_env` in the configuration; docs/gateway.md):
//   POST /admin/reload   reads the configuration file again (as SIGHUP does)
//   GET  /admin/tenants  each tenant's limits and what is left in its buckets now
//   POST /admin/cache/clear  drops every response-cache entry (Redis: every key under the prefix)
// The key comes as `Authorization: Bearer KEY` (or `x-api-key: KEY`): missing 401, wrong 403,
// no admin key configured 403 (the endpoints are off). Every refusal and every action writes an
// audit line (audit.h) with the key's fingerprint, never the key.
// Thread-safety: called on an io thread per request; Gateway::reload_from_file serializes reloads.
#pragma once

#include <string>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "gateway/responses.h"

namespace cadenza::gateway {

class Gateway;

bool is_admin_route(const std::string& target);

// The answer to an /admin/... request (`target` without its query string).
Reply admin_reply(Gateway& gw, const boost::beast::http::request<boost::beast::http::string_body>& req,
                  const std::string& target, const std::string& request_id);

}  // namespace cadenza::gateway
