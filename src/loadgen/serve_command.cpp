#include "loadgen/serve_command.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "loadgen/report.h"
#include "loadgen/results.h"
#include "loadgen/runner.h"
#include "loadgen/sweep.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::loadgen {
namespace {

const char* dist_name(LenDist d) {
  switch (d) {
    case LenDist::fixed:
      return "fixed";
    case LenDist::uniform:
      return "uniform";
    case LenDist::normal:
      return "normal";
  }
  return "?";
}

nlohmann::json config_json(const ServeOptions& o, size_t num_requests) {
  const auto& w = o.workload;
  nlohmann::json j{{"url", o.url},
                   {"model", o.model},
                   {"endpoint", o.api == ApiKind::chat ? "chat" : "completions"},
                   {"request_rate", o.request_rate.empty() ? "closed-loop" : o.request_rate},
                   {"concurrency", o.concurrency},
                   {"num_requests", num_requests},
                   {"duration_s", o.duration_s},
                   {"warmup", o.warmup},
                   {"input_len", w.input.mean},
                   {"output_len", w.output.mean},
                   {"len_dist", dist_name(w.input.dist)},
                   {"len_spread", w.input.spread},
                   {"ignore_eos", o.ignore_eos},
                   {"temperature", o.temperature},
                   {"seed", w.seed},
                   {"timeout_s", o.timeout_s}};
  if (w.prefix_groups > 0)
    j["shared_prefix"] = {{"groups", w.prefix_groups}, {"len", w.prefix_len}};
  if (!w.dataset.empty()) j["dataset"] = w.dataset;
  if (o.top_p >= 0) j["top_p"] = o.top_p;
  if (o.top_k >= 0) j["top_k"] = o.top_k;
  if (!o.tokenizer.empty()) j["tokenizer"] = o.tokenizer;
  if (o.slo.ttft_ms > 0) j["slo_ttft_ms"] = o.slo.ttft_ms;
  if (o.slo.tpot_ms > 0) j["slo_tpot_ms"] = o.slo.tpot_ms;
  if (!o.sweep_concurrency.empty()) j["sweep_concurrency"] = o.sweep_concurrency;
  if (!o.sweep_rate.empty()) j["sweep_rate"] = o.sweep_rate;
  return j;
}

}  // namespace

