// HTTPS: `cadenza serve --ssl-certfile/--ssl-keyfile`. The test makes a self-signed certificate
// with the OpenSSL API at run time, serves the tiny model over TLS on an ephemeral port, and talks
// to it with a Beast TLS client that verifies the certificate (trust anchor = that certificate,
// host = the IP address): health, completion, streaming, keep-alive, Connection: close with a
// clean close_notify, a plain-HTTP client refused, and the start-up errors for bad files.
#include "server/tls.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "running_server.h"
#include "test_client.h"

namespace cadenza::server {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using nlohmann::json;
using tcp = net::ip::tcp;

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tls-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

bool add_ext(X509* cert, int nid, const char* value) {
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
  if (!ext) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// Writes a fresh P-256 key and a self-signed certificate for 127.0.0.1/localhost (PEM). Returns
// false (with a gtest failure) when OpenSSL fails.
bool write_self_signed(const std::filesystem::path& cert_path,
                       const std::filesystem::path& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (!key) {
    ADD_FAILURE() << "EVP_EC_gen failed";
    return false;
  }
  X509* cert = X509_new();
  bool ok = cert != nullptr;
  ok = ok && X509_set_version(cert, 2) == 1;
  ok = ok && ASN1_INTEGER_set(X509_get_serialNumber(cert), 1) == 1;
  ok = ok && X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr;
  ok = ok && X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600) != nullptr;
  ok = ok && X509_set_pubkey(cert, key) == 1;
  X509_NAME* name = ok ? X509_get_subject_name(cert) : nullptr;
  ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                        reinterpret_cast<const unsigned char*>("localhost"), -1, -1,
                                        0) == 1;
  ok = ok && X509_set_issuer_name(cert, name) == 1;
  ok = ok && add_ext(cert, NID_basic_constraints, "critical,CA:TRUE");
  ok = ok && add_ext(cert, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  ok = ok && X509_sign(cert, key, EVP_sha256()) > 0;
  if (ok) {
    FILE* f = std::fopen(cert_path.c_str(), "wb");
    ok = f && PEM_write_X509(f, cert) == 1;
    if (f) std::fclose(f);
    f = std::fopen(key_path.c_str(), "wb");
    ok = ok && f && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    if (f) std::fclose(f);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  EXPECT_TRUE(ok) << "could not write a self-signed certificate";
  return ok;
}

// A blocking HTTPS/1.1 client that trusts exactly `ca_file` and checks the server's IP address.
class TlsClient {
 public:
  TlsClient(uint16_t port, const std::string& ca_file)
      : ssl_ctx_(ssl::context::tls_client), stream_(ioc_, ssl_ctx_) {
    ssl_ctx_.load_verify_file(ca_file);
    stream_.set_verify_mode(ssl::verify_peer);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(stream_.native_handle()), "127.0.0.1");
    beast::error_code ec;
    beast::get_lowest_layer(stream_).connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
    if (ec) {
      error_ = "connect: " + ec.message();
      return;
    }
    stream_.handshake(ssl::stream_base::client, ec);
    if (ec) {
      error_ = "handshake: " + ec.message();
      return;
    }
    connected_ = true;
  }
  bool connected() const { return connected_; }
  const std::string& error() const { return error_; }

  testing::Response request(const std::string& method, const std::string& target,
                            const std::string& body = {}, bool close = false) {
    testing::Response r;
    if (!connected_) return r;
    http::request<http::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(http::field::host, "127.0.0.1");
    if (close) req.set(http::field::connection, "close");
    if (method == "POST") {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    beast::error_code ec;
    http::write(stream_, req, ec);
    if (ec) {
      error_ = "write: " + ec.message();
      return r;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    http::read(stream_, buffer_, parser, ec);
    if (ec) {
      error_ = "read: " + ec.message();
      return r;
    }
    auto res = parser.release();
    r.ok = true;
    r.status = static_cast<int>(res.result_int());
    r.body = res.body();
    for (const auto& f : res) {
      std::string n(f.name_string().data(), f.name_string().size());
      for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[n] = std::string(f.value().data(), f.value().size());
    }
    return r;
  }

  // After a Connection: close response: the next read must end with the server's close_notify
  // (net::error::eof), not a truncated stream.
  beast::error_code read_to_end() {
    char buf[256];
    beast::error_code ec;
    while (!ec) stream_.read_some(net::buffer(buf), ec);
    return ec;
  }

 private:
  net::io_context ioc_;
  ssl::context ssl_ctx_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
  std::string error_;
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    cert_ = (dir_->path / "cert.pem").string();
    key_ = (dir_->path / "key.pem").string();
    if (!write_self_signed(cert_, key_)) return;
    testing::Options o;
    o.ssl_certfile = cert_;
    o.ssl_keyfile = key_;
    server_ = testing::start(o).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  static uint16_t port() { return server_->port; }

  static inline TempDir* dir_ = nullptr;
  static inline std::string cert_, key_;
  static inline testing::Running* server_ = nullptr;
};

TEST_F(TlsTest, HealthAndCompletionOverHttps) {
  EXPECT_TRUE(server_->server->tls());
  TlsClient c(port(), cert_);
  ASSERT_TRUE(c.connected()) << c.error();
  auto h = c.request("GET", "/health");
  ASSERT_TRUE(h.ok) << c.error();
  EXPECT_EQ(h.status, 200);
  // Same connection (keep-alive): a completion.
  auto r = c.request(
      "POST", "/v1/completions",
      json{{"prompt", "hello"}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}}
          .dump());
  ASSERT_TRUE(r.ok) << c.error();
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST_F(TlsTest, StreamingChatOverHttps) {
  TlsClient c(port(), cert_);
  ASSERT_TRUE(c.connected()) << c.error();
  auto r = c.request("POST", "/v1/chat/completions",
                     json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                          {"max_tokens", 6},
                          {"ignore_eos", true},
                          {"stream", true},
                          {"stream_options", {{"include_usage", true}}}}
                         .dump());
  ASSERT_TRUE(r.ok) << c.error();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  auto events = testing::sse_data(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  int content_chunks = 0;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i], nullptr, false);
    ASSERT_TRUE(e.is_object()) << events[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e["choices"].empty()) {
      EXPECT_EQ(e["usage"]["completion_tokens"], 6);
      continue;
    }
    const json& ch = e["choices"][0];
    if (ch["delta"].contains("content") && !ch["delta"]["content"].get<std::string>().empty())
      ++content_chunks;
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
  }
  EXPECT_GE(content_chunks, 1);
  EXPECT_EQ(finish, "length");
  // The connection is still usable after the stream.
  auto h = c.request("GET", "/health");
  EXPECT_EQ(h.status, 200) << c.error();
}

