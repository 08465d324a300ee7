#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace cadenza::server {

namespace ssl = boost::asio::ssl;

namespace {

// The reason of OpenSSL's most recent error (and clears the queue), or `fallback`.
std::string openssl_reason(const boost::system::error_code& ec) {
  std::string reason = ec ? ec.message() : std::string();
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    reason = buf;
  }
  return reason.empty() ? "unknown OpenSSL error" : reason;
}

Status check_readable(const char* option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{} '{}': cannot open: {}", option, path, std::strerror(errno));
  return {};
}

}  // namespace

Result<std::unique_ptr<ssl::context>> make_tls_context(const std::string& certfile,
                                                       const std::string& keyfile,
                                                       const std::string& client_ca_file) {
  if (certfile.empty() || keyfile.empty())
    return Error("TLS needs both --ssl-certfile and --ssl-keyfile");
  if (auto s = check_readable("--ssl-certfile", certfile); !s) return s.error_value();
  if (auto s = check_readable("--ssl-keyfile", keyfile); !s) return s.error_value();

  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  // An encrypted key would make OpenSSL prompt on the terminal: answer with no password instead.
  ctx->set_password_callback(
      [](std::size_t, ssl::context::password_purpose) { return std::string(); });

  ERR_clear_error();
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(certfile, ec);
  if (ec)
    return make_error("--ssl-certfile '{}': not a PEM certificate chain ({})", certfile,
                      openssl_reason(ec));
  ERR_clear_error();
  ctx->use_private_key_file(keyfile, ssl::context::pem, ec);
  if (ec) {
    // OpenSSL checks the key against the certificate as it loads it.
    // (Asio moved OpenSSL's error code into `ec`.)
    const auto code = static_cast<unsigned long>(static_cast<unsigned int>(ec.value()));
    if (ec.category() == boost::asio::error::get_ssl_category() &&
        ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return make_error("--ssl-keyfile '{}' does not match the certificate in --ssl-certfile '{}'",
                        keyfile, certfile);
    }
    return make_error("--ssl-keyfile '{}': not an unencrypted PEM private key ({})", keyfile,
                      openssl_reason(ec));
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return make_error(
        "--ssl-keyfile '{}' does not match the certificate in --ssl-certfile '{}' ({})", keyfile,
        certfile, openssl_reason({}));
  if (!client_ca_file.empty()) {
    if (auto s = check_readable("--ssl-ca-certs", client_ca_file); !s) return s.error_value();
    ERR_clear_error();
    ctx->load_verify_file(client_ca_file, ec);
    if (ec)
      return make_error("--ssl-ca-certs '{}': not a PEM CA certificate file ({})", client_ca_file,
                        openssl_reason(ec));
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

}  // namespace cadenza::server
