// `cadenza quantize IN.gguf OUT.gguf TYPE [options]`: writes IN quantized to TYPE (a plain type or
// a K-quant mixture; quantize/mixture.h has the rules, docs/quantize.md the table). A progress
// bar on stderr when it is a terminal; the summary (sizes, bits per weight, time, tensors per
// type) on stdout. Exit 1 with the reason on any error.
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "quantize/quantize.h"

namespace cadenza::cli {
namespace {

struct QuantizeArgs {
  std::string input, output, type;
  std::vector<std::string> tensor_types;
  std::string output_type, embedding_type, imatrix;
  bool pure = false;
  bool dry_run = false;
  bool awq = false;
  float awq_alpha = NAN;  // NAN: not given
  int threads = 0;
};

double gib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024 * 1024); }

Result<DType> parse_type_option(const std::string& option, const std::string& name) {
  const std::optional<DType> t = dtype_from_name(name);
  if (!t || !traits(*t).compute_supported) return make_error("{} '{}': unknown or unsupported type", option, name);
  return *t;
}

int run_quantize(const QuantizeArgs& a) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "quantize: %s\n", m.c_str());
    return 1;
  };
  quantize::Options o;
  o.input = a.input;
  o.output = a.output;
  Result<quantize::Target> target = quantize::parse_target(a.type);
  if (!target) return fail(target.error());
  o.target = *target;
  for (const std::string& spec : a.tensor_types) {
    Result<quantize::Overrides::Pattern> p = quantize::parse_tensor_type(spec);
    if (!p) return fail(p.error());
    o.overrides.tensor_types.push_back(std::move(*p));
  }
  if (!a.output_type.empty()) {
    Result<DType> t = parse_type_option("--output-tensor-type", a.output_type);
    if (!t) return fail(t.error());
    o.overrides.output_type = *t;
  }
  if (!a.embedding_type.empty()) {
    Result<DType> t = parse_type_option("--token-embedding-type", a.embedding_type);
    if (!t) return fail(t.error());
    o.overrides.token_embedding_type = *t;
  }
  o.overrides.pure = a.pure;
  o.imatrix = a.imatrix;
  o.awq.enabled = a.awq || !std::isnan(a.awq_alpha);
  if (!std::isnan(a.awq_alpha)) o.awq.alpha = a.awq_alpha;
  o.plan_only = a.dry_run;
  o.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (tty) {
    o.progress = [](uint64_t done, uint64_t total) {
      const int width = 40;
      const double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
      const int fill = static_cast<int>(f * width);
      std::fprintf(stderr, "\r[%s%s] %3.0f%% %.2f / %.2f GiB", std::string(static_cast<size_t>(fill), '=').c_str(),
                   std::string(static_cast<size_t>(width - fill), ' ').c_str(), 100 * f, gib(done), gib(total));
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  spdlog::info("quantize: {} -> {} as {} ({} threads)", a.input, a.dry_run ? "(dry run)" : a.output,
               o.target.name, o.threads);
  Result<quantize::Summary> s = quantize::quantize_model(o);
  if (!s) return fail(s.error());
  if (a.dry_run) {
    for (const quantize::TensorReport& t : s->tensors) {
      std::printf("%-40s %-8s -> %-8s%s\n", t.name.c_str(), std::string(dtype_name(t.from)).c_str(),
                  std::string(dtype_name(t.to)).c_str(),
                  t.fallback ? fmt::format(" (fallback from {})", dtype_name(t.wanted)).c_str() : "");
    }
  }
  std::map<std::string, int> by_type;
  int fallbacks = 0;
  for (const quantize::TensorReport& t : s->tensors) {
    ++by_type[std::string(dtype_name(t.to))];
    fallbacks += t.fallback ? 1 : 0;
  }
  std::string types;
  for (const auto& [name, n] : by_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", n, name);
  std::printf("%s: %s, %.2f GiB of tensors -> %.2f GiB (%.2f bits per weight)%s\n",
              a.dry_run ? "plan" : "wrote", a.dry_run ? a.input.c_str() : a.output.c_str(),
              gib(s->bytes_in), gib(s->bytes_out), s->bits_per_weight(),
              a.dry_run ? "" : fmt::format(", file {:.2f} GiB, {:.1f} s", gib(s->file_bytes), s->seconds).c_str());
  std::printf("tensors: %s%s%s\n", types.c_str(),
              fallbacks ? fmt::format("; {} fell back (row length)", fallbacks).c_str() : "",
              s->requantized ? fmt::format("; {} re-quantized from a quantized input", s->requantized).c_str() : "");
  if (!a.imatrix.empty()) std::printf("imatrix: %d tensors weighted by %s\n", s->weighted, a.imatrix.c_str());
  if (o.awq.enabled && !a.dry_run) {
    // Per kind of fold point (attn_in, ffn_in, ffn_down, attn_out): how many were scaled, the
    // mean alpha, and the searched weighted error against no scaling.
    struct Kind {
      int n = 0, scaled = 0;
      double alpha = 0, error = 0, plain = 0;
    };
    std::map<std::string, Kind> kinds;
    for (const quantize::AwqGroup& g : s->awq_groups) {
      const size_t dot = g.name.rfind('.');
      Kind& k = kinds[dot == std::string::npos ? g.name : g.name.substr(dot + 1)];
      ++k.n;
      k.scaled += g.alpha > 0 ? 1 : 0;
      k.alpha += g.alpha;
      k.error += g.error;
      k.plain += g.error_plain;
    }
    std::string parts;
    for (const auto& [name, k] : kinds) {
      parts += fmt::format("{}{} {}/{} scaled, mean alpha {:.2f}", parts.empty() ? "" : "; ", name, k.scaled, k.n,
                           k.alpha / k.n);
      if (k.plain > 0) parts += fmt::format(", weighted error x{:.3f}", k.error / k.plain);
    }
    std::printf("awq: %s; %zu fold points left plain\n", parts.c_str(), s->awq_skipped.size());
    for (const std::string& why : s->awq_skipped) spdlog::info("awq: left plain: {}", why);
  }
  return 0;
}

}  // namespace

Command quantize_command() {
  auto args = std::make_shared<QuantizeArgs>();
  Command c;
  c.name = "quantize";
  c.add = [args](CLI::App& app) {
    std::string types;
    for (const std::string& t : quantize::target_names()) types += (types.empty() ? "" : " ") + t;
    auto* sub = app.add_subcommand("quantize", "Write a GGUF model quantized to another type (docs/quantize.md)");
    sub->add_option("input", args->input, "Input GGUF (F32/F16/BF16; a quantized one is decoded first)")->required();
    sub->add_option("output", args->output, "Output GGUF")->required();
    sub->add_option("type", args->type, "Target: " + types)->required();
    sub->add_option("--tensor-type", args->tensor_types,
                    "PATTERN=TYPE: tensors whose name matches the regular expression get TYPE "
                    "(repeatable; the first match wins)");
    sub->add_option("--output-tensor-type", args->output_type, "Type of output.weight");
    sub->add_option("--token-embedding-type", args->embedding_type, "Type of token_embd.weight");
    sub->add_option("--imatrix", args->imatrix,
                    "Importance matrix (cadenza imatrix): weight each tensor's rounding error by "
                    "its input channels' activations");
    sub->add_flag("--awq", args->awq,
                  "Activation-aware per-channel scales (AWQ) from the imatrix, folded into the norms "
                  "and producing matrices, alpha searched per fold point (needs --imatrix)");
    sub->add_option("--awq-alpha", args->awq_alpha,
                    "Use this alpha (0..1) at every fold point instead of searching it (implies --awq)");
    sub->add_flag("--pure", args->pure, "No mixture rules: every matrix gets the base type");
    sub->add_flag("--dry-run", args->dry_run, "Print each tensor's type and the sizes; write nothing");
    sub->add_option("-t,--threads", args->threads, "Threads (default: all cores)");
  };
  c.run = [args] { return run_quantize(*args); };
  return c;
}

}  // namespace cadenza::cli
