#include "loadgen/results.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

namespace cadenza::loadgen {

std::string format_rate(double rate) {
  if (std::isinf(rate)) return "inf";
  return fmt::format("{:g}", rate);
}

PointResult make_point(std::string label, int32_t concurrency, double request_rate,
                       const RunResult& run, const SloOptions& slo) {
  PointResult p;
  p.label = std::move(label);
  p.concurrency = concurrency;
  p.request_rate = request_rate;
  p.summary = summarize_run(run, slo);
  for (const RequestRecord& r : run.records) {
    p.requests.push_back(r);
    if (!r.ok()) continue;
    if (r.ttft_s >= 0) p.ttft_ms.push_back(r.ttft_s * 1e3);
    if (r.tpot_s() >= 0) p.tpot_ms.push_back(r.tpot_s() * 1e3);
    for (size_t i = 1; i < r.chunk_s.size(); ++i)
      p.itl_ms.push_back((r.chunk_s[i] - r.chunk_s[i - 1]) * 1e3);
    p.e2e_ms.push_back(r.e2e_s * 1e3);
  }
  return p;
}

nlohmann::json to_json(const ResultFile& f) {
  nlohmann::json j;
  j["format"] = "cadenza-bench-serve";
  j["version"] = 1;
  j["name"] = f.name;
  j["config"] = f.config;
  j["points"] = nlohmann::json::array();
  for (const PointResult& p : f.points) {
    nlohmann::json pj;
    pj["label"] = p.label;
    pj["concurrency"] = p.concurrency;
    // JSON has no infinity: a burst is written as the string "inf".
    if (std::isinf(p.request_rate))
      pj["request_rate"] = "inf";
    else
      pj["request_rate"] = p.request_rate;
    pj["summary"] = p.summary;
    pj["requests"] = p.requests;
    pj["spec_decode"] = p.spec_decode ? nlohmann::json(*p.spec_decode) : nlohmann::json(nullptr);
    j["points"].push_back(std::move(pj));
  }
  return j;
}

Result<ResultFile> load_result_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() ||
      j.value("format", std::string()) != "cadenza-bench-serve" || !j.contains("points") ||
      !j["points"].is_array())
    return make_error("{}: not a `cadenza bench serve --json` result file", path);
  ResultFile f;
  f.name = j.value("name", std::string());
  if (f.name.empty()) {
    const size_t slash = path.find_last_of('/');
    f.name = slash == std::string::npos ? path : path.substr(slash + 1);
  }
  if (j.contains("config")) f.config = j["config"];
  for (const auto& pj : j["points"]) {
    if (!pj.is_object()) return make_error("{}: a point is not an object", path);
    PointResult p;
    p.label = pj.value("label", std::string("run"));
    p.concurrency = pj.value("concurrency", 0);
    if (pj.contains("request_rate") && pj["request_rate"].is_string())
      p.request_rate = std::numeric_limits<double>::infinity();
    else
      p.request_rate = pj.value("request_rate", 0.0);
    if (pj.contains("summary")) p.summary = pj["summary"].get<Summary>();
    if (pj.contains("spec_decode") && pj["spec_decode"].is_object())
      p.spec_decode = pj["spec_decode"].get<SpecDecode>();
    if (pj.contains("requests") && pj["requests"].is_array()) {
      p.requests = pj["requests"];
      for (const auto& r : p.requests) {
        if (!r.is_object() || r.value("error", std::string()) != "none") continue;
        auto get = [&](const char* k) {
          return r.contains(k) && r[k].is_number() ? r[k].get<double>() : -1.0;
        };
        if (get("ttft_ms") >= 0) p.ttft_ms.push_back(get("ttft_ms"));
        if (get("tpot_ms") >= 0) p.tpot_ms.push_back(get("tpot_ms"));
        if (get("e2e_ms") >= 0) p.e2e_ms.push_back(get("e2e_ms"));
        if (r.contains("chunk_ms") && r["chunk_ms"].is_array()) {
          const auto& c = r["chunk_ms"];
          for (size_t i = 1; i < c.size(); ++i)
            if (c[i].is_number() && c[i - 1].is_number())
              p.itl_ms.push_back(c[i].get<double>() - c[i - 1].get<double>());
        }
      }
    }
    f.points.push_back(std::move(p));
  }
  return f;
}

Status save_result_file(const ResultFile& file, const std::string& path) {
  std::ofstream out(path);
  if (!out) return make_error("{}: cannot write", path);
  out << to_json(file).dump(1) << "\n";
  if (!out) return make_error("{}: write failed", path);
  return {};
}

