// The server's names for the shared SSE event and HTTP chunk framing (src/wire/sse.h, which the
// gateway writes with too).
#pragma once

#include "wire/sse.h"

namespace cadenza::server {

using wire::http_chunk;
using wire::kLastChunk;
using wire::sse_event;

}  // namespace cadenza::server
