// Server-sent events over HTTP/1.1 chunked transfer encoding: the framing `cadenza serve` and
// `cadenza gateway` both write (text/event-stream, https://html.spec.whatwg.org/#server-sent-events).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace cadenza::wire {

// One SSE event carrying `data`: each line of `data` (split at LF, CR or CRLF, the line ends the
// SSE parser knows) becomes one `data: ` field, and a blank line ends the event, so the client
// reads back `data` with its line ends turned into LF. Single-line data (a JSON object, "[DONE]")
// gives "data: ...\n\n".
std::string sse_event(std::string_view data);

// One HTTP/1.1 chunk holding `payload` (must not be empty: an empty chunk ends the body).
std::string http_chunk(std::string_view payload);

// The last chunk of a chunked body.
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace cadenza::wire