int run_bench_serve(const ServeOptions& o, std::FILE* out) {
  auto fail = [](const std::string& msg) {
    fmt::print(stderr, "bench serve: {}\n", msg);
    return 1;
  };
  if (o.model.empty()) return fail("--model is required (the model name the server serves)");
  double rate = 0;
  if (!o.request_rate.empty()) {
    auto r = parse_rate(o.request_rate);
    if (!r) return fail(r.error());
    rate = *r;
  }
  auto points = plan_points(o.sweep_concurrency, o.sweep_rate, rate,
                            o.concurrency > 0 ? o.concurrency : (rate > 0 ? 0 : 1));
  if (!points) return fail(points.error());
  if (auto ep = parse_url(o.url, o.api); !ep) return fail(ep.error());

  std::unique_ptr<Tokenizer> tokenizer;
  if (!o.tokenizer.empty()) {
    auto file = gguf::GgufFile::open(o.tokenizer);
    if (!file) return fail(file.error());
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok) return fail(tok.error());
    tokenizer = std::move(*tok);
  }
  const size_t num = o.num_requests > 0 ? o.num_requests : (o.duration_s > 0 ? 0 : 100);
  // With a duration and no count, a pool of prompts is cycled.
  const size_t pool = num > 0 ? num : 1024;
  auto items = make_workload(o.workload, tokenizer.get(), pool);
  if (!items) return fail(items.error());
  std::vector<WorkItem> warmup_items;
  if (o.warmup > 0) {
    WorkloadOptions w = o.workload;
    w.seed = o.workload.seed + 0x5bd1e995;
    auto wi = make_workload(w, tokenizer.get(), static_cast<size_t>(o.warmup));
    if (!wi) return fail(wi.error());
    warmup_items = std::move(*wi);
  }

  bool scrape_warned = false;
  ResultFile result;
  result.name = o.name.empty() ? o.model : o.name;
  result.config = config_json(o, num);
  for (size_t index = 0; index < points->size(); ++index) {
    const SweepPoint& p = (*points)[index];
    // Each point draws its own prompts (seed + point index): a server with a prefix cache must not
    // find an earlier point's prompts in it.
    if (index > 0) {
      WorkloadOptions w = o.workload;
      w.seed = o.workload.seed + index;
      auto next = make_workload(w, tokenizer.get(), pool);
      if (!next) return fail(next.error());
      items = std::move(next);
    }
    RunConfig cfg;
    cfg.url = o.url;
    cfg.request = {.api = o.api,
                   .model = o.model,
                   .ignore_eos = o.ignore_eos,
                   .temperature = o.temperature,
                   .top_p = o.top_p,
                   .top_k = o.top_k};
    cfg.api_key = o.api_key;
    cfg.request_rate = p.request_rate;
    cfg.concurrency = p.concurrency;
    cfg.num_requests = num;
    cfg.duration_s = o.duration_s;
    cfg.warmup = o.warmup;
    cfg.timeout_s = o.timeout_s;
    cfg.seed = o.workload.seed;
    cfg.metrics_target = "/metrics";  // speculation counters (server-wide) around the point
    if (points->size() > 1) fmt::print(out, "running {} ...\n", p.label);
    std::fflush(out);
    auto run = run_load(cfg, *items, warmup_items, tokenizer.get());
    if (!run) return fail(run.error());
    result.points.push_back(make_point(p.label, p.concurrency, p.request_rate, *run, o.slo));
    if (run->metrics_before.ok && run->metrics_after.ok) {
      result.points.back().spec_decode =
          spec_delta(parse_spec_counters(run->metrics_before.body),
                     parse_spec_counters(run->metrics_after.body));
    } else if (!scrape_warned) {
      // Only the speculation section is lost: the benchmark itself stands. Said once per run (a
      // server without /metrics would repeat it at every point).
      scrape_warned = true;
      const MetricsScrape& bad = run->metrics_before.ok ? run->metrics_after : run->metrics_before;
      fmt::print(stderr,
                 "bench serve: warning: {}: GET /metrics {} the point failed ({}); no "
                 "speculative-decoding counters for it{}\n",
                 p.label, run->metrics_before.ok ? "after" : "before", bad.error,
                 points->size() > 1 ? " (later failures are not reported)" : "");
    }
    if (!o.quiet) print_summary(out, result.points.back());
    // The first failures, so a broken setup is visible without the JSON file.
    size_t shown = 0;
    for (const auto& r : run->records)
      if (!r.ok() && shown++ < 3)
        fmt::print(out, "  request {} failed ({}): {}\n", r.index, to_string(r.error), r.message);
  }
  if (points->size() > 1) {
    std::vector<const PointResult*> rows;
    for (const auto& p : result.points) rows.push_back(&p);
    fmt::print(out, "\n");
    print_table(out, rows);
  }
  if (!o.json_path.empty()) {
    if (auto s = save_result_file(result, o.json_path); !s) return fail(s.error());
    fmt::print(out, "results: {}\n", o.json_path);
  }
  if (!o.report_path.empty()) {
    if (auto s = write_report({result}, "cadenza bench serve: " + result.name, o.report_path); !s)
      return fail(s.error());
    fmt::print(out, "report: {}\n", o.report_path);
  }
  return 0;
}

int run_bench_compare(const std::vector<std::string>& paths, const std::string& report_path,
                      std::FILE* out) {
  std::vector<ResultFile> files;
  for (const auto& path : paths) {
    auto f = load_result_file(path);
    if (!f) {
      fmt::print(stderr, "bench compare: {}\n", f.error());
      return 1;
    }
    files.push_back(std::move(*f));
  }
  // Same names (e.g. two runs of one model) get the file name appended so curves stay apart.
  std::map<std::string, int> uses;
  for (const auto& f : files) ++uses[f.name];
  for (size_t i = 0; i < files.size(); ++i)
    if (uses[files[i].name] > 1)
      files[i].name += " (" + paths[i].substr(paths[i].find_last_of('/') + 1) + ")";
  std::vector<const PointResult*> rows;
  std::vector<std::string> names;
  for (const auto& f : files)
    for (const auto& p : f.points) {
      rows.push_back(&p);
      names.push_back(f.name);
    }
  print_table(out, rows, names);
  if (!report_path.empty()) {
    if (auto s = write_report(files, "cadenza bench compare", report_path); !s) {
      fmt::print(stderr, "bench compare: {}\n", s.error());
      return 1;
    }
    fmt::print(out, "report: {}\n", report_path);
  }
  return 0;
}

}  // namespace cadenza::loadgen
