// Who is calling: with tenants configured, the client routes (the generation routes and
// GET /v1/models) need `Authorization: Bearer KEY` (or `x-api-key: KEY`) with the key of some tenant; /health, /ready
// and /metrics stay open for probes and scrapers. Without tenants anyone may call.
// Thread-safety: pure functions over an immutable Tenants.
#pragma once

#include <memory>
#include <optional>

#include <boost/beast/http/fields.hpp>

#include "gateway/responses.h"
#include "gateway/tenants.h"

namespace cadenza::gateway {

struct Caller {
  std::shared_ptr<Tenant> tenant;  // null when tenants are off
  std::optional<Reply> refusal;    // set: answer with this (401 invalid_api_key) and stop
};

// The key a request presents: `Authorization: Bearer KEY`, else `x-api-key: KEY`; empty when
// neither. Points into `headers`.
std::string_view presented_key(const boost::beast::http::fields& headers);

// From the request's key (absent, not "Bearer KEY", or an unknown key: 401, and an audit line
// naming `request_id` and the key's fingerprint, audit.h).
Caller identify_caller(const Tenants& tenants, const boost::beast::http::fields& headers,
                       std::string_view request_id = {});

}  // namespace cadenza::gateway
