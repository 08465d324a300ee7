// Unit tests of src/gateway: configuration parsing (and its errors), replica choice, consistent
// hashing stability, token buckets, the LRU cache with TTL, key and cache-key hashing, tenants,
// the circuit breaker and the metrics text. Time is passed in explicitly (no sleeps).
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "temp_dir.h"
#include "gateway/auth.h"
#include "gateway/cache.h"
#include "gateway/config.h"
#include "gateway/hashing.h"
#include "gateway/metrics.h"
#include "gateway/response_affinity.h"
#include "gateway/router.h"
#include "gateway/state.h"
#include "gateway/tenants.h"
#include "gateway/upstream.h"

namespace cadenza::gateway {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const char* kFullConfig = R"(
listeners:
  - host: 127.0.0.1
    port: 0
io_threads: 3
default_model: qwen
models:
  - name: qwen
    versions:
      - version: stable
        weight: 90
        upstreams: ["127.0.0.1:8001", "127.0.0.1:8002"]
      - version: ft-legal
        weight: 10
        upstream_model: qwen-legal
        dns: ["replicas.default.svc.cluster.local:8080"]
  - name: llama
    upstreams: ["[::1]:9000"]
routing:
  prefix_affinity_chars: 128
  affinity_max_outstanding: 3
  max_retries: 1
health:
  interval_ms: 500
  eject_after_failures: 2
tenants:
  - name: acme
    key_sha256: "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
    models: ["qwen"]
    requests_per_minute: 60
    tokens_per_minute: 1000
cache:
  backend: redis
  ttl_s: 30
  redis: {host: 10.0.0.1, port: 6380}
)";

TEST(GatewayConfig, ParsesEveryField) {
  auto c = parse_config(kFullConfig);
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(c->listeners[0].port, 0);
  EXPECT_EQ(c->io_threads, 3);
  EXPECT_EQ(c->default_model, "qwen");
  ASSERT_EQ(c->models.size(), 2u);
  const auto& q = c->models[0];
  ASSERT_EQ(q.versions.size(), 2u);
  EXPECT_EQ(q.versions[0].version, "stable");
  EXPECT_EQ(q.versions[0].weight, 90);
  EXPECT_EQ(q.versions[0].upstream_model, "qwen");
  ASSERT_EQ(q.versions[0].upstreams.size(), 2u);
  EXPECT_EQ(q.versions[0].upstreams[1].port, "8002");
  EXPECT_EQ(q.versions[1].upstream_model, "qwen-legal");
  ASSERT_EQ(q.versions[1].dns.size(), 1u);
  EXPECT_EQ(q.versions[1].dns[0].host, "replicas.default.svc.cluster.local");
  const auto& l = c->models[1];
  ASSERT_EQ(l.versions.size(), 1u);
  EXPECT_EQ(l.versions[0].version, "");
  EXPECT_EQ(l.versions[0].upstreams[0].host, "::1");
  EXPECT_EQ(c->routing.prefix_affinity_chars, 128);
  EXPECT_EQ(c->routing.affinity_max_outstanding, 3);
  EXPECT_EQ(c->routing.max_retries, 1);
  EXPECT_EQ(c->health.interval_ms, 500);
  EXPECT_EQ(c->health.eject_after_failures, 2);
  ASSERT_EQ(c->tenants.size(), 1u);
  // Upper-case hex is normalised.
  EXPECT_EQ(c->tenants[0].key_sha256, sha256_hex("abc"));
  EXPECT_EQ(c->tenants[0].requests_per_minute, 60);
  EXPECT_EQ(c->cache.backend, CacheBackend::redis);
  EXPECT_EQ(c->cache.redis_port, 6380);
  EXPECT_EQ(c->cache.ttl_s, 30);
}

