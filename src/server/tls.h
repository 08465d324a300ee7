// TLS for `cadenza serve --ssl-certfile CERT --ssl-keyfile KEY`: the server's OpenSSL context.
//
// CERT: a PEM certificate chain (the server's certificate first, then intermediates). KEY: the
// matching PEM private key, unencrypted (an encrypted key is refused instead of prompting on the
// terminal). TLS 1.2 is the minimum version; OpenSSL's default cipher list applies.
// Errors name the option and the file: missing or unreadable file, not PEM, key and certificate
// that do not match.
// Thread-safety: the returned context is read-only once built and shared by all TLS sessions.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "util/result.h"

namespace cadenza::server {

// `client_ca_file` (--ssl-ca-certs; empty: none): mutual TLS: every client must present a
// certificate signed by a CA in this PEM file, or the handshake fails.
Result<std::unique_ptr<boost::asio::ssl::context>> make_tls_context(
    const std::string& certfile, const std::string& keyfile,
    const std::string& client_ca_file = {});

}  // namespace cadenza::server