void print_summary(std::FILE* out, const PointResult& p) {
  const Summary& s = p.summary;
  fmt::print(out, "============ bench serve: {} ============\n", p.label);
  fmt::print(out, "{:<34} {}\n", "Successful requests:", s.completed);
  fmt::print(out, "{:<34} {}\n", "Failed requests:", s.failed);
  for (const auto& [kind, n] : s.errors) fmt::print(out, "  {:<32} {}\n", kind + ":", n);
  fmt::print(out, "{:<34} {:.2f}\n", "Duration (s):", s.duration_s);
  fmt::print(out, "{:<34} {}\n", "Input tokens:", s.input_tokens);
  fmt::print(out, "{:<34} {} (counted from {}; {} token chunks)\n", "Output tokens:",
             s.output_tokens, s.output_source.empty() ? "-" : s.output_source, s.output_chunks);
  fmt::print(out, "{:<34} {:.2f}\n", "Request throughput (req/s):", s.request_throughput);
  if (s.has_slo)
    fmt::print(out, "{:<34} {:.2f} ({} requests)\n", "Goodput (req/s):", s.goodput,
               s.good_requests);
  fmt::print(out, "{:<34} {:.2f}\n", "Input throughput (tok/s):", s.input_token_throughput);
  fmt::print(out, "{:<34} {:.2f}\n", "Output throughput (tok/s):", s.output_token_throughput);
  fmt::print(out, "{:<34} {:.3f} ms/request ({:.0f}% of a core, {} connections)\n",
             "Load generator CPU:", s.cpu_ms_per_request, 100 * s.cpu_utilization,
             s.connections_opened);
  fmt::print(out, "{:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "(ms)", "mean", "median",
             "p90", "p95", "p99", "max", "n");
  auto row = [&](const char* name, const Distribution& d) {
    fmt::print(out, "{:<8} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9}\n", name,
               d.mean, d.median, d.p90, d.p95, d.p99, d.max, d.count);
  };
  row("TTFT", s.ttft_ms);
  row("TPOT", s.tpot_ms);
  row("ITL", s.itl_ms);
  row("E2E", s.e2e_ms);
  if (p.spec_decode) print_spec_decode(out, *p.spec_decode);
}

void print_spec_decode(std::FILE* out, const SpecDecode& d) {
  fmt::print(out,
             "---- speculative decoding (server /metrics, server-wide, over this point) ----\n");
  fmt::print(out, "{:<34} {}\n", "Verifications with drafts:", d.drafts);
  fmt::print(out, "{:<34} {}\n", "Draft tokens:", d.draft_tokens);
  fmt::print(out, "{:<34} {}\n", "Accepted tokens:", d.accepted);
  fmt::print(out, "{:<34} {:.2f}% (accepted / draft tokens)\n", "Acceptance rate:",
             100 * d.acceptance_rate);
  fmt::print(out, "{:<34} {:.3f} (1 + accepted / verifications)\n",
             "Mean tokens per verification:", d.mean_tokens_per_verification);
  if (d.acceptance_by_position.empty()) return;
  fmt::print(out, "Acceptance by position (accepted at position i / verifications, the chance a\n"
                  "verification gets past position i):\n");
  std::string line;
  for (size_t i = 0; i < d.acceptance_by_position.size(); ++i) {
    line += fmt::format("  [{}] {:.3f}", i, d.acceptance_by_position[i]);
    if (i % 8 == 7 || i + 1 == d.acceptance_by_position.size()) {
      fmt::print(out, "{}\n", line);
      line.clear();
    }
  }
}

void print_table(std::FILE* out, const std::vector<const PointResult*>& points,
                 const std::vector<std::string>& names) {
  const bool named = !names.empty();
  size_t w = 6;
  for (const auto& n : names) w = std::max(w, n.size());
  bool spec = false;  // speculation columns only when some point has counters
  for (const PointResult* p : points) spec = spec || p->spec_decode.has_value();
  if (named) fmt::print(out, "{:<{}} ", "result", w);
  fmt::print(out,
             "{:<10} {:>5} {:>5} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}{}\n",
             "point", "ok", "fail", "req/s", "good/s", "out tok/s", "TTFT p50", "TTFT p99",
             "TPOT p50", "TPOT p99", "ITL p50", "E2E p50", "cpu ms",
             spec ? fmt::format(" {:>7} {:>7}", "accept", "tok/vf") : "");
  for (size_t i = 0; i < points.size(); ++i) {
    const Summary& s = points[i]->summary;
    if (named) fmt::print(out, "{:<{}} ", i < names.size() ? names[i] : "", w);
    fmt::print(out,
               "{:<10} {:>5} {:>5} {:>8.2f} {:>8} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.2f} {:>9.2f} "
               "{:>9.2f} {:>8.1f} {:>7.3f}",
               points[i]->label, s.completed, s.failed, s.request_throughput,
               s.has_slo ? fmt::format("{:.2f}", s.goodput) : "-", s.output_token_throughput,
               s.ttft_ms.median, s.ttft_ms.p99, s.tpot_ms.median, s.tpot_ms.p99, s.itl_ms.median,
               s.e2e_ms.median, s.cpu_ms_per_request);
    const auto& d = points[i]->spec_decode;
    if (spec && d)
      fmt::print(out, " {:>6.1f}% {:>7.2f}", 100 * d->acceptance_rate,
                 d->mean_tokens_per_verification);
    else if (spec)
      fmt::print(out, " {:>7} {:>7}", "-", "-");
    fmt::print(out, "\n");
  }
}

}  // namespace cadenza::loadgen