TEST(GatewayConfig, DefaultsForAMinimalFile) {
  auto c = parse_config("models:\n  - name: m\n    upstreams: [localhost:1]\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->listeners.size(), 1u);
  EXPECT_EQ(c->default_model, "m");
  EXPECT_EQ(c->cache.backend, CacheBackend::lru);
  EXPECT_TRUE(c->tenants.empty());
}

TEST(GatewayConfig, AModelsUpstreamModelIsTheDefaultOfItsVersions) {
  auto c = parse_config(
      "models:\n  - name: m\n    upstream_model: served\n    versions:\n"
      "      - {version: a, upstreams: [h:1]}\n"
      "      - {version: b, upstream_model: own, upstreams: [h:2]}\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->models[0].versions[0].upstream_model, "served");
  EXPECT_EQ(c->models[0].versions[1].upstream_model, "own");

  // A model-level weight means nothing beside versions: an error, not silently dropped.
  auto w = parse_config(
      "models:\n  - name: m\n    weight: 3\n    versions:\n"
      "      - {version: a, upstreams: [h:1]}\n");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().find("models[0].weight"), std::string::npos) << w.error();
}

TEST(GatewayConfig, TenantsFileIsReadRelativeToTheConfigAndAppended) {
  test::TempDir dir("cadenza-gw-tenants");
  const std::string h1(64, 'a'), h2(64, 'b');
  {
    std::ofstream(dir.path() / "gateway.yaml")
        << "models:\n  - name: m\n    upstreams: [h:1]\ntenants_file: secret/tenants.yaml\n"
        << "tenants:\n  - {name: own, key_sha256: " << h1 << "}\n";
    std::filesystem::create_directories(dir.path() / "secret");
    std::ofstream(dir.path() / "secret" / "tenants.yaml")
        << "tenants:\n  - {name: acme, key_sha256: " << h2 << ", requests_per_minute: 5}\n";
  }
  auto c = load_config((dir.path() / "gateway.yaml").string());
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->tenants.size(), 2u);
  EXPECT_EQ(c->tenants[0].name, "own");
  EXPECT_EQ(c->tenants[1].name, "acme");
  EXPECT_EQ(c->tenants[1].requests_per_minute, 5);

  // A missing file, a file of another shape, and a key both places hold are errors.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"tenants_file: nowhere.yaml\n", "cannot open"},
      {"tenants_file: secret/other.yaml\n", "expected a mapping with one key"},
      {"tenants_file: secret/tenants.yaml\ntenants:\n  - {name: x, key_sha256: " + h2 + "}\n",
       "duplicate key"},
  };
  std::ofstream(dir.path() / "secret" / "other.yaml") << "- {name: a}\n";
  for (const auto& [tail, needle] : bad) {
    std::ofstream(dir.path() / "bad.yaml") << "models:\n  - name: m\n    upstreams: [h:1]\n" << tail;
    auto b = load_config((dir.path() / "bad.yaml").string());
    ASSERT_FALSE(b.ok()) << tail;
    EXPECT_NE(b.error().find(needle), std::string::npos) << b.error();
  }
}

TEST(GatewayConfig, BadFilesGiveErrorsNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"models: [", "yaml"},                              // YAML syntax
      {"- a\n- b\n", "top level"},                         // not a mapping
      {"listeners: []\n", "models"},                       // no models
      {"models:\n  - name: m\n", "upstreams"},             // no replicas
      {"models:\n  - name: m\n    upstreams: [nohost]\n", "host:port"},
      {"models:\n  - name: m\n    upstreams: [h:70000]\n", "bad port"},
      {"models:\n  - name: m\n    upstreams: [h:1]\n    colour: red\n", "colour"},
      {"models:\n  - name: m\n    upstreams: [h:1]\nlisteners:\n  - port: abc\n", "port"},
      {"models:\n  - name: m\n    versions:\n      - {version: a, upstreams: [h:1]}\n"
       "      - {version: a, upstreams: [h:2]}\n",
       "duplicate"},
      {"models:\n  - name: m\n    versions:\n      - {version: a, weight: 0, upstreams: [h:1]}\n",
       "weights"},
      {"models:\n  - name: m\n    upstreams: [h:1]\ntenants:\n  - {name: t, key_sha256: xyz}\n",
       "key_sha256"},
      {"models:\n  - name: m\n    upstreams: [h:1]\ndefault_model: other\n", "default_model"},
      {"models:\n  - name: m\n    upstreams: [h:1]\ncache: {backend: memcached}\n", "backend"},
      {"models:\n  - name: m@1\n    upstreams: [h:1]\n", "@"},
      {"models:\n  - name: m\n    upstreams: [h:1]\nrouting: {max_retries: -1}\n", "max_retries"},
      {"models:\n  - name: m\n    upstreams: [h:1]\n    api: grpc\n", "api"},
      {"models:\n  - name: m\n    upstreams: [h:1]\n    api_key: k\n    api_key_env: HOME\n", "api_key_env"},
      {"models:\n  - name: m\n    upstreams: [h:1]\n    api_key_env: CADENZA_TEST_UNSET_VARIABLE\n",
       "not set"},
      {"models:\n  - name: m\n    api: chat\n    versions:\n      - {version: a, upstreams: [h:1]}\n",
       "per version"},
      {"models:\n  - name: m\n    upstreams: [h:1]\nadmin_key_sha256: abc\n", "admin_key_sha256"},
      {"models:\n  - name: m\n    upstreams: [h:1]\nadmin_key_env: CADENZA_TEST_UNSET_VARIABLE\n",
       "not set"},
      {"models:\n  - name: m\n    upstreams: [h:1]\nmax_header_bytes: 10\n", "max_header_bytes"},
  };
  for (const auto& [yaml, needle] : cases) {
    auto c = parse_config(yaml, "test.yaml");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.error().find("test.yaml"), std::string::npos) << c.error();
    std::string lower = c.error();
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_NE(lower.find(needle), std::string::npos) << "'" << c.error() << "' lacks " << needle;
  }
}

