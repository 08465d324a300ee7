// TLS to upstream replicas (`https://` upstreams, VersionConfig::tls): the client context of a
// version, and the per-connection setup (SNI, host name check) done before the handshake.
//
// Verification is on by default: the replica's certificate must chain to `ca_file` (or the
// system's default CA store) and name the upstream's host (or `tls_server_name`); `tls_verify:
// false` turns both off and logs a warning at load. `client_cert_file`/`client_key_file` present
// a client certificate (mutual TLS). TLS 1.2 at least.
// Ownership: contexts are shared (shared_ptr) by the Upstream and each of its connections.
// Thread-safety: a context is read-only once made.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "gateway/config.h"
#include "util/result.h"

namespace cadenza::gateway {

// Errors name `where` (e.g. "models 'qwen'") and the file: unreadable, not PEM, key mismatch.
Result<std::shared_ptr<boost::asio::ssl::context>> make_upstream_tls_context(
    const UpstreamTlsConfig& cfg, const std::string& where);

// SNI (for a name, not an IP address) and, when verifying, the host name (or IP) check.
// Errors: OpenSSL refused the name.
Status prepare_tls_connection(boost::beast::ssl_stream<boost::beast::tcp_stream>& s,
                              const std::string& server_name, bool verify);

// The most specific OpenSSL reason for a failed handshake (e.g. "certificate verify failed"),
// and clears OpenSSL's error queue.
std::string tls_error_text(const boost::system::error_code& ec);

}  // namespace cadenza::gateway