TEST_F(TlsTest, ConnectionCloseEndsWithCloseNotify) {
  TlsClient c(port(), cert_);
  ASSERT_TRUE(c.connected()) << c.error();
  auto r = c.request("GET", "/v1/models", {}, /*close=*/true);
  ASSERT_TRUE(r.ok) << c.error();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(c.read_to_end(), net::error::eof);
}

TEST_F(TlsTest, PlainHttpClientGetsNoAnswer) {
  testing::Client plain(port());
  ASSERT_TRUE(plain.connected());
  auto r = plain.get("/health");
  EXPECT_FALSE(r.ok);
  // The server is still fine.
  TlsClient c(port(), cert_);
  ASSERT_TRUE(c.connected()) << c.error();
  EXPECT_EQ(c.request("GET", "/health").status, 200);
}

TEST_F(TlsTest, ClientWithAnotherTrustAnchorRejectsTheServer) {
  TempDir other;
  ASSERT_TRUE(write_self_signed(other.path / "c.pem", other.path / "k.pem"));
  TlsClient c(port(), (other.path / "c.pem").string());
  EXPECT_FALSE(c.connected());
  EXPECT_NE(c.error().find("handshake"), std::string::npos) << c.error();
}

TEST(TlsConfig, StartupErrorsNameTheOptionAndFile) {
  TempDir dir;
  const std::string cert = (dir.path / "cert.pem").string();
  const std::string key = (dir.path / "key.pem").string();
  ASSERT_TRUE(write_self_signed(cert, key));
  ASSERT_TRUE(make_tls_context(cert, key).ok());

  const std::string missing = (dir.path / "no-such-key.pem").string();
  auto r = make_tls_context(cert, missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--ssl-keyfile"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(missing), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("cannot open"), std::string::npos) << r.error();

  // Through the server's own start-up path too.
  testing::Options o;
  o.ssl_certfile = cert;
  o.ssl_keyfile = missing;
  auto built = testing::build(o);
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.error().find("--ssl-keyfile"), std::string::npos) << built.error();

  // Only one of the two.
  o.ssl_keyfile.clear();
  built = testing::build(o);
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.error().find("both"), std::string::npos) << built.error();

  // A certificate file that is not PEM; the key given as the certificate.
  r = make_tls_context(key, key);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--ssl-certfile"), std::string::npos) << r.error();
  r = make_tls_context(cert, cert);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("--ssl-keyfile"), std::string::npos) << r.error();

  // A key that belongs to another certificate.
  const std::string cert2 = (dir.path / "cert2.pem").string();
  const std::string key2 = (dir.path / "key2.pem").string();
  ASSERT_TRUE(write_self_signed(cert2, key2));
  r = make_tls_context(cert, key2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("does not match"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace cadenza::server
