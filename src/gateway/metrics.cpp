#include "gateway/metrics.h"

namespace cadenza::gateway {

GatewayMetrics::GatewayMetrics() {
  using wire::MetricType;
  using wire::WhenEmpty;
  const std::vector<double> seconds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                       0.5,   1,      2.5,   5,    10,    30,   60};
  auto counter = [&](const char* name, const char* help) {
    declare(name, MetricType::counter, help);
  };
  // In name order (the exposition's order). The cache counters read 0 before the first request,
  // so that a hit ratio can be computed from the start.
  declare("cadenza_gateway_cache_hits_total", MetricType::counter, "Response cache hits.",
          WhenEmpty::zero);
  declare("cadenza_gateway_cache_misses_total", MetricType::counter,
          "Response cache misses (cacheable requests only).", WhenEmpty::zero);
  declare("cadenza_gateway_cache_stores_total", MetricType::counter,
          "Responses stored in the cache.", WhenEmpty::zero);
  counter("cadenza_gateway_config_reloads_total", "Configuration reloads by result.");
  counter("cadenza_gateway_rate_limited_total",
          "Requests refused with 429 by tenant and limit (requests or tokens).");
  declare("cadenza_gateway_request_duration_seconds", MetricType::histogram,
          "Client request duration (to the last byte) by route.", WhenEmpty::header_only, seconds);
  counter("cadenza_gateway_requests_total",
          "Client requests by route, tenant, model version and HTTP status.");
  counter("cadenza_gateway_retries_total",
          "Requests retried on another replica after a failure before the first byte was sent.");
  counter("cadenza_gateway_stream_errors_total",
          "Streams that broke after they started (ended with an SSE error event).");
  counter("cadenza_gateway_upstream_ejections_total", "Times a replica's circuit breaker opened.");
  declare("cadenza_gateway_upstream_healthy", MetricType::gauge,
          "1 when the last /ready check passed.");
  declare("cadenza_gateway_upstream_latency_seconds", MetricType::histogram,
          "Time from sending a request to a replica to its response header, by upstream.",
          WhenEmpty::header_only, seconds);
  declare("cadenza_gateway_upstream_outstanding", MetricType::gauge,
          "Requests in flight per replica.");
  counter("cadenza_gateway_upstream_requests_total",
          "Requests sent to replicas by upstream and outcome (HTTP status or error).");
}

}  // namespace cadenza::gateway
