// One client connection: HTTP/1.1 with keep-alive, read with Beast, answered by the gateway's
// own routes (/health, /ready, /metrics, /v1/models) or proxied (proxy.h).
// Ownership: the coroutine owns the socket; the Gateway outlives every session (its destructor
// destroys the io_context, and with it any suspended session, before the rest of the Gateway).
#pragma once

#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it

#include <memory>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

namespace cadenza::gateway {

class Gateway;

// `tls` (null: plain HTTP): the listener's HTTPS context; the TLS handshake (30 s at most) comes
// first, then the same HTTP code as a plain connection.
boost::asio::awaitable<void> serve_connection(Gateway& gw, boost::asio::ip::tcp::socket socket,
                                              std::shared_ptr<boost::asio::ssl::context> tls);

}  // namespace cadenza::gateway
