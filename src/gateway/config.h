// The gateway's configuration (gateway.yaml, parsed with yaml-cpp): listeners, model pools with
// versions and upstreams, routing, health, tenants, the response cache. docs/gateway.md documents
// every field; deploy/gateway.example.yaml is a complete example.
//
// Contract: parse_config never throws; a malformed or invalid file gives an Error naming the field.
// The returned GatewayConfig is a plain value (copyable, no shared state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace cadenza::gateway {

struct ListenerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port
  // HTTPS on this listener, as `cadenza serve --ssl-certfile/--ssl-keyfile/--ssl-ca-certs`
  // (server/tls.h): certificate chain and key (both or neither); ssl_ca_certs: require client
  // certificates signed by these CAs (mutual TLS).
  std::string ssl_certfile;
  std::string ssl_keyfile;
  std::string ssl_ca_certs;
};

// A "host:port" upstream address ("http://host:port" too; "https://host:port" sets tls).
struct HostPort {
  std::string host;
  std::string port;
  bool tls = false;
  std::string str() const { return host + ":" + port; }
};

// What an upstream speaks. cadenza: every route of `cadenza serve` (Chat Completions,
// Completions, Anthropic Messages, Responses), forwarded as they are. chat: only
// /v1/chat/completions (another vLLM or llama-server, a cloud endpoint): the gateway converts
// /v1/messages and /v1/responses to Chat Completions and the answers back (src/apishape).
enum class UpstreamApi { cadenza, chat };

// TLS to a version's replicas (its upstreams are `https://...`). Verification is on unless
// `tls_verify: false`; the certificate must chain to `ca_file` (else the system's CA store) and
// name `tls_server_name` (else the host written in the upstream entry).
struct UpstreamTlsConfig {
  bool enabled = false;
  bool verify = true;
  std::string ca_file;          // PEM trust anchors; empty: the system's default store
  std::string cert_file;        // client certificate chain for mutual TLS (with key_file)
  std::string key_file;
  std::string server_name;      // SNI and the name checked; empty: the upstream's host
  std::string id() const {
    return ca_file + "|" + cert_file + "|" + key_file + "|" + (verify ? "v" : "n") + "|" +
           server_name;
  }
};

// One version of a model ("name@version"): the replicas that serve it.
struct VersionConfig {
  UpstreamTlsConfig tls;
  UpstreamApi api = UpstreamApi::cadenza;
  // Sent to the replicas as `Authorization: Bearer KEY` (replacing the client's key) when not
  // empty: `api_key`, or the environment variable named by `api_key_env` at load time.
  std::string api_key;
  std::string version;         // empty for a model without versions
  double weight = 1;           // share of requests for the bare model name (canary weights)
  std::string upstream_model;  // the model name the replicas serve (default: the model's name)
  std::vector<HostPort> upstreams;  // static replicas
  std::vector<HostPort> dns;        // names re-resolved periodically; every address is a replica
};

struct ModelConfig {
  std::string name;
  std::vector<VersionConfig> versions;
};

struct RoutingConfig {
  int prefix_affinity_chars = 256;     // 0 disables prefix affinity
  int affinity_max_outstanding = 4;    // the affine replica is "busy" at this many requests
  int max_retries = 2;                 // other replicas tried before the first byte was sent
  int virtual_nodes = 64;              // points per replica on the hash ring
};

struct HealthConfig {
  int interval_ms = 2000;       // active /ready checks; 0 disables them
  int timeout_ms = 1000;
  int eject_after_failures = 3; // consecutive failures that open the circuit
  int eject_ms = 5000;          // first open period; doubles on each failed half-open probe
  int max_eject_ms = 60000;
};

struct TenantConfig {
  std::string name;
  std::string key_sha256;              // lower-case hex SHA-256 of the API key
  std::vector<std::string> models;     // allowed: model names, "name@version", "default", "*"
  double requests_per_minute = 0;      // 0: unlimited
  double tokens_per_minute = 0;        // 0: unlimited
  double request_burst = 0;            // bucket size; 0: requests_per_minute
  double token_burst = 0;              // bucket size; 0: tokens_per_minute
};

enum class CacheBackend { off, lru, redis };

struct CacheConfig {
  CacheBackend backend = CacheBackend::lru;
  size_t max_entries = 10000;
  size_t max_entry_bytes = 1 << 20;  // larger responses are not stored
  int ttl_s = 300;
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  int redis_timeout_ms = 200;
  std::string redis_prefix = "cadenza:gw:";
};

struct GatewayConfig {
  std::vector<ListenerConfig> listeners;
  int io_threads = 2;
  std::string default_model;  // what the alias "default" means; empty: the first model
  std::vector<ModelConfig> models;
  RoutingConfig routing;
  HealthConfig health;
  int dns_refresh_ms = 5000;
  int upstream_timeout_ms = 300000;  // a whole upstream exchange at most
  int connect_timeout_ms = 2000;
  size_t max_body_bytes = 8 << 20;   // client request bodies and buffered upstream bodies
  size_t max_header_bytes = 16 << 10;  // a client request's start line and headers (431 above)
  int default_max_tokens = 256;      // token reservation when a request has no max_tokens
  std::vector<TenantConfig> tenants; // empty: no keys needed, no limits
  // The SHA-256 (lower-case hex) of the admin key for /admin/... (admin.h): `admin_key_sha256`,
  // or the hash of the key in the environment variable `admin_key_env` names (read at load).
  // Empty: the admin endpoints are off (403).
  std::string admin_key_sha256;
  CacheConfig cache;
  bool access_log = true;
};

// Parses YAML text. `origin` names the source in errors (a file name); a relative
// `tenants_file` is read from `base_dir`.
Result<GatewayConfig> parse_config(const std::string& yaml, const std::string& origin = "config",
                                   const std::filesystem::path& base_dir = ".");
Result<GatewayConfig> load_config(const std::string& path);

// "host:port" / "[v6]:port". Errors: no port, bad port.
Result<HostPort> parse_host_port(const std::string& s);

}  // namespace cadenza::gateway
