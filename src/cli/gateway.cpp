// `cadenza gateway`: one front door for many `cadenza serve` replicas (src/gateway,
// docs/gateway.md).
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "gateway/config.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"

namespace cadenza::cli {
namespace {

struct GatewayArgs {
  std::string config;
  bool check = false;
  bool no_webui = false;
  std::string hash_key;
};

int run_gateway(const GatewayArgs& a) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("gateway"));
  if (!a.hash_key.empty()) {
    fmt::print("{}\n", gateway::sha256_hex(a.hash_key));
    return 0;
  }
  if (a.config.empty()) {
    spdlog::error("gateway: --config is required");
    return 1;
  }
  auto cfg = gateway::load_config(a.config);
  if (!cfg) {
    spdlog::error("gateway: {}", cfg.error());
    return 1;
  }
  if (a.check) {
    fmt::print("{}: OK ({} models, {} tenants)\n", a.config, cfg->models.size(),
               cfg->tenants.size());
    return 0;
  }
  auto gw = gateway::Gateway::create(*cfg, a.config);
  if (!gw) {
    spdlog::error("gateway: {}", gw.error());
    return 1;
  }
  (*gw)->handle_signals();
  (*gw)->set_webui(!a.no_webui);
  auto started = (*gw)->start();
  if (!started) {
    spdlog::error("gateway: {}", started.error());
    return 1;
  }
  const auto ports = (*gw)->ports();
  for (size_t i = 0; i < ports.size(); ++i)
    fmt::print("cadenza gateway: listening on {}://{}:{}\n",
               cfg->listeners[i].ssl_certfile.empty() ? "http" : "https", cfg->listeners[i].host,
               ports[i]);
  std::fflush(stdout);
  (*gw)->wait();
  spdlog::info("gateway: stopped");
  return 0;
}

}  // namespace

Command gateway_command() {
  auto args = std::make_shared<GatewayArgs>();
  Command c;
  c.name = "gateway";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "gateway", "Front door for many replicas: keys, limits, routing, failover, cache "
                   "(docs/gateway.md)");
    sub->add_option("-c,--config", args->config, "gateway.yaml (reloaded on SIGHUP)");
    sub->add_flag("--check", args->check, "Validate the configuration and exit");
    sub->add_flag("--no-webui", args->no_webui,
                  "No web console at / (docs/webui.md): / and /webui/* answer 404");
    sub->add_option("--hash-key", args->hash_key,
                    "Print the SHA-256 of an API key (for tenants[].key_sha256) and exit");
  };
  c.run = [args] { return run_gateway(*args); };
  return c;
}

}  // namespace cadenza::cli
