// `cadenza pull hf://ORG/REPO/FILE.gguf [-o DIR]` (or ms://, or a URL): download a GGUF model
// (src/hub, docs/pull.md).
#include "hub/pull.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/commands.h"

namespace cadenza::cli {
namespace {

struct PullArgs {
  std::string source;
  std::string output_dir;
  std::string endpoint;
  std::string sha256;
  bool force = false;
  bool quiet = false;
};

int run_pull(const PullArgs& a) {
  hub::PullOptions o;
  o.source = a.source;
  o.output_dir = a.output_dir;
  o.endpoint = a.endpoint;
  o.sha256 = a.sha256;
  o.force = a.force;
  hub::apply_environment(o);  // HF_TOKEN/HF_ENDPOINT or MODELSCOPE_*, unless given
  auto resolved = hub::resolve_source(o.source, o.endpoint);
  if (!resolved) {
    std::fprintf(stderr, "cadenza pull: %s\n", resolved.error().c_str());
    return 1;
  }
  const std::string name = resolved->file_name;
  // Progress on stderr: one line rewritten in place on a terminal, a line every 10 s otherwise.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto last = std::chrono::steady_clock::now();
  bool drew = false;
  if (!a.quiet) {
    o.on_progress = [&](const hub::DownloadProgress& p) {
      const auto now = std::chrono::steady_clock::now();
      if (tty) {
        if (now - last < std::chrono::milliseconds(250) && p.done != p.total) return;
        std::fprintf(stderr, "\r%s\033[K", hub::progress_line(name, p).c_str());
        drew = true;
      } else {
        if (now - last < std::chrono::seconds(10) && p.done != p.total) return;
        std::fprintf(stderr, "%s\n", hub::progress_line(name, p).c_str());
      }
      last = now;
    };
    o.on_info = [](const std::string& s) { std::fprintf(stderr, "cadenza pull: %s\n", s.c_str()); };
  }
  auto r = hub::pull(o);
  if (drew) std::fputc('\n', stderr);
  if (!r) {
    std::fprintf(stderr, "cadenza pull: %s\n", r.error().c_str());
    return 1;
  }
  if (!a.quiet && r->downloaded)
    std::fprintf(
        stderr, "cadenza pull: %s: %lld bytes%s, %s\n", name.c_str(),
        static_cast<long long>(r->size),
        r->resumed_from > 0 ? fmt::format(" (resumed at {})", r->resumed_from).c_str() : "",
        r->sha256.empty() ? "SHA-256 not verified" : ("SHA-256 " + r->sha256 + " OK").c_str());
  // The local path on stdout (one line), for scripts: cadenza serve -m "$(cadenza pull ...)".
  std::printf("%s\n", r->path.c_str());
  return 0;
}

}  // namespace

Command pull_command() {
  auto args = std::make_shared<PullArgs>();
  Command c;
  c.name = "pull";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "pull",
        "Download a GGUF model: hf://ORG/REPO/FILE.gguf (Hugging Face), ms://ORG/REPO/FILE.gguf "
        "(ModelScope) or an https:// URL (docs/pull.md)");
    sub->add_option("source", args->source,
                    "hf:// or ms://ORG/REPO[@REVISION]/FILE.gguf, or http(s):// URL")
        ->required();
    sub->add_option("-o,--output-dir", args->output_dir,
                    "Folder for the file (default: the cache, $CADENZA_CACHE_DIR or "
                    "~/.cache/cadenza)");
    sub->add_option("--endpoint", args->endpoint,
                    "Hub address (default: $HF_ENDPOINT, else https://huggingface.co; for ms:// "
                    "$MODELSCOPE_ENDPOINT, else https://modelscope.cn)");
    sub->add_option("--sha256", args->sha256,
                    "Expected SHA-256 (default: the hub's ETag, or ModelScope's file list)");
    sub->add_flag("--force", args->force, "Download again even when the file exists");
    sub->add_flag("-q,--quiet", args->quiet, "No progress line");
  };
  c.run = [args] { return run_pull(*args); };
  return c;
}

}  // namespace cadenza::cli
