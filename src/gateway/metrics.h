// The gateway's metrics: a wire::Registry (src/wire, shared with `cadenza serve`) with the
// gateway's families declared, rendered as Prometheus text 0.0.4 on GET /metrics. Every name
// starts with cadenza_gateway_ (docs/gateway.md lists them).
// Thread-safety: all methods are safe from any thread (the registry's mutex).
#pragma once

#include "wire/registry.h"

namespace cadenza::gateway {

using Labels = wire::Labels;

// inc / set / observe / value / render as in wire::Registry; histograms are in seconds.
class GatewayMetrics : public wire::Registry {
 public:
  GatewayMetrics();
};

}  // namespace cadenza::gateway
