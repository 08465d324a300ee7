// End-to-end tests of the gateway's security: request size limits (413/431), the admin key and
// the audit log, TLS on the listeners and to the upstreams (mutual TLS included), with a PKI the
// test makes with the openssl command at run time.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_upstream.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"
#include "gateway_test_util.h"
#include "replica_process.h"
#include "test_client.h"

namespace cadenza::gateway {
namespace {

using nlohmann::json;
using server::testing::Client;
using server::testing::Response;
using testing::chat;
using testing::eventually;
using testing::FakeUpstream;
using testing::GatewayProcess;
using testing::ReplicaProcess;
using testing::start_gateway;

// Request size limits: a body over max_body_bytes gets 413, headers over max_header_bytes 431,
// both in OpenAI's error shape; requests under the limits pass.
TEST(GatewayLimits, OversizedBodiesAndHeadersGet413And431InTheOpenAIShape) {
  FakeUpstream fake(FakeUpstream::Mode::flood);
  auto gw = start_gateway(fmt::format(
      "models:\n  - name: tiny\n    upstreams: [127.0.0.1:{}]\naccess_log: false\n"
      "max_body_bytes: 4096\nmax_header_bytes: 2048\n",
      fake.port()));
  ASSERT_NE(gw, nullptr);
  const uint16_t port = gw->ports()[0];
  json body = chat("s", std::string(5000, 'x'), 2);
  Response big = Client(port).post("/v1/chat/completions", body);
  EXPECT_EQ(big.status, 413) << big.body;
  EXPECT_EQ(big.json()["error"]["code"], "request_too_large") << big.body;
  EXPECT_EQ(big.json()["error"]["type"], "invalid_request_error") << big.body;
  EXPECT_TRUE(big.json()["error"].contains("param")) << big.body;

  Response fat = Client(port).request("GET", "/health", "", {{"X-Padding", std::string(3000, 'p')}});
  EXPECT_EQ(fat.status, 431) << fat.body;
  EXPECT_EQ(fat.json()["error"]["code"], "request_headers_too_large") << fat.body;
  EXPECT_EQ(fat.json()["error"]["type"], "invalid_request_error") << fat.body;

  EXPECT_EQ(Client(port).request("GET", "/health", "", {{"X-Padding", std::string(1000, 'p')}}).status,
            200);
  EXPECT_FALSE(parse_config("models: [{name: a, upstreams: ['h:1']}]\nmax_header_bytes: 10\n").ok());
}

// The admin endpoints: behind the admin key (401 without one, 403 with a wrong one), reload and
// the tenants' buckets; an audit line per refusal and per action, and no key anywhere in the log.
TEST(GatewayAdmin, AdminKeyGuardsReloadAndTenantsAndTheAuditLogNeverHoldsAKey) {
  FakeUpstream a(FakeUpstream::Mode::answer);
  const std::string admin_key = "adm-9f8e7d6c5b4a39281706";
  const std::string tenant_key = "sk-tenant-5b4a392817";
  const std::string wrong_keys[] = {"sk-wrong-guess-aaaa11", "adm-wrong-guess-bbbb22"};
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gateway-admin-" + std::to_string(::getpid()) + ".yaml"))
                               .string();
  auto write_config = [&](int requests_per_minute) {
    std::ofstream(path) << fmt::format(
        "listeners: [{{host: 127.0.0.1, port: 0}}]\n"
        "models:\n  - name: tiny\n    upstreams: [127.0.0.1:{}]\n"
        "admin_key_sha256: {}\n"
        "tenants:\n  - {{name: acme, key_sha256: {}, requests_per_minute: {}}}\n"
        "cache: {{backend: off}}\n",
        a.port(), sha256_hex(admin_key), sha256_hex(tenant_key), requests_per_minute);
  };
  // 1 request a minute: the bucket (1 request) takes a minute to refill the request taken below,
  // so the tenants read still shows it taken however slow the machine (at 60 a minute, one second
  // of ASan on a loaded machine between the two refilled it, and the read showed a full bucket).
  write_config(1);
  auto gw = GatewayProcess::start(path, "admin");
  ASSERT_NE(gw, nullptr);
  Client c(gw->port());
  auto bearer = [](const std::string& k) {
    return std::map<std::string, std::string>{{"Authorization", "Bearer " + k}};
  };
  EXPECT_EQ(c.post("/v1/chat/completions", chat("s", "admin", 1), bearer(tenant_key)).status, 200);
  EXPECT_EQ(c.post("/v1/chat/completions", chat("s", "admin", 1), bearer(wrong_keys[0])).status,
            401);
  Response none = c.get("/admin/tenants");
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.json()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(c.request("GET", "/admin/tenants", "", bearer(wrong_keys[1])).status, 403);
  // A tenant's key is not the admin key.
  EXPECT_EQ(c.request("GET", "/admin/tenants", "", bearer(tenant_key)).status, 403);

  Response tenants = c.request("GET", "/admin/tenants", "", bearer(admin_key));
  ASSERT_EQ(tenants.status, 200) << tenants.body;
  const json t = tenants.json()["tenants"];
  ASSERT_EQ(t.size(), 1u) << tenants.body;
  EXPECT_EQ(t[0]["name"], "acme");
  EXPECT_EQ(t[0]["requests"]["per_minute"], 1);
  EXPECT_LT(t[0]["requests"]["available"].get<double>(), 1);  // one request was taken
  EXPECT_TRUE(t[0]["tokens"].is_null());                       // unlimited

  write_config(120);
  EXPECT_EQ(c.request("GET", "/admin/reload", "", bearer(admin_key)).status, 405);
  Response reloaded = c.request("POST", "/admin/reload", "", bearer(admin_key));
  EXPECT_EQ(reloaded.status, 200) << reloaded.body;
  EXPECT_EQ(c.request("GET", "/admin/tenants", "", bearer(admin_key))
                .json()["tenants"][0]["requests"]["per_minute"],
            120);
  EXPECT_EQ(c.request("GET", "/admin/nothing", "", bearer(admin_key)).status, 404);

  // The audit lines: 1 tenant failure; 3 admin refusals (no key, a wrong key, a tenant's key);
  // 3 admin actions (2 tenants reads, 1 reload; the 405 and the 404 are no actions).
  std::string log;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(gw->log());
    std::stringstream ss;
    ss << in.rdbuf();
    log = ss.str();
    return log.find("\"action\":\"reload\"") != std::string::npos &&
           log.find("\"action\":\"tenants\"") != std::string::npos;
  })) << log;
  // The whole log is read once the gateway has exited (its last lines written): a gateway still
  // running (an ASan build on a loaded machine can take a while) is a failure, not a short read.
  gw->signal(SIGTERM);
  ASSERT_EQ(gw->wait_exit(60000), 0) << "the gateway did not exit cleanly after SIGTERM; see "
                                     << gw->log();
  {
    std::ifstream in(gw->log());
    std::stringstream ss;
    ss << in.rdbuf();
    log = ss.str();
  }
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("audit {\"event\":\"auth_failed\",\"scope\":\"tenant\""), 1u) << log;
  EXPECT_EQ(count("audit {\"event\":\"auth_failed\",\"scope\":\"admin\""), 3u) << log;
  EXPECT_EQ(count("audit {\"event\":\"admin_action\""), 3u) << log;
  EXPECT_GT(count(sha256_hex(wrong_keys[0]).substr(0, 8)), 0u) << log;
  for (const std::string& key : {admin_key, tenant_key, wrong_keys[0], wrong_keys[1]}) {
    EXPECT_EQ(log.find(key), std::string::npos) << "a key in the log: " << key;
    EXPECT_EQ(log.find(sha256_hex(key)), std::string::npos) << "a full key hash in the log";
  }
  std::filesystem::remove(path);
}

