#include "server/metrics.h"

#include <cmath>

#include <fmt/format.h>

namespace cadenza::server {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (!std::isfinite(v) || v < 0) v = 0;
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(bounds_[i]), cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, number(sum_), name, count_);
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
            120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      queue_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
              120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {
  for (const char* r : {"stop", "length", "abort", "error"}) finished_[r] = 0;
}

void Metrics::observe_ttft(double s) { std::lock_guard lock(mu_); ttft_.observe(s); }
void Metrics::observe_inter_token(double s) { std::lock_guard lock(mu_); itl_.observe(s); }
void Metrics::observe_e2e(double s) { std::lock_guard lock(mu_); e2e_.observe(s); }
void Metrics::observe_queue_time(double s) { std::lock_guard lock(mu_); queue_.observe(s); }
void Metrics::add_prompt_tokens(int64_t n) { std::lock_guard lock(mu_); prompt_tokens_ += n; }
void Metrics::add_generation_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  generation_tokens_ += n;
}
void Metrics::add_request_finished(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++finished_[reason];
}
void Metrics::set_engine_gauges(const EngineGauges& g) {
  std::lock_guard lock(mu_);
  gauges_ = g;
}
void Metrics::add_http_request(const std::string& route, int status) {
  std::lock_guard lock(mu_);
  ++http_[{route, status}];
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  out.reserve(8192);
  header(out, "cadenza_num_requests_running", "gauge", "Requests in the running batch.");
  out += fmt::format("cadenza_num_requests_running {}\n", gauges_.num_running);
  header(out, "cadenza_num_requests_waiting", "gauge", "Requests waiting to be scheduled.");
  out += fmt::format("cadenza_num_requests_waiting {}\n", gauges_.num_waiting);
  header(out, "cadenza_kv_cache_usage_ratio", "gauge",
         "Fraction of KV cache blocks in use (0 to 1).");
  out += fmt::format("cadenza_kv_cache_usage_ratio {}\n", number(gauges_.kv_usage));

  header(out, "cadenza_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  out += fmt::format("cadenza_prompt_tokens_total {}\n", prompt_tokens_);
  header(out, "cadenza_generation_tokens_total", "counter", "Generated tokens of finished requests.");
  out += fmt::format("cadenza_generation_tokens_total {}\n", generation_tokens_);
  header(out, "cadenza_prefix_cache_queries_total", "counter", "Prefix cache lookups.");
  out += fmt::format("cadenza_prefix_cache_queries_total {}\n", gauges_.prefix_cache_queries);
  header(out, "cadenza_prefix_cache_hits_total", "counter",
         "Prefix cache lookups that found at least one block.");
  out += fmt::format("cadenza_prefix_cache_hits_total {}\n", gauges_.prefix_cache_hits);
  header(out, "cadenza_num_preemptions_total", "counter", "Requests preempted (KV recompute).");
  out += fmt::format("cadenza_num_preemptions_total {}\n", gauges_.num_preemptions);
  if (gauges_.moe_experts > 0 &&
      gauges_.expert_tokens.size() == static_cast<size_t>(gauges_.moe_layers * gauges_.moe_experts)) {
    header(out, "cadenza_moe_expert_tokens_total", "counter",
           "Tokens routed to each expert, per layer (each token counts once per expert it uses).");
    for (int64_t l = 0; l < gauges_.moe_layers; ++l)
      for (int64_t e = 0; e < gauges_.moe_experts; ++e)
        out += fmt::format("cadenza_moe_expert_tokens_total{{layer=\"{}\",expert=\"{}\"}} {}\n", l, e,
                           gauges_.expert_tokens[static_cast<size_t>(l * gauges_.moe_experts + e)]);
  }
  header(out, "cadenza_request_success_total", "counter", "Finished requests by finish reason.");
  for (const auto& [reason, n] : finished_)
    out += fmt::format("cadenza_request_success_total{{finished_reason=\"{}\"}} {}\n", reason, n);
  header(out, "cadenza_http_requests_total", "counter", "HTTP responses by route and status.");
  for (const auto& [key, n] : http_)
    out += fmt::format("cadenza_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, n);

  header(out, "cadenza_time_to_first_token_seconds", "histogram",
         "Time from arrival to the first generated token.");
  ttft_.render("cadenza_time_to_first_token_seconds", out);
  header(out, "cadenza_inter_token_latency_seconds", "histogram",
         "Time between consecutive generated tokens.");
  itl_.render("cadenza_inter_token_latency_seconds", out);
  header(out, "cadenza_e2e_request_latency_seconds", "histogram",
         "Time from submission to the end of the request.");
  e2e_.render("cadenza_e2e_request_latency_seconds", out);
  header(out, "cadenza_request_queue_time_seconds", "histogram",
         "Time from arrival to the first schedule.");
  queue_.render("cadenza_request_queue_time_seconds", out);
  return out;
}

}  // namespace cadenza::server