TEST(GatewayConfig, UpstreamApiAndKey) {
  ::setenv("CADENZA_TEST_UPSTREAM_KEY", "from-env", 1);
  auto c = parse_config(
      "models:\n  - name: a\n    upstreams: [h:1]\n"
      "  - name: b\n    upstreams: [h:1]\n    api: chat\n    api_key: sk-1\n"
      "  - name: c\n    versions:\n      - {version: v, upstreams: [h:1], api: chat, "
      "api_key_env: CADENZA_TEST_UPSTREAM_KEY}\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->models[0].versions[0].api, UpstreamApi::cadenza);
  EXPECT_EQ(c->models[0].versions[0].api_key, "");
  EXPECT_EQ(c->models[1].versions[0].api, UpstreamApi::chat);
  EXPECT_EQ(c->models[1].versions[0].api_key, "sk-1");
  EXPECT_EQ(c->models[2].versions[0].api, UpstreamApi::chat);
  EXPECT_EQ(c->models[2].versions[0].api_key, "from-env");
}

TEST(GatewayConfig, AdminKeyFromTheEnvironmentIsStoredHashed) {
  ::setenv("CADENZA_TEST_ADMIN_KEY", "admin-key-0123456789abcdef", 1);
  ::setenv("CADENZA_TEST_SHORT_ADMIN_KEY", "short", 1);
  auto c = parse_config("models: [{name: a, upstreams: ['h:1']}]\nadmin_key_env: CADENZA_TEST_ADMIN_KEY\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->admin_key_sha256, sha256_hex("admin-key-0123456789abcdef"));
  auto short_key =
      parse_config("models: [{name: a, upstreams: ['h:1']}]\nadmin_key_env: CADENZA_TEST_SHORT_ADMIN_KEY\n");
  ASSERT_FALSE(short_key.ok());
  EXPECT_NE(short_key.error().find("shorter than 16"), std::string::npos) << short_key.error();
  EXPECT_FALSE(parse_config("models: [{name: a, upstreams: ['h:1']}]\nadmin_key_env: CADENZA_TEST_ADMIN_KEY\n"
                            "admin_key_sha256: " + sha256_hex("x") + "\n")
                   .ok());
  auto none = parse_config("models: [{name: a, upstreams: ['h:1']}]\n");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->admin_key_sha256, "");
}

TEST(GatewayConfig, HttpsUpstreamsAndTheirTlsSettings) {
  auto hp = parse_host_port("https://replica.example:8443/");
  ASSERT_TRUE(hp.ok()) << hp.error();
  EXPECT_TRUE(hp->tls);
  EXPECT_EQ(hp->host, "replica.example");
  EXPECT_EQ(hp->port, "8443");
  auto plain = parse_host_port("http://127.0.0.1:80");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  auto c = parse_config(
      "models:\n  - {name: a, upstreams: ['https://127.0.0.1:1'], ca_file: ca.pem, "
      "client_cert_file: c.pem, client_key_file: c.key, tls_server_name: r.internal}\n"
      "  - {name: b, upstreams: ['https://127.0.0.1:2'], tls_verify: false}\n"
      "  - {name: c, upstreams: ['127.0.0.1:3']}\n");
  ASSERT_TRUE(c.ok()) << c.error();
  const UpstreamTlsConfig& a = c->models[0].versions[0].tls;
  EXPECT_TRUE(a.enabled);
  EXPECT_TRUE(a.verify);
  EXPECT_EQ(a.ca_file, "ca.pem");
  EXPECT_EQ(a.cert_file, "c.pem");
  EXPECT_EQ(a.server_name, "r.internal");
  EXPECT_FALSE(c->models[1].versions[0].tls.verify);
  EXPECT_FALSE(c->models[2].versions[0].tls.enabled);
  for (const char* bad : {
           "models:\n  - {name: a, upstreams: ['https://h:1', 'h:2']}\n",  // mixed
           "models:\n  - {name: a, upstreams: ['h:1'], ca_file: x}\n",      // TLS key, plain
           "models:\n  - {name: a, upstreams: ['https://h:1'], client_cert_file: c}\n"}) {
    auto r = parse_config(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(GatewayAuth, XApiKeyIsAKeyToo) {
  // identify_caller reads `x-api-key` when there is no Authorization header.
  TenantConfig t;
  t.name = "t";
  t.key_sha256 = sha256_hex("k1");
  t.models = {"*"};
  Tenants tenants({t}, nullptr);
  boost::beast::http::fields h;
  h.set("x-api-key", "k1");
  Caller ok = identify_caller(tenants, h);
  ASSERT_FALSE(ok.refusal);
  EXPECT_EQ(ok.tenant->name(), "t");
  h.set("x-api-key", "k2");
  EXPECT_TRUE(identify_caller(tenants, h).refusal);
  h.erase("x-api-key");
  EXPECT_EQ(identify_caller(tenants, h).refusal->status, 401);
}

TEST(GatewayConfig, TheShippedExampleParses) {
  auto c = load_config(std::string(CADENZA_SOURCE_DIR) + "/deploy/gateway.example.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->models.size(), 2u);
  ASSERT_EQ(c->tenants.size(), 2u);
  EXPECT_EQ(c->tenants[0].key_sha256, sha256_hex("sk-acme-123"));  // as its comment says
}

TEST(GatewayConfig, MissingFileIsAnError) {
  auto c = load_config("/nonexistent/gateway.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("cannot open"), std::string::npos);
}

TEST(GatewayHashing, Sha256MatchesTheStandardVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(GatewayHashing, Hash64IsStableAndSpreads) {
  EXPECT_EQ(hash64("prefix"), hash64(std::string("prefix")));
  EXPECT_NE(hash64("a"), hash64("b"));
  std::set<uint64_t> top;
  for (int i = 0; i < 1000; ++i) top.insert(hash64("key" + std::to_string(i)) >> 60);
  EXPECT_EQ(top.size(), 16u);  // every top nibble is reached
}

TEST(GatewayRouter, LeastLoadedSkipsIneligibleAndRotatesTies) {
  std::vector<Candidate> c = {{3, true}, {1, true}, {0, false}, {1, true}};
  EXPECT_EQ(pick_least_loaded(c, 0), 1);
  EXPECT_EQ(pick_least_loaded(c, 2), 3);  // the tie between 1 and 3 starts at the rotation
  c[1].eligible = c[3].eligible = false;
  EXPECT_EQ(pick_least_loaded(c, 7), 0);
  c[0].eligible = false;
  EXPECT_EQ(pick_least_loaded(c, 0), -1);
  EXPECT_EQ(pick_least_loaded({}, 0), -1);
}

TEST(GatewayRouter, AffinityPrefersTheRingOwnerUntilItIsBusy) {
  const std::vector<std::string> ids = {"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"};
  HashRing ring(ids, 64);
  const uint64_t h = hash64("system prompt");
  const int owner = ring.owner(h);
  ASSERT_GE(owner, 0);
  std::vector<Candidate> c(3);
  c[static_cast<size_t>(owner)].outstanding = 2;  // busier than the others, but under the limit
  Pick p = pick_replica(ring, c, h, 4, 0);
  EXPECT_EQ(p.index, owner);
  EXPECT_TRUE(p.affine);
  c[static_cast<size_t>(owner)].outstanding = 4;  // busy: least loaded instead
  p = pick_replica(ring, c, h, 4, 0);
  EXPECT_NE(p.index, owner);
  EXPECT_FALSE(p.affine);
  // The owner down: the next member clockwise takes its keys, consistently.
  c[static_cast<size_t>(owner)] = {0, false};
  const int next = pick_replica(ring, c, h, 4, 0).index;
  EXPECT_NE(next, owner);
  EXPECT_EQ(pick_replica(ring, c, h, 4, 5).index, next);
  // No prefix: least loaded.
  std::vector<Candidate> d = {{2, true}, {0, true}, {1, true}};
  EXPECT_EQ(pick_replica(ring, d, std::nullopt, 4, 0).index, 1);
}

TEST(GatewayRouter, ConsistentHashingMovesOnlyTheKeysOfTheChangedMember) {
  std::vector<std::string> ids = {"a:1", "b:1", "c:1"};
  HashRing three(ids, 64), again(ids, 64);
  ids.push_back("d:1");
  HashRing four(ids, 64);
  const int kKeys = 20000;
  int moved = 0;
  std::map<int, int> load;
  for (int i = 0; i < kKeys; ++i) {
    const uint64_t h = hash64("prompt-" + std::to_string(i));
    const int o3 = three.owner(h), o4 = four.owner(h);
    ASSERT_EQ(o3, again.owner(h));  // same members, same owners
    ++load[o3];
    if (o3 != o4) {
      ++moved;
      EXPECT_EQ(o4, 3) << "a key moved between two old members";
    }
  }
  // About a quarter of the keys move to the new member, and the load is roughly even.
  EXPECT_GT(moved, kKeys / 8);
  EXPECT_LT(moved, kKeys * 3 / 8);
  for (const auto& [m, n] : load) {
    EXPECT_GT(n, kKeys / 6) << m;
    EXPECT_LT(n, kKeys / 2) << m;
  }
  // Removing a member (ineligible): only its keys move.
  for (int i = 0; i < kKeys; ++i) {
    const uint64_t h = hash64("prompt-" + std::to_string(i));
    const int before = three.owner(h);
    const int after = three.owner(h, [](int m) { return m != 1; });
    if (before != 1) EXPECT_EQ(before, after);
    else EXPECT_NE(after, 1);
  }
}

TEST(GatewayRouter, WeightedVersionChoice) {
  const std::vector<double> w = {90, 0, 10};
  EXPECT_EQ(pick_weighted(w, 0.0), 0);
  EXPECT_EQ(pick_weighted(w, 0.899), 0);
  EXPECT_EQ(pick_weighted(w, 0.901), 2);
  EXPECT_EQ(pick_weighted(w, 0.9999999), 2);
  EXPECT_EQ(pick_weighted(w, 1.0), 2);
  const std::vector<double> zero = {0, 0};
  EXPECT_EQ(pick_weighted(zero, 0.5), -1);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  int canary = 0;
  for (int i = 0; i < 10000; ++i) canary += pick_weighted(w, u(rng)) == 2;
  EXPECT_NEAR(canary, 1000, 150);
}

TEST(GatewayRouter, AffinityPrefixOfChatAndCompletions) {
  json chat = {{"messages",
                {{{"role", "system"}, {"content", "You are terse."}},
                 {{"role", "user"},
                  {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}}};
  EXPECT_EQ(affinity_prefix(chat, 1000), "system\nYou are terse.\nuser\nHi\n");
  EXPECT_EQ(affinity_prefix(chat, 10), "system\nYou");
  EXPECT_EQ(affinity_prefix(json{{"prompt", "abcdef"}}, 3), "abc");
  EXPECT_EQ(affinity_prefix(json{{"prompt", {"xyz", "q"}}}, 10), "xyz");
  EXPECT_EQ(affinity_prefix(json{{"prompt", {1, 2, 3}}}, 4), "[1,2");
  EXPECT_EQ(affinity_prefix(json{{"other", 1}}, 10), "");
  EXPECT_EQ(affinity_prefix(json::array(), 10), "");
}

TEST(GatewayTokenBucket, RefillsAtTheRateUpToTheBurst) {
  const auto t0 = TokenBucket::Clock::time_point{} + 1h;
  TokenBucket b(60, 5, t0);  // 1 per second, bucket of 5
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.try_take(1, t0), 0) << i;
  EXPECT_NEAR(b.try_take(1, t0), 1.0, 1e-9);  // empty: one second to the next
  EXPECT_NEAR(b.try_take(2, t0 + 500ms), 1.5, 1e-9);
  EXPECT_EQ(b.try_take(1, t0 + 1s), 0);
  EXPECT_NEAR(b.available(t0 + 1s), 0, 1e-9);
  EXPECT_NEAR(b.available(t0 + 100s), 5, 1e-9);  // capped at the burst
  EXPECT_EQ(b.try_take(6, t0 + 100s), -1);      // never fits
  // Reconciliation: give back, take more (down to -capacity at most).
  b.adjust(-20, t0 + 100s);
  EXPECT_NEAR(b.available(t0 + 100s), -5, 1e-9);
  EXPECT_NEAR(b.try_take(1, t0 + 100s), 6.0, 1e-9);
  b.adjust(100, t0 + 100s);
  EXPECT_NEAR(b.available(t0 + 100s), 5, 1e-9);
  TokenBucket unlimited(0, 0, t0);
  EXPECT_TRUE(unlimited.unlimited());
  EXPECT_EQ(unlimited.try_take(1e9, t0), 0);
}

TEST(GatewayTokenBucket, BurstDefaultsToThePerMinuteAmount) {
  const auto t0 = TokenBucket::Clock::time_point{} + 1h;
  TokenBucket b(120, 0, t0);
  EXPECT_EQ(b.capacity(), 120);
  EXPECT_EQ(b.try_take(120, t0), 0);
  EXPECT_NEAR(b.try_take(1, t0), 0.5, 1e-9);  // 2 per second
}

TEST(GatewayTenants, KeysAreMatchedByHashAndLimitsApplyToBoth) {
  TenantConfig t;
  t.name = "acme";
  t.key_sha256 = sha256_hex("sk-acme");
  t.models = {"qwen", "llama@v2"};
  t.requests_per_minute = 60;
  t.request_burst = 2;
  t.tokens_per_minute = 600;
  t.token_burst = 100;
  Tenants ts({t}, nullptr);
  EXPECT_TRUE(ts.enabled());
  EXPECT_EQ(ts.find_by_key("sk-other"), nullptr);
  EXPECT_EQ(ts.find_by_key(""), nullptr);
  auto acme = ts.find_by_key("sk-acme");
  ASSERT_NE(acme, nullptr);
  EXPECT_TRUE(acme->allows("qwen", "qwen", "qwen@stable"));
  EXPECT_TRUE(acme->allows("default", "qwen", "qwen@stable"));
  EXPECT_TRUE(acme->allows("llama@v2", "llama", "llama@v2"));
  EXPECT_FALSE(acme->allows("llama", "llama", "llama@v1"));
  const auto t0 = TokenBucket::Clock::now();
  EXPECT_TRUE(acme->admit(60, t0).ok);
  // Tokens short: the request is not taken either.
  Admission a = acme->admit(60, t0);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.limit, "tokens");
  EXPECT_NEAR(a.retry_after_s, 2.0, 1e-6);  // 20 missing at 10/s
  // Reconcile: only 10 of the 60 reserved were used.
  acme->reconcile(60, 10, t0);
  EXPECT_TRUE(acme->admit(60, t0).ok);  // the second request of the burst
  a = acme->admit(1, t0);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.limit, "requests");
  // A reload with the same limits keeps the buckets; changed limits start fresh.
  Tenants same({t}, &ts);
  EXPECT_EQ(same.find_by_key("sk-acme"), acme);
  t.requests_per_minute = 120;
  Tenants changed({t}, &ts);
  EXPECT_NE(changed.find_by_key("sk-acme"), acme);
  EXPECT_TRUE(changed.find_by_key("sk-acme")->admit(1, t0).ok);
  EXPECT_FALSE(Tenants({}, nullptr).enabled());
}

// GET /v1/models and the generation routes share one key check; with tenants every call needs one.
TEST(GatewayTenants, CallersAreIdentifiedByTheirBearerKey) {
  TenantConfig t;
  t.name = "acme";
  t.key_sha256 = sha256_hex("sk-acme");
  const Tenants ts({t}, nullptr);
  auto with = [](const std::string& authorization) {
    boost::beast::http::fields h;
    if (!authorization.empty()) h.set(boost::beast::http::field::authorization, authorization);
    return h;
  };
  Caller ok = identify_caller(ts, with("Bearer sk-acme"));
  ASSERT_NE(ok.tenant, nullptr);
  EXPECT_EQ(ok.tenant->name(), "acme");
  EXPECT_FALSE(ok.refusal);
  EXPECT_NE(identify_caller(ts, with("bearer sk-acme")).tenant, nullptr);  // scheme: any case
  for (const char* bad : {"", "Bearer ", "Bearer sk-other", "sk-acme", "Basic c2stYWNtZQ=="}) {
    Caller c = identify_caller(ts, with(bad));
    EXPECT_EQ(c.tenant, nullptr) << bad;
    ASSERT_TRUE(c.refusal) << bad;
    EXPECT_EQ(c.refusal->status, 401) << bad;
    EXPECT_EQ(json::parse(c.refusal->body)["error"]["code"], "invalid_api_key") << bad;
  }
  // Without tenants nobody needs a key.
  const Tenants none({}, nullptr);
  Caller anyone = identify_caller(none, with(""));
  EXPECT_EQ(anyone.tenant, nullptr);
  EXPECT_FALSE(anyone.refusal);
}

TEST(GatewayTenants, ModelListShowsOnlyWhatTheTenantMayUse) {
  auto cfg = parse_config(fmt::format(
      "default_model: qwen\n"
      "models:\n"
      "  - name: qwen\n"
      "    versions:\n"
      "      - {{version: stable, weight: 9, upstreams: ['127.0.0.1:8001']}}\n"
      "      - {{version: canary, weight: 1, upstreams: ['127.0.0.1:8002']}}\n"
      "      - {{version: dark, weight: 0, upstreams: ['127.0.0.1:8003']}}\n"
      "  - {{name: llama, upstreams: ['127.0.0.1:8004']}}\n"
      "tenants:\n"
      "  - {{name: all, key_sha256: {}}}\n"
      "  - {{name: llama-only, key_sha256: {}, models: [llama]}}\n"
      "  - {{name: stable-only, key_sha256: {}, models: ['qwen@stable']}}\n"
      "  - {{name: no-dark, key_sha256: {}, models: ['qwen@stable', 'qwen@canary']}}\n"
      "  - {{name: by-default, key_sha256: {}, models: [default]}}\n"
      "  - {{name: nothing, key_sha256: {}, models: [gone]}}\n",
      sha256_hex("a"), sha256_hex("l"), sha256_hex("s"), sha256_hex("n"), sha256_hex("d"),
      sha256_hex("x")));
  ASSERT_TRUE(cfg.ok()) << cfg.error();
  UpstreamRegistry registry;
  auto st = build_state(*cfg, nullptr, registry);
  ASSERT_TRUE(st.ok()) << st.error();
  using Ids = std::vector<std::string>;
  const Ids everything = {"default", "llama", "qwen", "qwen@stable", "qwen@canary", "qwen@dark"};
  EXPECT_EQ((*st)->model_ids(nullptr), everything);  // tenants off: all of them
  auto ids = [&](const char* key) {
    return (*st)->model_ids((*st)->tenants->find_by_key(key).get());
  };
  EXPECT_EQ(ids("a"), everything);  // models: ["*"]
  EXPECT_EQ(ids("l"), (Ids{"llama"}));
  // A bare name (and default) may pick any version of weight > 0: listed only when all are allowed.
  EXPECT_EQ(ids("s"), (Ids{"qwen@stable"}));
  EXPECT_EQ(ids("n"), (Ids{"default", "qwen", "qwen@stable", "qwen@canary"}));
  EXPECT_EQ(ids("d"), (Ids{"default"}));
  EXPECT_EQ(ids("x"), Ids{});
}

TEST(GatewayCache, LruEvictsTheLeastRecentlyUsedAndExpires) {
  const auto t0 = LruCache::Clock::time_point{} + 1h;
  LruCache c(2, 10s);
  c.put("a", "A", t0);
  c.put("b", "B", t0);
  EXPECT_EQ(c.get("a", t0 + 1s), "A");  // a is now the most recent
  c.put("c", "C", t0 + 2s);              // evicts b
  EXPECT_EQ(c.get("b", t0 + 2s), std::nullopt);
  EXPECT_EQ(c.get("a", t0 + 2s), "A");
  EXPECT_EQ(c.get("c", t0 + 2s), "C");
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.get("a", t0 + 10s), std::nullopt);  // stored at t0, TTL 10 s
  EXPECT_EQ(c.get("c", t0 + 11s), "C");
  EXPECT_EQ(c.size(), 1u);
  c.put("c", "C2", t0 + 11s);  // overwrite refreshes the TTL
  EXPECT_EQ(c.get("c", t0 + 20s), "C2");
  EXPECT_EQ(c.get("c", t0 + 21s), std::nullopt);
}

TEST(GatewayCache, StructuredOutputAndToolFieldsArePartOfTheKey) {
  // Issue 17: a cached answer to a request with another schema, grammar or tool set would be
  // wrong (invalid JSON for this schema, a call of a tool the client does not have).
  const json base = json::parse(
      R"({"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}]})");
  const auto kb = cache_key(base, "chat", "m@v1");
  ASSERT_TRUE(kb.has_value());
  const std::vector<std::pair<std::string, json>> fields = {
      {"response_format", {{"type", "json_object"}}},
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}}}}}}},
      {"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})},
      {"tool_choice", "required"},
      {"parallel_tool_calls", false},
      {"grammar", "root ::= \"a\""},
      {"guided_regex", "[0-9]+"},
      {"chat_template_kwargs", {{"enable_thinking", false}}},
  };
  std::set<std::string> keys;
  for (const auto& [field, value] : fields) {
    json r = base;
    r[field] = value;
    auto k = cache_key(r, "chat", "m@v1");
    ASSERT_TRUE(k.has_value()) << field;
    EXPECT_NE(k, kb) << field;
    EXPECT_TRUE(keys.insert(*k).second) << field << " collides";
  }
}