// A test PKI made with the openssl command at run time (keys are never committed): a CA, a
// server certificate for 127.0.0.1 and localhost, a client certificate, and another CA that
// signed nothing here.
struct TestPki {
  std::filesystem::path dir;
  bool ok = false;
  TestPki() {
    dir = std::filesystem::temp_directory_path() / ("gateway-pki-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string d = dir.string();
    std::ofstream(dir / "server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    std::ofstream(dir / "client.ext") << "extendedKeyUsage=clientAuth\n";
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string cmd = fmt::format(
        "cd {0} && "
        "openssl req -x509 {1} -keyout ca.key -out ca.pem -days 2 -subj /CN=cadenza-test-ca && "
        "openssl req -x509 {1} -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=other-ca && "
        "openssl req {1} -keyout server.key -out server.csr -subj /CN=localhost && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile server.ext -out server.pem && "
        "openssl req {1} -keyout client.key -out client.csr -subj /CN=cadenza-gateway && "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile client.ext -out client.pem",
        d, key);
    ok = std::system(("(" + cmd + ") >" + d + "/openssl.log 2>&1").c_str()) == 0;
  }
  ~TestPki() { std::filesystem::remove_all(dir); }
  std::string operator()(const char* name) const { return (dir / name).string(); }
};

// POST /admin/cache/clear: behind the admin key; drops the LRU cache's entries (the count in the
// answer and the audit line), after which the same deterministic request goes to a replica again;
// with the cache off it is a 409.
TEST(GatewayAdmin, CacheClearDropsTheResponseCacheBehindTheAdminKey) {
  FakeUpstream a(FakeUpstream::Mode::answer);
  const std::string admin_key = "adm-cache-0a1b2c3d4e5f6071";
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gateway-cache-clear-" + std::to_string(::getpid()) + ".yaml"))
                               .string();
  auto config = [&](const char* cache) {
    std::ofstream(path) << fmt::format(
        "listeners: [{{host: 127.0.0.1, port: 0}}]\n"
        "models:\n  - name: tiny\n    upstreams: [127.0.0.1:{}]\n"
        "admin_key_sha256: {}\ncache: {}\n",
        a.port(), sha256_hex(admin_key), cache);
  };
  config("{backend: lru, ttl_s: 300}");
  auto gw = GatewayProcess::start(path, "cache-clear");
  ASSERT_NE(gw, nullptr);
  Client c(gw->port());
  const std::map<std::string, std::string> admin{{"Authorization", "Bearer " + admin_key}};
  json one = chat("s", "cached one", 2), two = chat("s", "cached two", 2);
  one["temperature"] = 0;
  two["temperature"] = 0;
  for (const json& body : {one, two}) {
    ASSERT_EQ(c.post("/v1/chat/completions", body).status, 200);
    Response again = c.post("/v1/chat/completions", body);
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(again.header("x-cache"), "hit");
  }
  EXPECT_EQ(c.post("/admin/cache/clear", json::object()).status, 401);
  EXPECT_EQ(c.request("GET", "/admin/cache/clear", "", admin).status, 405);
  Response cleared = c.request("POST", "/admin/cache/clear", "", admin);
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.json()["dropped"], 2) << cleared.body;
  EXPECT_EQ(cleared.json()["backend"], "lru") << cleared.body;
  Response after = c.post("/v1/chat/completions", one);
  ASSERT_EQ(after.status, 200);
  EXPECT_EQ(after.header("x-cache"), "") << "answered from a cache that was cleared";
  EXPECT_EQ(c.request("POST", "/admin/cache/clear", "", admin).json()["dropped"], 1);

  config("{backend: off}");
  ASSERT_EQ(c.request("POST", "/admin/reload", "", admin).status, 200);
  Response off = c.request("POST", "/admin/cache/clear", "", admin);
  EXPECT_EQ(off.status, 409) << off.body;
  EXPECT_EQ(off.json()["error"]["code"], "cache_off") << off.body;
  std::string log;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(gw->log());
    std::stringstream ss;
    ss << in.rdbuf();
    log = ss.str();
    return log.find("\"result\":\"no_cache\"") != std::string::npos;
  })) << log;
  EXPECT_NE(log.find("\"action\":\"cache_clear\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"dropped\":2"), std::string::npos) << log;
  EXPECT_EQ(log.find(admin_key), std::string::npos) << "the admin key is in the log";
  std::filesystem::remove(path);
}

