#include "gateway/config.h"

#include <cstdlib>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "gateway/hashing.h"

namespace cadenza::gateway {

namespace {

// yaml-cpp reports problems by throwing; everything here runs inside one try block in
// parse_config and turns into an Error. ConfigError carries our own messages the same way.
struct ConfigError {
  std::string message;
};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw ConfigError{where + ": " + what};
}

void check_keys(const YAML::Node& n, const std::string& where, std::set<std::string> allowed) {
  if (!n.IsMap()) fail(where, "expected a mapping");
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (!allowed.count(k)) fail(where, "unknown key '" + k + "'");
  }
}

template <typename T>
T get(const YAML::Node& n, const char* key, const std::string& where, T fallback) {
  const YAML::Node v = n[key];
  if (!v || v.IsNull()) return fallback;
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    fail(where + "." + key, "bad value '" + (v.IsScalar() ? v.Scalar() : std::string("<node>")) +
                                "'");
  }
}

int get_int(const YAML::Node& n, const char* key, const std::string& where, int fallback, int lo,
            int hi) {
  const int v = get<int>(n, key, where, fallback);
  if (v < lo || v > hi)
    fail(where + "." + key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

double get_nonneg(const YAML::Node& n, const char* key, const std::string& where,
                  double fallback) {
  const double v = get<double>(n, key, where, fallback);
  if (!std::isfinite(v) || v < 0) fail(where + "." + key, "must be a finite number >= 0");
  return v;
}

std::vector<std::string> get_strings(const YAML::Node& n, const char* key,
                                     const std::string& where) {
  std::vector<std::string> out;
  const YAML::Node v = n[key];
  if (!v || v.IsNull()) return out;
  if (!v.IsSequence()) fail(where + "." + key, "expected a list");
  for (const auto& e : v) {
    if (!e.IsScalar()) fail(where + "." + key, "expected a list of strings");
    out.push_back(e.as<std::string>());
  }
  return out;
}

std::vector<HostPort> get_addrs(const YAML::Node& n, const char* key, const std::string& where) {
  std::vector<HostPort> out;
  for (const auto& s : get_strings(n, key, where)) {
    auto hp = parse_host_port(s);
    if (!hp) fail(where + "." + key, hp.error());
    out.push_back(*hp);
  }
  return out;
}

// `default_upstream_model`: what a version sends as `model` when it names none (the model's own
// `upstream_model`, else the model's name).
VersionConfig parse_version(const YAML::Node& n, const std::string& where,
                            const std::string& default_upstream_model) {
  VersionConfig v;
  v.version = get<std::string>(n, "version", where, "");
  if (v.version.find('@') != std::string::npos) fail(where + ".version", "must not contain '@'");
  v.weight = get_nonneg(n, "weight", where, 1);
  v.upstream_model = get<std::string>(n, "upstream_model", where, default_upstream_model);
  v.upstreams = get_addrs(n, "upstreams", where);
  v.dns = get_addrs(n, "dns", where);
  if (v.upstreams.empty() && v.dns.empty()) fail(where, "needs 'upstreams' or 'dns'");
  // TLS: every replica of a version speaks the same (https:// entries), with one set of settings.
  size_t tls_entries = 0;
  for (const auto* list : {&v.upstreams, &v.dns})
    for (const auto& hp : *list) tls_entries += hp.tls;
  if (tls_entries != 0 && tls_entries != v.upstreams.size() + v.dns.size())
    fail(where, "mixes https:// and plain upstreams (give them separate versions)");
  v.tls.enabled = tls_entries != 0;
  v.tls.verify = get<bool>(n, "tls_verify", where, true);
  v.tls.ca_file = get<std::string>(n, "ca_file", where, "");
  v.tls.cert_file = get<std::string>(n, "client_cert_file", where, "");
  v.tls.key_file = get<std::string>(n, "client_key_file", where, "");
  v.tls.server_name = get<std::string>(n, "tls_server_name", where, "");
  if (!v.tls.enabled)
    for (const char* k : {"ca_file", "client_cert_file", "client_key_file", "tls_verify",
                          "tls_server_name"})
      if (n[k]) fail(where + "." + k, "only for https:// upstreams");
  if (v.tls.cert_file.empty() != v.tls.key_file.empty())
    fail(where, "give both 'client_cert_file' and 'client_key_file' (mutual TLS) or neither");
  const std::string api = get<std::string>(n, "api", where, "cadenza");
  if (api == "chat") v.api = UpstreamApi::chat;
  else if (api != "cadenza") fail(where + ".api", "expected 'cadenza' or 'chat'");
  v.api_key = get<std::string>(n, "api_key", where, "");
  const std::string env = get<std::string>(n, "api_key_env", where, "");
  if (!env.empty()) {
    if (!v.api_key.empty()) fail(where, "give either 'api_key' or 'api_key_env'");
    const char* value = std::getenv(env.c_str());
    if (!value || !*value) fail(where + ".api_key_env", "the environment variable " + env + " is not set");
    v.api_key = value;
  }
  return v;
}

ModelConfig parse_model(const YAML::Node& n, const std::string& where) {
  check_keys(n, where, {"name", "versions", "upstreams", "dns", "upstream_model", "weight", "api",
                        "api_key", "api_key_env", "ca_file", "client_cert_file",
                        "client_key_file", "tls_verify", "tls_server_name"});
  ModelConfig m;
  m.name = get<std::string>(n, "name", where, "");
  if (m.name.empty()) fail(where + ".name", "required");
  if (m.name.find('@') != std::string::npos) fail(where + ".name", "must not contain '@'");
  if (m.name == "default") fail(where + ".name", "'default' is reserved for the alias");
  const YAML::Node versions = n["versions"];
  if (versions) {
    if (n["upstreams"] || n["dns"]) fail(where, "give either 'versions' or 'upstreams'/'dns'");
    for (const char* k : {"api", "api_key", "api_key_env", "ca_file", "client_cert_file",
                          "client_key_file", "tls_verify", "tls_server_name"})
      if (n[k]) fail(where + "." + k, "with 'versions', give it per version");
    if (n["weight"]) fail(where + ".weight", "with 'versions', give each version its weight");
    // A model-level upstream_model is the default of every version that names none.
    const std::string default_upstream = get<std::string>(n, "upstream_model", where, m.name);
    if (!versions.IsSequence() || versions.size() == 0)
      fail(where + ".versions", "expected a non-empty list");
    std::set<std::string> seen;
    for (size_t i = 0; i < versions.size(); ++i) {
      const std::string w = where + ".versions[" + std::to_string(i) + "]";
      check_keys(versions[i], w, {"version", "weight", "upstream_model", "upstreams", "dns", "api",
                                  "api_key", "api_key_env", "ca_file", "client_cert_file",
                                  "client_key_file", "tls_verify", "tls_server_name"});
      VersionConfig v = parse_version(versions[i], w, default_upstream);
      if (v.version.empty()) fail(w + ".version", "required when a model has versions");
      if (!seen.insert(v.version).second) fail(w + ".version", "duplicate '" + v.version + "'");
      m.versions.push_back(std::move(v));
    }
  } else {
    m.versions.push_back(parse_version(n, where, m.name));
  }
  double total = 0;
  for (const auto& v : m.versions) total += v.weight;
  if (total <= 0) fail(where, "the versions' weights must not all be 0");
  return m;
}

bool is_hex_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// `tenants_file: PATH` (relative to `base_dir`): a YAML file with a `tenants:` list, appended to
// the config's own tenants. It lets the key hashes live in a Kubernetes Secret while the rest
// of the config is a ConfigMap; it is read again on every reload.
void merge_tenants_file(YAML::Node& root, const std::filesystem::path& base_dir) {
  const YAML::Node f = root["tenants_file"];
  if (!f) return;
  if (!f.IsScalar() || f.Scalar().empty()) fail("tenants_file", "expected a file path");
  std::filesystem::path path(f.Scalar());
  if (path.is_relative()) path = base_dir / path;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tenants_file", "cannot open '" + path.string() + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  YAML::Node extra;
  try {
    extra = YAML::Load(ss.str());
  } catch (const YAML::Exception& e) {
    fail("tenants_file", path.string() + ": " + e.what());
  }
  if (!extra.IsMap() || !extra["tenants"] || !extra["tenants"].IsSequence() || extra.size() != 1)
    fail("tenants_file", path.string() + ": expected a mapping with one key, 'tenants:' (a list)");
  YAML::Node merged(YAML::NodeType::Sequence);
  if (const YAML::Node own = root["tenants"]) {
    if (!own.IsSequence()) fail("tenants", "expected a list");
    for (const auto& t : own) merged.push_back(t);
  }
  for (const auto& t : extra["tenants"]) merged.push_back(t);
  root["tenants"] = merged;
  root.remove("tenants_file");
}

GatewayConfig parse_root(const YAML::Node& root) {
  GatewayConfig c;
  if (!root.IsMap()) fail("config", "expected a mapping at the top level");
  check_keys(root, "config",
             {"listeners", "io_threads", "default_model", "models", "routing", "health",
              "dns_refresh_ms", "upstream_timeout_ms", "connect_timeout_ms", "max_body_bytes", "max_header_bytes",
              "default_max_tokens", "admin_key_sha256", "admin_key_env", "tenants", "tenants_file", "cache", "access_log"});
  if (const YAML::Node ls = root["listeners"]) {
    if (!ls.IsSequence()) fail("listeners", "expected a list");
    for (size_t i = 0; i < ls.size(); ++i) {
      const std::string w = "listeners[" + std::to_string(i) + "]";
      check_keys(ls[i], w, {"host", "port", "ssl_certfile", "ssl_keyfile", "ssl_ca_certs"});
      ListenerConfig l;
      l.host = get<std::string>(ls[i], "host", w, l.host);
      l.port = static_cast<uint16_t>(get_int(ls[i], "port", w, l.port, 0, 65535));
      l.ssl_certfile = get<std::string>(ls[i], "ssl_certfile", w, "");
      l.ssl_keyfile = get<std::string>(ls[i], "ssl_keyfile", w, "");
      l.ssl_ca_certs = get<std::string>(ls[i], "ssl_ca_certs", w, "");
      if (l.ssl_certfile.empty() != l.ssl_keyfile.empty())
        fail(w, "give both 'ssl_certfile' and 'ssl_keyfile' (HTTPS) or neither");
      if (!l.ssl_ca_certs.empty() && l.ssl_certfile.empty())
        fail(w + ".ssl_ca_certs", "needs 'ssl_certfile' and 'ssl_keyfile'");
      c.listeners.push_back(l);
    }
  }
  if (c.listeners.empty()) c.listeners.push_back({});
  c.io_threads = get_int(root, "io_threads", "config", c.io_threads, 1, 256);
  c.dns_refresh_ms = get_int(root, "dns_refresh_ms", "config", c.dns_refresh_ms, 100, 86400000);
  c.upstream_timeout_ms =
      get_int(root, "upstream_timeout_ms", "config", c.upstream_timeout_ms, 1, 86400000);
  c.connect_timeout_ms =
      get_int(root, "connect_timeout_ms", "config", c.connect_timeout_ms, 1, 600000);
  c.max_body_bytes = static_cast<size_t>(
      get_int(root, "max_body_bytes", "config", static_cast<int>(c.max_body_bytes), 1024,
              1 << 30));
  c.max_header_bytes = static_cast<size_t>(
      get_int(root, "max_header_bytes", "config", static_cast<int>(c.max_header_bytes), 1024,
              1 << 20));
  c.default_max_tokens =
      get_int(root, "default_max_tokens", "config", c.default_max_tokens, 0, 1 << 24);
  c.access_log = get<bool>(root, "access_log", "config", c.access_log);
  c.admin_key_sha256 = get<std::string>(root, "admin_key_sha256", "config", "");
  for (char& ch : c.admin_key_sha256)
    if (ch >= 'A' && ch <= 'F') ch = static_cast<char>(ch - 'A' + 'a');
  if (!c.admin_key_sha256.empty() && !is_hex_sha256(c.admin_key_sha256))
    fail("admin_key_sha256",
         "expected 64 hex digits (the SHA-256 of the key: cadenza gateway --hash-key KEY)");
  if (const std::string env = get<std::string>(root, "admin_key_env", "config", ""); !env.empty()) {
    if (!c.admin_key_sha256.empty()) fail("config", "give either 'admin_key_sha256' or 'admin_key_env'");
    const char* value = std::getenv(env.c_str());
    if (!value || std::string_view(value).size() < 16)
      fail("admin_key_env", "the environment variable " + env + " is not set or shorter than 16 characters");
    c.admin_key_sha256 = sha256_hex(value);
  }

  const YAML::Node models = root["models"];
  if (!models || !models.IsSequence() || models.size() == 0)
    fail("models", "a non-empty list is required");
  std::set<std::string> names;
  for (size_t i = 0; i < models.size(); ++i) {
    ModelConfig m = parse_model(models[i], "models[" + std::to_string(i) + "]");
    if (!names.insert(m.name).second) fail("models", "duplicate model '" + m.name + "'");
    c.models.push_back(std::move(m));
  }
  c.default_model = get<std::string>(root, "default_model", "config", c.models[0].name);
  if (!names.count(c.default_model.substr(0, c.default_model.find('@'))))
    fail("default_model", "'" + c.default_model + "' is not a configured model");

  if (const YAML::Node r = root["routing"]) {
    check_keys(r, "routing",
               {"prefix_affinity_chars", "affinity_max_outstanding", "max_retries",
                "virtual_nodes"});
    auto& o = c.routing;
    o.prefix_affinity_chars =
        get_int(r, "prefix_affinity_chars", "routing", o.prefix_affinity_chars, 0, 1 << 20);
    o.affinity_max_outstanding =
        get_int(r, "affinity_max_outstanding", "routing", o.affinity_max_outstanding, 1, 1 << 20);
    o.max_retries = get_int(r, "max_retries", "routing", o.max_retries, 0, 16);
    o.virtual_nodes = get_int(r, "virtual_nodes", "routing", o.virtual_nodes, 1, 1024);
  }
  if (const YAML::Node h = root["health"]) {
    check_keys(h, "health",
               {"interval_ms", "timeout_ms", "eject_after_failures", "eject_ms", "max_eject_ms"});
    auto& o = c.health;
    o.interval_ms = get_int(h, "interval_ms", "health", o.interval_ms, 0, 86400000);
    o.timeout_ms = get_int(h, "timeout_ms", "health", o.timeout_ms, 1, 600000);
    o.eject_after_failures =
        get_int(h, "eject_after_failures", "health", o.eject_after_failures, 1, 1000);
    o.eject_ms = get_int(h, "eject_ms", "health", o.eject_ms, 1, 86400000);
    o.max_eject_ms = get_int(h, "max_eject_ms", "health", o.max_eject_ms, o.eject_ms, 86400000);
  }
  if (const YAML::Node ts = root["tenants"]) {
    if (!ts.IsSequence()) fail("tenants", "expected a list");
    std::set<std::string> keys, tnames;
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string w = "tenants[" + std::to_string(i) + "]";
      check_keys(ts[i], w,
                 {"name", "key_sha256", "models", "requests_per_minute", "tokens_per_minute",
                  "request_burst", "token_burst"});
      TenantConfig t;
      t.name = get<std::string>(ts[i], "name", w, "");
      if (t.name.empty()) fail(w + ".name", "required");
      if (!tnames.insert(t.name).second) fail(w + ".name", "duplicate tenant '" + t.name + "'");
      t.key_sha256 = get<std::string>(ts[i], "key_sha256", w, "");
      for (char& ch : t.key_sha256)
        if (ch >= 'A' && ch <= 'F') ch = static_cast<char>(ch - 'A' + 'a');
      if (!is_hex_sha256(t.key_sha256))
        fail(w + ".key_sha256",
             "expected 64 hex digits (the SHA-256 of the key: cadenza gateway --hash-key KEY)");
      if (!keys.insert(t.key_sha256).second) fail(w + ".key_sha256", "duplicate key");
      t.models = get_strings(ts[i], "models", w);
      if (t.models.empty()) t.models.push_back("*");
      t.requests_per_minute = get_nonneg(ts[i], "requests_per_minute", w, 0);
      t.tokens_per_minute = get_nonneg(ts[i], "tokens_per_minute", w, 0);
      t.request_burst = get_nonneg(ts[i], "request_burst", w, 0);
      t.token_burst = get_nonneg(ts[i], "token_burst", w, 0);
      c.tenants.push_back(std::move(t));
    }
  }
  if (const YAML::Node k = root["cache"]) {
    check_keys(k, "cache",
               {"backend", "max_entries", "max_entry_bytes", "ttl_s", "redis"});
    auto& o = c.cache;
    const std::string b = get<std::string>(k, "backend", "cache", "lru");
    if (b == "off")
      o.backend = CacheBackend::off;
    else if (b == "lru")
      o.backend = CacheBackend::lru;
    else if (b == "redis")
      o.backend = CacheBackend::redis;
    else
      fail("cache.backend", "expected off, lru or redis, not '" + b + "'");
    o.max_entries = static_cast<size_t>(get_int(k, "max_entries", "cache",
                                                static_cast<int>(o.max_entries), 1, 1 << 30));
    o.max_entry_bytes = static_cast<size_t>(get_int(
        k, "max_entry_bytes", "cache", static_cast<int>(o.max_entry_bytes), 1, 1 << 30));
    o.ttl_s = get_int(k, "ttl_s", "cache", o.ttl_s, 1, 365 * 86400);
    if (const YAML::Node r = k["redis"]) {
      check_keys(r, "cache.redis", {"host", "port", "timeout_ms", "prefix"});
      o.redis_host = get<std::string>(r, "host", "cache.redis", o.redis_host);
      o.redis_port = get_int(r, "port", "cache.redis", o.redis_port, 1, 65535);
      o.redis_timeout_ms = get_int(r, "timeout_ms", "cache.redis", o.redis_timeout_ms, 1, 60000);
      o.redis_prefix = get<std::string>(r, "prefix", "cache.redis", o.redis_prefix);
    }
  }
  return c;
}

}  // namespace

