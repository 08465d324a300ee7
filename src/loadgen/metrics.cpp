#include "loadgen/metrics.h"

#include <nlohmann/json.hpp>

namespace cadenza::loadgen {

Summary summarize_run(const RunResult& run, const SloOptions& slo) {
  Summary s;
  s.duration_s = run.duration_s;
  s.has_slo = slo.any();
  s.cpu_s = run.cpu_s;
  s.connections_opened = run.connections_opened;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestRecord& r : run.records) {
    if (!r.ok()) {
      ++s.failed;
      ++s.errors[to_string(r.error)];
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    s.output_chunks += static_cast<int64_t>(r.chunk_s.size());
    s.output_source = r.output_source;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
    const double t = r.tpot_s();
    if (t >= 0) tpot.push_back(t * 1e3);
    for (size_t i = 1; i < r.chunk_s.size(); ++i)
      itl.push_back((r.chunk_s[i] - r.chunk_s[i - 1]) * 1e3);
    if (s.has_slo) {
      const bool ttft_ok = slo.ttft_ms <= 0 || (r.ttft_s >= 0 && r.ttft_s * 1e3 <= slo.ttft_ms);
      const bool tpot_ok = slo.tpot_ms <= 0 || t < 0 || t * 1e3 <= slo.tpot_ms;
      if (ttft_ok && tpot_ok) ++s.good_requests;
    }
  }
  s.ttft_ms = summarize(std::move(ttft));
  s.tpot_ms = summarize(std::move(tpot));
  s.itl_ms = summarize(std::move(itl));
  s.e2e_ms = summarize(std::move(e2e));
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / s.duration_s;
    s.input_token_throughput = static_cast<double>(s.input_tokens) / s.duration_s;
    s.output_token_throughput = static_cast<double>(s.output_tokens) / s.duration_s;
    s.goodput = static_cast<double>(s.good_requests) / s.duration_s;
    s.cpu_utilization = s.cpu_s / s.duration_s;
  }
  const size_t n = s.completed + s.failed;
  s.cpu_ms_per_request = n ? s.cpu_s * 1e3 / static_cast<double>(n) : 0.0;
  return s;
}

void to_json(nlohmann::json& j, const Summary& s) {
  j = nlohmann::json{{"completed", s.completed},
                     {"failed", s.failed},
                     {"duration_s", s.duration_s},
                     {"input_tokens", s.input_tokens},
                     {"output_tokens", s.output_tokens},
                     {"output_chunks", s.output_chunks},
                     {"request_throughput", s.request_throughput},
                     {"input_token_throughput", s.input_token_throughput},
                     {"output_token_throughput", s.output_token_throughput},
                     {"ttft_ms", s.ttft_ms},
                     {"tpot_ms", s.tpot_ms},
                     {"itl_ms", s.itl_ms},
                     {"e2e_ms", s.e2e_ms},
                     {"errors", s.errors},
                     {"output_source", s.output_source},
                     {"cpu_s", s.cpu_s},
                     {"cpu_ms_per_request", s.cpu_ms_per_request},
                     {"cpu_utilization", s.cpu_utilization},
                     {"connections_opened", s.connections_opened}};
  if (s.has_slo) {
    j["good_requests"] = s.good_requests;
    j["goodput"] = s.goodput;
  }
}

void from_json(const nlohmann::json& j, Summary& s) {
  s = Summary{};
  if (!j.is_object()) return;
  s.completed = j.value("completed", size_t{0});
  s.failed = j.value("failed", size_t{0});
  s.duration_s = j.value("duration_s", 0.0);
  s.input_tokens = j.value("input_tokens", int64_t{0});
  s.output_tokens = j.value("output_tokens", int64_t{0});
  s.output_chunks = j.value("output_chunks", int64_t{0});
  s.request_throughput = j.value("request_throughput", 0.0);
  s.input_token_throughput = j.value("input_token_throughput", 0.0);
  s.output_token_throughput = j.value("output_token_throughput", 0.0);
  for (auto [key, d] : {std::pair{"ttft_ms", &s.ttft_ms}, std::pair{"tpot_ms", &s.tpot_ms},
                        std::pair{"itl_ms", &s.itl_ms}, std::pair{"e2e_ms", &s.e2e_ms}})
    if (j.contains(key)) *d = j[key].get<Distribution>();
  if (j.contains("errors") && j["errors"].is_object())
    s.errors = j["errors"].get<std::map<std::string, size_t>>();
  s.output_source = j.value("output_source", std::string());
  s.cpu_s = j.value("cpu_s", 0.0);
  s.cpu_ms_per_request = j.value("cpu_ms_per_request", 0.0);
  s.cpu_utilization = j.value("cpu_utilization", 0.0);
  s.connections_opened = j.value("connections_opened", size_t{0});
  s.has_slo = j.contains("goodput");
  s.good_requests = j.value("good_requests", size_t{0});
  s.goodput = j.value("goodput", 0.0);
}

}  // namespace cadenza::loadgen
