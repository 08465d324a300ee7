#include "gateway/upstream_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <fstream>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <spdlog/spdlog.h>

namespace cadenza::gateway {

namespace ssl = boost::asio::ssl;

std::string tls_error_text(const boost::system::error_code& ec) {
  std::string reason;
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    if (const char* r = ERR_reason_error_string(static_cast<unsigned long>(ec.value())))
      reason = r;
    else
      reason = buf;
  }
  unsigned long e;
  while ((e = ERR_get_error()) != 0)
    if (const char* r = ERR_reason_error_string(e)) reason = r;
  if (reason.empty()) reason = ec.message();
  return reason;
}

namespace {

Status readable(const std::string& where, const char* field, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: {} '{}': cannot open", where, field, path);
  return {};
}

}  // namespace

Result<std::shared_ptr<ssl::context>> make_upstream_tls_context(const UpstreamTlsConfig& cfg,
                                                                const std::string& where) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_password_callback(
      [](std::size_t, ssl::context::password_purpose) { return std::string(); });
  boost::system::error_code ec;
  ERR_clear_error();
  if (!cfg.verify) {
    spdlog::warn("gateway: {}: tls_verify is false: the replicas' certificates are NOT checked "
                 "(anyone on the path can impersonate them)",
                 where);
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    ctx->set_verify_mode(ssl::verify_peer);
    if (!cfg.ca_file.empty()) {
      if (auto s = readable(where, "ca_file", cfg.ca_file); !s) return s.error_value();
      ctx->load_verify_file(cfg.ca_file, ec);
      if (ec)
        return make_error("{}: ca_file '{}': not a PEM CA file ({})", where, cfg.ca_file,
                          tls_error_text(ec));
    } else {
      ctx->set_default_verify_paths(ec);
      if (ec)
        return make_error("{}: the system's CA store cannot be read ({})", where,
                          tls_error_text(ec));
    }
  }
  if (!cfg.cert_file.empty()) {
    if (auto s = readable(where, "client_cert_file", cfg.cert_file); !s) return s.error_value();
    if (auto s = readable(where, "client_key_file", cfg.key_file); !s) return s.error_value();
    ctx->use_certificate_chain_file(cfg.cert_file, ec);
    if (ec)
      return make_error("{}: client_cert_file '{}': not a PEM certificate chain ({})", where,
                        cfg.cert_file, tls_error_text(ec));
    ctx->use_private_key_file(cfg.key_file, ssl::context::pem, ec);
    if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1)
      return make_error(
          "{}: client_key_file '{}': not an unencrypted PEM key matching client_cert_file ({})",
          where, cfg.key_file, ec ? tls_error_text(ec) : std::string("key mismatch"));
  }
  return ctx;
}

Status prepare_tls_connection(boost::beast::ssl_stream<boost::beast::tcp_stream>& s,
                              const std::string& server_name, bool verify) {
  boost::system::error_code ec;
  const bool is_ip = (boost::asio::ip::make_address(server_name, ec), !ec);
  // SNI carries names only (RFC 6066).
  if (!is_ip && !SSL_set_tlsext_host_name(s.native_handle(), server_name.c_str()))
    return make_error("TLS: bad server name '{}'", server_name);
  if (verify) {
    s.set_verify_callback(ssl::host_name_verification(server_name), ec);
    if (ec) return make_error("TLS: cannot check the name '{}': {}", server_name, ec.message());
  }
  return {};
}

}  // namespace cadenza::gateway