TEST(GatewayCache, KeysNormaliseTheRequestAndSkipNondeterministicOnes) {
  json a = json::parse(R"({"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}],"max_tokens":4})");
  json b = json::parse(R"({"max_tokens":4, "messages":[{"content":"hi","role":"user"}], "temperature":0.0, "model":"other-alias","user":"u1"})");
  auto ka = cache_key(a, "chat", "m@v1");
  ASSERT_TRUE(ka.has_value());
  EXPECT_EQ(ka, cache_key(b, "chat", "m@v1"));       // key order, spacing, model, user
  EXPECT_NE(ka, cache_key(a, "chat", "m@v2"));       // another version
  EXPECT_NE(ka, cache_key(a, "completions", "m@v1"));
  json c = a;
  c["max_tokens"] = 5;
  EXPECT_NE(ka, cache_key(c, "chat", "m@v1"));
  json hot = a;
  hot["temperature"] = 0.7;
  EXPECT_FALSE(cache_key(hot, "chat", "m@v1").has_value());
  hot["seed"] = 42;  // a fixed seed makes it deterministic
  EXPECT_TRUE(cache_key(hot, "chat", "m@v1").has_value());
  json stream = a;
  stream["stream"] = true;
  EXPECT_FALSE(cache_key(stream, "chat", "m@v1").has_value());
  json many = a;
  many["n"] = 2;
  EXPECT_FALSE(cache_key(many, "chat", "m@v1").has_value());
  json none = a;
  none.erase("temperature");  // OpenAI's default temperature is 1
  EXPECT_FALSE(cache_key(none, "chat", "m@v1").has_value());
}

