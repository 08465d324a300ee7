#include "loadgen/bench_serve_cli.h"

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "loadgen/serve_command.h"

namespace cadenza::loadgen {

std::function<std::optional<int>()> add_bench_serve(CLI::App& bench) {
  auto o = std::make_shared<ServeOptions>();
  auto* serve = bench.add_subcommand(
      "serve", "Load-test an OpenAI-compatible server (latency, throughput, goodput)");
  serve->add_option("--url", o->url, "Server base URL (http://HOST:PORT[/v1] or a full path)")
      ->capture_default_str();
  serve->add_option("--model", o->model, "Model name sent in each request")->required();
  auto endpoint = std::make_shared<std::string>("chat");
  serve->add_option("--endpoint", *endpoint, "chat (/v1/chat/completions) or completions")
      ->capture_default_str()
      ->check(CLI::IsMember({"chat", "completions"}));
  serve->add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer KEY'");
  serve->add_option("--request-rate", o->request_rate,
                    "Open loop: Poisson arrivals at R requests/s, or inf (all at once)");
  serve
      ->add_option("--concurrency", o->concurrency,
                   "Closed loop: C workers with one request each (default 1); with "
                   "--request-rate: cap on requests in flight")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--num-requests", o->num_requests,
                    "Requests per run point (default 100; unlimited with --duration)");
  serve->add_option("--duration", o->duration_s, "Stop sending after S seconds")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--warmup", o->warmup, "Requests sent and discarded before measuring")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--input-len", o->workload.input.mean, "Prompt tokens (random workload)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* out_len =
      serve->add_option("--output-len", o->workload.output.mean, "max_tokens of each request")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
  auto dist = std::make_shared<std::string>("fixed");
  serve->add_option("--len-dist", *dist, "Length distribution: fixed, uniform or normal")
      ->capture_default_str()
      ->check(CLI::IsMember({"fixed", "uniform", "normal"}));
  serve
      ->add_option("--len-spread", o->workload.input.spread,
                   "Relative spread s: uniform on [L(1-s), L(1+s)], normal sd = sL")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--min-len", o->workload.input.min_len, "Lower clamp of drawn lengths")
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-len", o->workload.input.max_len, "Upper clamp of drawn lengths");
  serve
      ->add_option("--shared-prefix-groups", o->workload.prefix_groups,
                   "Shared-prefix workload: G groups ...")
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--shared-prefix-len", o->workload.prefix_len,
                   "... each repeating a P-token system prompt")
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--dataset", o->workload.dataset,
                   "JSONL prompts: {prompt}, {messages} or ShareGPT {conversations} per line")
      ->check(CLI::ExistingFile);
  serve->add_flag("--ignore-eos", o->ignore_eos, "Ask the server to generate max_tokens tokens");
  serve->add_option("--temperature", o->temperature, "Sampling temperature sent (0: greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--top-p", o->top_p, "top_p sent (default: not sent)")
      ->check(CLI::Range(0.0, 1.0));
  serve->add_option("--top-k", o->top_k, "top_k sent (default: not sent)")
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--tokenizer", o->tokenizer,
                   "GGUF file whose tokenizer builds exact-length prompts (and counts output "
                   "tokens when the server sends no usage)")
      ->check(CLI::ExistingFile);
  serve->add_option("--seed", o->workload.seed, "Seed of prompts, lengths and arrivals")
      ->capture_default_str();
  serve->add_option("--timeout", o->timeout_s, "Per-request timeout in seconds")
      ->capture_default_str();
  serve->add_option("--slo-ttft-ms", o->slo.ttft_ms, "TTFT objective for goodput");
  serve->add_option("--slo-tpot-ms", o->slo.tpot_ms, "TPOT objective for goodput");
  serve->add_option("--json", o->json_path, "Write every request's timings and the summary");
  serve->add_option("--sweep-concurrency", o->sweep_concurrency, "Closed-loop sweep, e.g. 1,2,4,8");
  serve->add_option("--sweep-rate", o->sweep_rate, "Open-loop sweep, e.g. 1,2,4,inf");
  serve->add_option("--report", o->report_path, "Write a self-contained HTML report");
  serve->add_option("--name", o->name, "Name of this result in reports (default: --model)");
  serve->add_flag("--quiet", o->quiet, "Only the final table");

  auto files = std::make_shared<std::vector<std::string>>();
  auto compare_report = std::make_shared<std::string>();
  auto* compare = bench.add_subcommand("compare", "Compare `bench serve --json` result files");
  compare->add_option("files", *files, "Result files")->required()->check(CLI::ExistingFile);
  compare->add_option("--report", *compare_report, "Write an HTML report overlaying the files");

  return
      [o, files, compare_report, serve, compare, out_len, endpoint, dist]() -> std::optional<int> {
        if (serve->parsed()) {
          ServeOptions opts = *o;
          opts.api = *endpoint == "completions" ? ApiKind::completions : ApiKind::chat;
          opts.workload.input.dist = *dist == "uniform"  ? LenDist::uniform
                                     : *dist == "normal" ? LenDist::normal
                                                         : LenDist::fixed;
          opts.workload.output_len_explicit = out_len->count() > 0;
          // One distribution and clamp for both lengths.
          opts.workload.output.dist = opts.workload.input.dist;
          opts.workload.output.spread = opts.workload.input.spread;
          opts.workload.output.min_len = opts.workload.input.min_len;
          opts.workload.output.max_len = opts.workload.input.max_len;
          return run_bench_serve(opts);
        }
        if (compare->parsed()) return run_bench_compare(*files, *compare_report);
        return std::nullopt;
      };
}

}  // namespace cadenza::loadgen