// TLS to upstreams: a real `cadenza serve --ssl-certfile/--ssl-keyfile` replica reached at
// https://127.0.0.1:PORT with the test CA (200, streams too); the wrong CA and a wrong server
// name are refused (502 upstream_tls_error naming the reason); tls_verify: false passes; a
// replica requiring client certificates (--ssl-ca-certs) serves the gateway that presents one
// and not the one that does not.
TEST(GatewayTls, UpstreamsOverTlsAreVerifiedAndMutualTlsWorks) {
  ASSERT_EQ(std::system("openssl version >/dev/null 2>&1"), 0)
      << "the openssl command is missing (scripts/setup.sh --test installs it)";
  TestPki pki;
  ASSERT_TRUE(pki.ok) << "see " << pki("openssl.log");
  auto tls = ReplicaProcess::start(
      "tls", {"--ssl-certfile", pki("server.pem"), "--ssl-keyfile", pki("server.key")});
  ASSERT_NE(tls, nullptr);
  auto mtls = ReplicaProcess::start("mtls", {"--ssl-certfile", pki("server.pem"), "--ssl-keyfile",
                                             pki("server.key"), "--ssl-ca-certs", pki("ca.pem")});
  ASSERT_NE(mtls, nullptr);
  const std::string t = fmt::format("https://127.0.0.1:{}", tls->port());
  const std::string m = fmt::format("https://127.0.0.1:{}", mtls->port());
  const std::string yaml = fmt::format(
      "models:\n"
      "  - {{name: good, upstream_model: tiny, upstreams: ['{0}'], ca_file: '{2}'}}\n"
      "  - {{name: wrongca, upstream_model: tiny, upstreams: ['{0}'], ca_file: '{3}'}}\n"
      "  - {{name: wrongname, upstream_model: tiny, upstreams: ['{0}'], ca_file: '{2}', "
      "tls_server_name: other.example}}\n"
      "  - {{name: noverify, upstream_model: tiny, upstreams: ['{0}'], ca_file: '{3}', "
      "tls_verify: false}}\n"
      "  - {{name: mtls, upstream_model: tiny, upstreams: ['{1}'], ca_file: '{2}', "
      "client_cert_file: '{4}', client_key_file: '{5}'}}\n"
      "  - {{name: nocert, upstream_model: tiny, upstreams: ['{1}'], ca_file: '{2}'}}\n"
      "health: {{interval_ms: 0}}\nrouting: {{max_retries: 0}}\ncache: {{backend: off}}\n",
      t, m, pki("ca.pem"), pki("other-ca.pem"), pki("client.pem"), pki("client.key"));
  auto gw = start_gateway(yaml);
  ASSERT_NE(gw, nullptr);
  Client c(gw->ports()[0]);
  auto ask = [&](const std::string& model, bool stream = false) {
    json body = chat("s", "tls", 2);
    body["model"] = model;
    if (stream) body["stream"] = true;
    return Client(gw->ports()[0]).post("/v1/chat/completions", body);
  };
  // The replicas were not waited for (HTTPS): wait through the gateway.
  ASSERT_TRUE(eventually([&] { return ask("good").status == 200; }, std::chrono::seconds(60)));
  ASSERT_TRUE(eventually([&] { return ask("mtls").status == 200; }, std::chrono::seconds(60)));

  Response good = ask("good");
  EXPECT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(good.json()["object"], "chat.completion") << good.body;
  Response streamed = ask("mtls", true);
  EXPECT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_NE(streamed.body.find("data: [DONE]"), std::string::npos) << streamed.body;

  Response wrong_ca = ask("wrongca");
  EXPECT_EQ(wrong_ca.status, 502) << wrong_ca.body;
  EXPECT_EQ(wrong_ca.json()["error"]["code"], "upstream_tls_error") << wrong_ca.body;
  EXPECT_NE(wrong_ca.body.find("certificate verify failed"), std::string::npos) << wrong_ca.body;
  Response wrong_name = ask("wrongname");
  EXPECT_EQ(wrong_name.status, 502) << wrong_name.body;
  EXPECT_EQ(wrong_name.json()["error"]["code"], "upstream_tls_error") << wrong_name.body;
  Response unverified = ask("noverify");
  EXPECT_EQ(unverified.status, 200) << unverified.body;

  // Without a client certificate the mTLS replica refuses the connection (in TLS 1.3 after
  // the client's side of the handshake completed, so it may show as a failed read).
  Response nocert = ask("nocert");
  EXPECT_GE(nocert.status, 500) << nocert.body;
  EXPECT_GT(gw->metrics().value("cadenza_gateway_upstream_requests_total",
                                {{"upstream", fmt::format("127.0.0.1:{}", tls->port())},
                                 {"outcome", "tls_error"}}),
            0);

  // Bad TLS settings are configuration errors naming the field.
  auto bad = parse_config(fmt::format("models:\n  - {{name: a, upstreams: ['{}'], ca_file: /nonexistent.pem}}\n", t));
  ASSERT_TRUE(bad.ok()) << bad.error();  // the file is read when the state is built
  auto made = Gateway::create(*bad);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().find("ca_file"), std::string::npos) << made.error();
  EXPECT_FALSE(parse_config("models:\n  - {name: a, upstreams: ['h:1'], ca_file: x.pem}\n").ok());
  EXPECT_FALSE(parse_config("models:\n  - {name: a, upstreams: ['https://h:1', 'h:2']}\n").ok());
}