TEST(GatewayBreaker, OpensAfterConsecutiveFailuresAndProbesHalfOpen) {
  Upstream u("127.0.0.1:1", {});
  const BreakerSettings s{3, 1000, 4000};
  const auto t0 = Clock::now();
  EXPECT_TRUE(u.eligible(t0));
  EXPECT_FALSE(u.on_failure(t0, s));
  EXPECT_FALSE(u.on_failure(t0, s));
  u.on_success();  // resets the count
  EXPECT_FALSE(u.on_failure(t0, s));
  EXPECT_FALSE(u.on_failure(t0, s));
  EXPECT_TRUE(u.on_failure(t0, s));  // third in a row: open
  EXPECT_FALSE(u.eligible(t0 + 999ms));
  EXPECT_TRUE(u.eligible(t0 + 1000ms));  // ready for a probe
  u.on_dispatch(t0 + 1000ms);            // half-open: one probe only
  EXPECT_FALSE(u.eligible(t0 + 1000ms));
  EXPECT_TRUE(u.on_failure(t0 + 1100ms, s));  // probe failed: open for twice as long
  EXPECT_FALSE(u.eligible(t0 + 3000ms));
  EXPECT_TRUE(u.eligible(t0 + 3100ms));
  u.on_dispatch(t0 + 3100ms);
  u.on_success();
  EXPECT_TRUE(u.eligible(t0 + 3100ms));
  u.healthy = false;  // the active check overrides
  EXPECT_FALSE(u.eligible(t0 + 3100ms));
}

