#include "gateway/metrics.h"

#include <fmt/format.h>

namespace cadenza::gateway {

GatewayMetrics::GatewayMetrics()
    : bounds_{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60} {
  auto def = [&](const char* n, const char* type, const char* help) {
    families_[n] = Family{type, help};
  };
  def("cadenza_gateway_requests_total", "counter",
      "Client requests by route, tenant, model version and HTTP status.");
  def("cadenza_gateway_request_duration_seconds", "histogram",
      "Client request duration (to the last byte) by route.");
  def("cadenza_gateway_upstream_requests_total", "counter",
      "Requests sent to replicas by upstream and outcome (HTTP status or error).");
  def("cadenza_gateway_upstream_latency_seconds", "histogram",
      "Time from sending a request to a replica to its response header, by upstream.");
  def("cadenza_gateway_retries_total", "counter",
      "Requests retried on another replica after a failure before the first byte was sent.");
  def("cadenza_gateway_upstream_ejections_total", "counter",
      "Times a replica's circuit breaker opened.");
  def("cadenza_gateway_upstream_healthy", "gauge", "1 when the last /ready check passed.");
  def("cadenza_gateway_upstream_outstanding", "gauge", "Requests in flight per replica.");
  def("cadenza_gateway_stream_errors_total", "counter",
      "Streams that broke after they started (ended with an SSE error event).");
  def("cadenza_gateway_rate_limited_total", "counter",
      "Requests refused with 429 by tenant and limit (requests or tokens).");
  def("cadenza_gateway_cache_hits_total", "counter", "Response cache hits.");
  def("cadenza_gateway_cache_misses_total", "counter",
      "Response cache misses (cacheable requests only).");
  def("cadenza_gateway_cache_stores_total", "counter", "Responses stored in the cache.");
  def("cadenza_gateway_config_reloads_total", "counter", "Configuration reloads by result.");
}

std::string GatewayMetrics::label_text(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first;
    out += "=\"";
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += '"';
  }
  out += '}';
  return out;
}

void GatewayMetrics::inc(const std::string& name, const Labels& labels, double v) {
  const std::string l = label_text(labels);
  std::lock_guard lock(mu_);
  values_[name][l] += v;
}

void GatewayMetrics::set(const std::string& name, const Labels& labels, double v) {
  const std::string l = label_text(labels);
  std::lock_guard lock(mu_);
  values_[name][l] = v;
}

double GatewayMetrics::value(const std::string& name, const Labels& labels) const {
  const std::string l = label_text(labels);
  std::lock_guard lock(mu_);
  auto f = values_.find(name);
  if (f == values_.end()) return 0;
  auto it = f->second.find(l);
  return it == f->second.end() ? 0 : it->second;
}

void GatewayMetrics::observe(const std::string& name, const Labels& labels, double seconds) {
  const std::string l = label_text(labels);
  std::lock_guard lock(mu_);
  Histogram& h = hists_[name][l];
  if (h.counts.empty()) h.counts.assign(bounds_.size(), 0);
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (seconds <= bounds_[i]) {
      h.counts[i] += 1;
      break;
    }
  h.sum += seconds;
  h.count += 1;
}

std::string GatewayMetrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, fam] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, fam.help, name, fam.type);
    if (fam.type == "histogram") {
      auto hs = hists_.find(name);
      if (hs == hists_.end()) continue;
      for (const auto& [l, h] : hs->second) {
        // Insert `le` into the label set.
        const std::string inner = l.empty() ? "" : l.substr(1, l.size() - 2) + ",";
        double cum = 0;
        for (size_t i = 0; i < bounds_.size(); ++i) {
          cum += h.counts[i];
          out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, inner, bounds_[i], cum);
        }
        out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, inner, h.count);
        out += fmt::format("{}_sum{} {}\n", name, l, h.sum);
        out += fmt::format("{}_count{} {}\n", name, l, h.count);
      }
      continue;
    }
    auto vs = values_.find(name);
    if (vs == values_.end()) {
      if (fam.type == "counter" && name.find("cache_") != std::string::npos)
        out += fmt::format("{} 0\n", name);
      continue;
    }
    for (const auto& [l, v] : vs->second) out += fmt::format("{}{} {}\n", name, l, v);
  }
  return out;
}

}  // namespace cadenza::gateway