// Runs a shell command; its stdout, and whether it exited 0.
std::pair<bool, std::string> run_capture(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!f) return {false, out};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return {::pclose(f) == 0, out};
}

// HTTPS on the gateway's own listeners (curl as the client): one listener with a certificate,
// one that also requires client certificates; plain HTTP to the TLS port gets nothing; a bad
// certificate file is a start error naming the listener.
TEST(GatewayTls, ListenersServeHttpsAndCanRequireClientCertificates) {
  ASSERT_EQ(std::system("openssl version >/dev/null 2>&1"), 0)
      << "the openssl command is missing (scripts/setup.sh --test installs it)";
  ASSERT_EQ(std::system("curl --version >/dev/null 2>&1"), 0)
      << "curl is missing (scripts/setup.sh --test installs it)";
  TestPki pki;
  ASSERT_TRUE(pki.ok) << "see " << pki("openssl.log");
  FakeUpstream fake(FakeUpstream::Mode::answer);
  auto gw = start_gateway(fmt::format(
      "listeners:\n"
      "  - {{host: 127.0.0.1, port: 0, ssl_certfile: '{0}', ssl_keyfile: '{1}'}}\n"
      "  - {{host: 127.0.0.1, port: 0, ssl_certfile: '{0}', ssl_keyfile: '{1}', ssl_ca_certs: '{2}'}}\n"
      "models:\n  - name: tiny\n    upstreams: [127.0.0.1:{3}]\naccess_log: false\n",
      pki("server.pem"), pki("server.key"), pki("ca.pem"), fake.port()));
  ASSERT_NE(gw, nullptr);
  const uint16_t tls_port = gw->ports()[0], mtls_port = gw->ports()[1];
  const std::string curl = "curl -sS --max-time 20 --cacert " + pki("ca.pem");
  auto health = run_capture(fmt::format("{} https://127.0.0.1:{}/health", curl, tls_port));
  EXPECT_TRUE(health.first);
  EXPECT_EQ(health.second, R"({"status":"ok"})");
  const std::string body = chat("s", "https", 1).dump();
  auto post = run_capture(fmt::format(
      "{} -H 'Content-Type: application/json' -d '{}' https://127.0.0.1:{}/v1/chat/completions",
      curl, body, tls_port));
  EXPECT_TRUE(post.first) << post.second;
  EXPECT_NE(post.second.find("chat.completion"), std::string::npos) << post.second;
  // The wrong CA: curl refuses the gateway's certificate.
  EXPECT_FALSE(run_capture(fmt::format("curl -sS --max-time 20 --cacert {} https://127.0.0.1:{}/health",
                                       pki("other-ca.pem"), tls_port))
                   .first);
  // Mutual TLS: no client certificate, no answer; with one, the answer.
  EXPECT_FALSE(run_capture(fmt::format("{} https://127.0.0.1:{}/health", curl, mtls_port)).first);
  auto with_cert = run_capture(fmt::format("{} --cert {} --key {} https://127.0.0.1:{}/health", curl,
                                           pki("client.pem"), pki("client.key"), mtls_port));
  EXPECT_TRUE(with_cert.first);
  EXPECT_EQ(with_cert.second, R"({"status":"ok"})");
  // Plain HTTP to the TLS port is not answered as HTTP.
  EXPECT_FALSE(run_capture(fmt::format("curl -sS --max-time 5 -o /dev/null -w '%{{http_code}}' "
                                       "http://127.0.0.1:{}/health | grep -q 200",
                                       tls_port))
                   .first);

  auto bad = parse_config(fmt::format(
      "listeners: [{{host: 127.0.0.1, port: 0, ssl_certfile: /nonexistent.pem, ssl_keyfile: '{}'}}]\n"
      "models: [{{name: a, upstreams: ['127.0.0.1:1']}}]\n",
      pki("server.key")));
  ASSERT_TRUE(bad.ok()) << bad.error();
  auto g = Gateway::create(*bad);
  ASSERT_TRUE(g.ok()) << g.error();
  auto started = (*g)->start();
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.error().find("listener 127.0.0.1:0"), std::string::npos) << started.error();
  EXPECT_NE(started.error().find("/nonexistent.pem"), std::string::npos) << started.error();
  EXPECT_FALSE(parse_config("listeners: [{port: 0, ssl_certfile: a.pem}]\nmodels: [{name: a, upstreams: ['h:1']}]\n").ok());
}

}  // namespace
}  // namespace cadenza::gateway
