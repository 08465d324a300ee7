// RequestId: the id of one live request, as the engine, the scheduler and the KV block manager
// (kv::RequestId, the same type) know it. Ids are never reused within one engine.
#pragma once

#include <cstdint>

namespace cadenza {

using RequestId = uint64_t;

}  // namespace cadenza
