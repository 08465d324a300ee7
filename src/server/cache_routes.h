// POST /v1/cache/clear: drops the prefix cache of a model's engine, by tier (an operator's
// action, behind the API key like every /v1 route). Body (optional, JSON object):
//   {"tier": "all" | "pool" | "memory" | "disk", "model": NAME}
// tier defaults to "all"; model is needed in router mode only (as for other routes). Answer:
//   {"object": "cache.clear", "tier": "all",
//    "freed": {"pool_blocks": N, "memory_bytes": N, "disk_bytes": N}}
// Running requests keep their KV; only what later requests could have found is dropped. The work
// runs on the engine thread between two steps. Errors: 400 for a bad body, an unknown tier or a
// model without a KV cache (an encoder).
#pragma once

#include <nlohmann/json.hpp>

#include "server/routes.h"
#include "server/server_context.h"

namespace cadenza::server {

void cache_clear_route(const ModelContext& ctx, ModelHandle held, const nlohmann::json& body,
                       RouteResult& r);

}  // namespace cadenza::server
