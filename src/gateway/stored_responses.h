// GET / DELETE /v1/responses/{id} and POST /v1/responses/{id}/cancel through the gateway. Each
// `cadenza serve --responses-store N` replica keeps its own responses, so these go to the replica
// that stored the response, as ResponseAffinity (response_affinity.h) recorded it when the answer
// passed through, under the same model version's upstream key. An id the gateway never saw, or
// one another tenant made, is answered 404 like an unknown one (the hidden-name rule), without
// asking any replica. A successful DELETE, or the replica's own 404 (its store forgot it), drops
// the gateway's record too.
// Thread-safety: called on an io thread per request (the coroutine of that request only).
#pragma once

#include <string>
#include <string_view>

#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "gateway/responses.h"

namespace cadenza::gateway {

class Gateway;

// "/v1/responses/" followed by something (`target` without its query string).
bool is_stored_response_route(std::string_view target);

// The answer, in the Responses API's error shape when it is an error (`target` without its
// query string; the query, e.g. `?include[]=...`, is passed to the replica as it came).
boost::asio::awaitable<Reply> stored_response_reply(
    Gateway& gw, const boost::beast::http::request<boost::beast::http::string_body>& req,
    std::string target, std::string request_id);

}  // namespace cadenza::gateway