TEST(GatewayMetricsText, CountersAndHistogramsInPrometheusFormat) {
  GatewayMetrics m;
  m.inc("cadenza_gateway_requests_total", {{"route", "chat"}, {"status", "200"}});
  m.inc("cadenza_gateway_requests_total", {{"route", "chat"}, {"status", "200"}});
  m.inc("cadenza_gateway_requests_total", {{"route", "a\"b"}, {"status", "429"}});
  m.observe("cadenza_gateway_upstream_latency_seconds", {{"upstream", "u:1"}}, 0.003);
  m.observe("cadenza_gateway_upstream_latency_seconds", {{"upstream", "u:1"}}, 100);
  EXPECT_EQ(m.value("cadenza_gateway_requests_total", {{"route", "chat"}, {"status", "200"}}), 2);
  const std::string t = m.render();
  EXPECT_NE(t.find("# TYPE cadenza_gateway_requests_total counter"), std::string::npos);
  EXPECT_NE(t.find("cadenza_gateway_requests_total{route=\"chat\",status=\"200\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("route=\"a\\\"b\""), std::string::npos);
  EXPECT_NE(t.find("cadenza_gateway_upstream_latency_seconds_bucket{upstream=\"u:1\",le=\"0.005\"} 1\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("cadenza_gateway_upstream_latency_seconds_bucket{upstream=\"u:1\",le=\"+Inf\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("cadenza_gateway_upstream_latency_seconds_count{upstream=\"u:1\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("cadenza_gateway_cache_hits_total 0\n"), std::string::npos);
}

}  // namespace
}  // namespace cadenza::gateway

namespace cadenza::gateway {
namespace {

TEST(GatewayResponseAffinity, RemembersPerTenantAndForgetsTheOldestBeyondCapacity) {
  ResponseAffinity a(2);
  a.remember("resp_1", {"10.0.0.1:8080", "tiny"}, "");
  a.remember("resp_2", {"10.0.0.2:8080", "tiny"}, "acme");
  EXPECT_EQ(a.find("resp_1", ""), (ResponseHome{"10.0.0.1:8080", "tiny"}));
  EXPECT_EQ(a.find("resp_2", "acme"), (ResponseHome{"10.0.0.2:8080", "tiny"}));
  EXPECT_EQ(a.find("resp_2", "other"), std::nullopt);  // another tenant's response
  EXPECT_EQ(a.find("resp_9", ""), std::nullopt);
  a.remember("resp_3", {"10.0.0.3:8080", "tiny"}, "");  // over capacity: resp_1 goes
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a.find("resp_1", ""), std::nullopt);
  EXPECT_EQ(a.find("resp_3", ""), (ResponseHome{"10.0.0.3:8080", "tiny"}));
  a.remember("resp_2", {"10.0.0.4:8080", "tiny"}, "acme");  // again: moved, not duplicated
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a.find("resp_2", "acme"), (ResponseHome{"10.0.0.4:8080", "tiny"}));
  a.forget("resp_2", "other");  // not that tenant's
  EXPECT_EQ(a.size(), 2u);
  a.forget("resp_2", "acme");
  EXPECT_EQ(a.find("resp_2", "acme"), std::nullopt);
  EXPECT_EQ(a.size(), 1u);
}

TEST(GatewayResponseAffinity, FindsTheIdInABodyOrAStreamsFirstEvent) {
  EXPECT_EQ(find_response_id(R"({"id":"resp_ab12-x_Y","object":"response"})"), "resp_ab12-x_Y");
  EXPECT_EQ(find_response_id("event: response.created\ndata: {\"type\":\"response.created\","
                             "\"response\":{\"id\":\"resp_0f\",\"object\":\"response\"}}\n\n"),
            "resp_0f");
  EXPECT_EQ(find_response_id(R"({"id":"resp_ab)"), std::nullopt);  // cut inside the id
  EXPECT_EQ(find_response_id(R"({"id":"resp_"})"), std::nullopt);
  EXPECT_EQ(find_response_id(R"({"id":"msg_1"})"), std::nullopt);
  EXPECT_EQ(find_response_id(""), std::nullopt);
}

}  // namespace
}  // namespace cadenza::gateway