Result<HostPort> parse_host_port(const std::string& s) {
  HostPort hp;
  std::string_view rest = s;
  if (rest.rfind("https://", 0) == 0) {
    hp.tls = true;
    rest.remove_prefix(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return make_error("'{}': bad IPv6 address", s);
    hp.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (rest.empty() || rest.front() != ':') return make_error("'{}': expected host:port", s);
    hp.port = std::string(rest.substr(1));
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return make_error("'{}': expected host:port", s);
    hp.host = std::string(rest.substr(0, colon));
    hp.port = std::string(rest.substr(colon + 1));
  }
  if (hp.host.empty()) return make_error("'{}': no host", s);
  unsigned port = 0;
  auto [p, ec] = std::from_chars(hp.port.data(), hp.port.data() + hp.port.size(), port);
  if (ec != std::errc() || p != hp.port.data() + hp.port.size() || port == 0 || port > 65535)
    return make_error("'{}': bad port", s);
  return hp;
}

Result<GatewayConfig> parse_config(const std::string& yaml, const std::string& origin,
                                   const std::filesystem::path& base_dir) {
  try {
    YAML::Node root = YAML::Load(yaml);
    if (root.IsMap()) merge_tenants_file(root, base_dir);
    return parse_root(root);
  } catch (const ConfigError& e) {
    return make_error("{}: {}", origin, e.message);
  } catch (const YAML::Exception& e) {
    return make_error("{}: {}", origin, e.what());
  }
}

Result<GatewayConfig> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, std::filesystem::path(path).parent_path());
}

}  // namespace cadenza::gateway
