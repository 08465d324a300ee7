// Proxying one generation request (/v1/chat/completions, /v1/completions, /v1/messages,
// /v1/messages/count_tokens, /v1/responses; api_shapes.h converts for `api: chat` upstreams): tenant key and
// limits, model version, response cache, replica choice, retries before the first byte, and
// streaming pass-through with backpressure (one upstream piece in memory per stream: the next
// piece is read only after the previous one was written to the client).
#pragma once

#include <string>

#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace cadenza::gateway {

class Gateway;

struct ClientRequest {
  const boost::beast::http::request<boost::beast::http::string_body>& http;
  std::string route;       // "chat", "completions", "messages", "count_tokens" or "responses"
  std::string request_id;  // passed to the replica as X-Request-Id
  bool keep_alive = true;
};

// Answers the request on `client` (a beast::tcp_stream, or an ssl_stream over one: both are
// instantiated in proxy.cpp). Returns false when the connection must close (the client went
// away or a write failed).
template <typename ClientStream>
boost::asio::awaitable<bool> proxy_generation(Gateway& gw, ClientStream& client,
                                              const ClientRequest& req);

}  // namespace cadenza::gateway
