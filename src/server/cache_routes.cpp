#include "server/cache_routes.h"

#include <fmt/format.h>

#include "server/embeddings_routes.h"
#include "server/openai_protocol.h"

namespace cadenza::server {

using json = nlohmann::json;

void cache_clear_route(const ModelContext& ctx, ModelHandle held, const json& body, RouteResult& r) {
  for (const auto& [key, value] : body.items()) {
    if (key != "tier" && key != "model")
      return void(r.reply = error_reply(bad_request(fmt::format("unknown field '{}'", key), key)));
  }
  std::string tier = "all";
  if (auto it = body.find("tier"); it != body.end()) {
    if (!it->is_string()) return void(r.reply = error_reply(bad_request("'tier' must be a string", "tier")));
    tier = it->get<std::string>();
  }
  if (tier != "all" && tier != "pool" && tier != "memory" && tier != "disk") {
    return void(r.reply = error_reply(bad_request(
                    fmt::format("unknown cache tier '{}' (all, pool, memory or disk)", tier), "tier")));
  }
  if (!ctx.generates || ctx.bridge == nullptr) {
    return void(r.reply = error_reply(bad_request("this model has no KV cache (an encoder)")));
  }
  EngineBridge* bridge = ctx.bridge;
  r.deferred = on_engine(ctx, std::move(held), [bridge, tier]() -> Result<HttpReply> {
    engine::EngineCore* engine = bridge->engine_for_task();
    if (engine == nullptr) return make_error("no engine");
    auto cleared = engine->clear_prefix_cache(tier);
    if (!cleared) return cleared.error_value();
    return json_reply(200, {{"object", "cache.clear"},
                            {"tier", tier},
                            {"freed",
                             {{"pool_blocks", cleared->pool_blocks},
                              {"memory_bytes", cleared->memory_bytes},
                              {"disk_bytes", cleared->disk_bytes}}}});
  });
}

}  // namespace cadenza::server
