// Option helpers shared by the subcommands (sizes with units, thread counts, KV sizing, the KV
// cache element type).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <memory>

#include "engine/engine_core.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace cadenza::cli {

// Parses "1073741824", "1GiB", "512MiB", "1.5G", "100MB": KiB/MiB/GiB/TiB and bare K/M/G/T are
// powers of 1024, KB/MB/GB/TB powers of 1000. Errors name `option`.
Result<int64_t> parse_byte_size(std::string_view option, const std::string& text);

// The whole of a text file (calibration or evaluation text). Errors: missing, unreadable.
Result<std::string> read_text_file(const std::string& path);

// The thread count to use: `requested` when positive, else every hardware thread.
int resolve_threads(int requested);

// Bytes of one KV block (all layers' K and V) for this model and engine configuration.
Result<int64_t> kv_block_bytes(const model::ModelConfig& model, const engine::EngineConfig& engine);

// Bytes of a hybrid model's recurrent states for engine.max_num_seqs sequences (0 for other
// models): kv_blocks_for_memory takes them out of the budget before counting blocks.
int64_t recurrent_state_bytes(const model::ModelConfig& model, const engine::EngineConfig& engine);

// KV blocks that fit in the memory budget `text` (a size as above) for this model and engine
// configuration (block size, KV element type; a hybrid model's recurrent states first). An
// error when the budget holds no block.
Result<int32_t> kv_blocks_for_memory(const model::ModelConfig& model,
                                     const engine::EngineConfig& engine, const std::string& text);

// The KV cache element type named by --kv-cache-type: "f16" -> F16, "q8" (or "q8_0") -> Q8_0
// (blocks of 32 values: an f16 scale + 32 int8, about 53% of f16's bytes; head dims must be
// multiples of 32), "f32" -> F32. Case-insensitive. Errors name the option and the choices.
Result<DType> parse_kv_cache_type(std::string_view text);
// The name parse_kv_cache_type maps to `type` ("f16", "q8", "f32"; dtype_name otherwise).
std::string kv_cache_type_name(DType type);

// Adds `--kv-cache-type {f16,q8,f32}` to `sub`, checked when the command line is parsed (a bad
// value is a usage error) and stored into `value`, which keeps its default (F16 for the engine
// and sessions) when the option is absent. `value` must outlive the parse.
CLI::Option* add_kv_cache_type_option(CLI::App& sub, DType& value);

// The KV tier options (engine/kv_tiers.h, docs/kv-tiers.md) as typed: sizes in parse_byte_size's
// form, empty when absent.
struct KvTierArgs {
  std::string offload_memory;  // --kv-offload-memory SIZE
  std::string disk_dir;        // --kv-disk-dir DIR
  std::string disk_size;       // --kv-disk-size SIZE
};
// Adds --kv-offload-memory, --kv-disk-dir and --kv-disk-size to `sub`, bound to `value` (which
// must outlive the parse).
void add_kv_tier_options(CLI::App& sub, KvTierArgs& value);
// The engine's tier configuration. Errors: a bad size, a disk directory without a size or a
// size without a directory.
Result<engine::KvTierConfig> kv_tier_config(const KvTierArgs& args);

// The KV layout options (src/kv/README.md) as typed: sliding-window layers' window group and hybrid
// models' recurrent-state snapshots.
struct KvLayoutArgs {
  bool no_sliding_window_kv = false;  // --no-sliding-window-kv
  std::string state_snapshot_memory;  // --state-snapshot-memory SIZE (empty: the engine's default)
};
// Adds --no-sliding-window-kv and --state-snapshot-memory to `sub`, bound to `value` (which must
// outlive the parse).
void add_kv_layout_options(CLI::App& sub, KvLayoutArgs& value);
// Sets EngineConfig::sliding_window_kv and state_snapshot_bytes. Errors: a bad size. Apply
// before kv_blocks_for_memory (the window group changes the sizing).
Status apply_kv_layout_options(const KvLayoutArgs& args, engine::EngineConfig& engine);

// Adds the speculative decoding options (docs/speculative.md) to `sub`, bound to `value`:
// --speculative-method {none,ngram,draft} (checked at parse time), --num-speculative-tokens K,
// --speculative-adaptive BOOL, --ngram-min N, --ngram-max N, --draft-model FILE. Their ranges,
// the draft model's presence and whether it loads with the target's vocabulary are checked by
// engine::EngineCore::create (a clear start-up error naming the option or file). `value` must
// outlive the parse.
void add_speculative_options(CLI::App& sub, engine::SpeculativeConfig& value);
// One line for a report: verification passes, draft tokens, accepted (and the rate), emitted
// tokens per pass, from the engine's counters.
std::string speculative_summary(const engine::EngineStats& stats);

// The compute-backend options of every command that runs a model (run, generate, bench, serve).
struct BackendArgs {
  int threads = 0;             // -t/--threads: kernel threads, 0 = every hardware thread
  std::string device = "cpu";  // --device: cpu, cuda, cuda:N (kernels/backend_factory.h)
  bool no_repack = false;      // --no-repack: the CPU backend keeps no repacked weight copies
  bool cpu_moe = false;        // --cpu-moe: every layer's routed experts on a CPU backend
  int64_t n_cpu_moe = 0;       // --n-cpu-moe N: those of the first N layers
};
// Adds -t/--threads (with `threads_help`), --device, --no-repack, --cpu-moe and --n-cpu-moe to
// `sub`, bound to `args`.
void add_backend_options(CLI::App& sub, BackendArgs& args,
                         const char* threads_help = "Threads (default: all cores)");
// The model's backend and, with --cpu-moe / --n-cpu-moe, the CPU backend that holds the experts
// (both must outlive the model; `expert_offload()` goes into ModelLoadOptions).
struct Backends {
  std::unique_ptr<kernels::Backend> main;
  std::unique_ptr<kernels::Backend> experts;  // null without --cpu-moe / --n-cpu-moe
  int64_t expert_layers = 0;
  model::ModelConfig::ExpertOffload expert_offload() const {
    return {.backend = experts.get(), .layers = expert_layers};
  }
};
// What `args` asks for (kernels::create_backend; threads resolved by resolve_threads).
Result<Backends> create_backends(const BackendArgs& args);

// Sets the options of `app` that were not given on the command line from the TOML file `path`:
// one `name = value` per line, names as the long options without the dashes (`port = 8080`,
// `api-key = ["a", "b"]`, `no-warmup = true`); a `[section]` must be the subcommand's name.
// The command line wins. Errors: missing or malformed file, an unknown name, a bad value.
// Call after parsing, before using the options.
Status apply_config_file(CLI::App& app, const std::string& path);

}  // namespace cadenza::cli
