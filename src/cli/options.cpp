#include "cli/options.h"

#include "kernels/backend_factory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>
#include <cctype>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <thread>
#include <utility>

#include "kv/kv_sizing.h"

namespace cadenza::cli {

Result<int64_t> parse_byte_size(std::string_view option, const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  const std::string number = text.substr(0, pos);
  std::string unit = text.substr(pos);
  if (number.find_first_of("0123456789") == std::string::npos ||
      std::count(number.begin(), number.end(), '.') > 1)
    return make_error("{}: '{}' is not a size (e.g. 1073741824, 1GiB, 512MiB)", option, text);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 0;
  const std::pair<const char*, double> units[] = {
      {"", 1},        {"B", 1},         {"K", 0x1p10},    {"KIB", 0x1p10}, {"KB", 1e3},
      {"M", 0x1p20},  {"MIB", 0x1p20},  {"MB", 1e6},      {"G", 0x1p30},   {"GIB", 0x1p30},
      {"GB", 1e9},    {"T", 0x1p40},    {"TIB", 0x1p40},  {"TB", 1e12}};
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  if (scale == 0)
    return make_error("{}: unknown unit '{}' in '{}' (B, KiB, MiB, GiB, KB, MB, GB)", option,
                      text.substr(pos), text);
  const double bytes = std::stod(number) * scale;
  if (!(bytes >= 1) || bytes > 0x1p62) return make_error("{}: '{}' is out of range", option, text);
  return static_cast<int64_t>(bytes);
}

int resolve_threads(int requested) {
  return requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
}

namespace {

// window_layers: which attention layers to count: -1 all, 0 those outside a window group, 1
// those in it (engine::kv_window_for > 0: the windowed ones keep a block group of their own).
kv::KvShape kv_shape(const model::ModelConfig& model, const engine::EngineConfig& engine,
                     int window_layers = -1) {
  // EngineConfig::kv_type is one of the three types parse_kv_cache_type gives.
  kv::KvElementType type = kv::KvElementType::kF32;
  if (engine.kv_type == DType::F16) type = kv::KvElementType::kF16;
  if (engine.kv_type == DType::Q8_0) type = kv::KvElementType::kQ8_0;
  // A hybrid model's recurrent layers keep no K/V (model::KvCache): only its attention layers
  // count per block.
  int64_t layers = model.n_layers;
  for (int64_t l = 0; l < model.n_layers; ++l) {
    const bool windowed = model.attention_window(l) > 0;
    const bool counted = window_layers < 0 || windowed == (window_layers == 1);
    layers -= model.is_recurrent(l) || !counted ? 1 : 0;
  }
  return {.n_layers = layers,
          .n_kv_heads = model.n_kv_heads,
          .head_dim_k = model.head_dim_k,
          .head_dim_v = model.head_dim_v,
          .type = type,
          .block_size = engine.block_size,
          .values_in_keys = model.kv_values_in_keys};
}

}  // namespace

Result<int64_t> kv_block_bytes(const model::ModelConfig& model, const engine::EngineConfig& engine) {
  return kv::kv_bytes_per_block(kv_shape(model, engine));
}

int64_t recurrent_state_bytes(const model::ModelConfig& model, const engine::EngineConfig& engine) {
  int64_t layers = 0;
  for (int64_t l = 0; l < model.n_layers; ++l) layers += model.is_recurrent(l) ? 1 : 0;
  const model::ModelConfig::RecurrentShape& r = model.recurrent;
  return layers * (r.conv_state_floats() + r.delta_state_floats()) *
         static_cast<int64_t>(sizeof(float)) * engine.max_num_seqs;
}

Result<int32_t> kv_blocks_for_memory(const model::ModelConfig& model,
                                     const engine::EngineConfig& engine, const std::string& text) {
  auto budget = parse_byte_size("--kv-cache-memory", text);
  if (!budget) return budget.error_value();
  const kv::KvShape shape = kv_shape(model, engine);
  auto block_bytes = kv::kv_bytes_per_block(shape);
  if (!block_bytes) return block_bytes.error_value();
  // A hybrid model's recurrent states (one per running sequence, fixed size) come out of the
  // budget first.
  const int64_t state_bytes = recurrent_state_bytes(model, engine);
  if (state_bytes >= *budget) {
    return make_error("--kv-cache-memory {} does not hold the {} bytes of recurrent state of {} "
                      "sequences", text, state_bytes, engine.max_num_seqs);
  }
  auto blocks = kv::kv_num_blocks_for_budget(shape, *budget - state_bytes);
  if (!blocks) return blocks.error_value();
  // With a window group (as the engine will build it), its blocks come out of the budget next
  // and the main pool counts only the other layers. Worth it only if the group is smaller than
  // the main pool would be (the engine caps it there); else every layer counts per block.
  if (const int32_t window = engine::kv_window_for(model, engine); window > 0) {
    const kv::KvShape main = kv_shape(model, engine, 0);
    const kv::KvShape windowed = kv_shape(model, engine, 1);
    auto main_bytes = kv::kv_bytes_per_block(main);
    auto window_bytes = kv::kv_bytes_per_block(windowed);
    if (!main_bytes) return main_bytes.error_value();
    if (!window_bytes) return window_bytes.error_value();
    const int64_t n_window = kv::kv_window_blocks(window, engine.block_size, engine.max_num_seqs,
                                                  engine.max_num_batched_tokens,
                                                  std::numeric_limits<int32_t>::max());
    const int64_t left = *budget - state_bytes - n_window * *window_bytes;
    if (left > 0 && *main_bytes > 0) {
      const int64_t n_main = std::min<int64_t>(left / *main_bytes, std::numeric_limits<int32_t>::max());
      if (n_main > n_window) blocks = static_cast<int32_t>(n_main);
    }
  }
  if (*blocks == 0)
    return make_error("--kv-cache-memory {} is smaller than one KV block ({} bytes)", text,
                      *block_bytes);
  return *blocks;
}

Result<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return make_error("{}: no such text file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot open the text file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<DType> parse_kv_cache_type(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "f16") return DType::F16;
  if (lower == "q8" || lower == "q8_0") return DType::Q8_0;
  if (lower == "f32") return DType::F32;
  return make_error("--kv-cache-type: '{}' is not a KV cache type (f16, q8 or f32)", text);
}

std::string kv_cache_type_name(DType type) {
  switch (type) {
    case DType::F16: return "f16";
    case DType::Q8_0: return "q8";
    case DType::F32: return "f32";
    default: return std::string(dtype_name(type));
  }
}

void add_backend_options(CLI::App& sub, BackendArgs& args, const char* threads_help) {
  sub.add_option("-t,--threads", args.threads, threads_help);
  sub.add_option("--device", args.device, "Backend: cpu, cuda or cuda:N (docs/cuda.md)")
      ->capture_default_str();
  sub.add_flag("--no-repack", args.no_repack,
               "CPU: multiply from the weights as mapped, making no repacked copies (for models "
               "near the size of RAM; by default copies are made while they fit in half the "
               "memory available at start)");
  sub.add_flag("--cpu-moe", args.cpu_moe,
               "MoE models: keep every layer's routed experts on the CPU (in host memory) beside "
               "a --device cuda model; the rest of the model runs on the GPU");
  sub.add_option("--n-cpu-moe", args.n_cpu_moe,
                 "MoE models: keep the routed experts of the first N layers on the CPU")
      ->check(CLI::NonNegativeNumber);
}

Result<Backends> create_backends(const BackendArgs& args) {
  const kernels::BackendOptions options{.n_threads = resolve_threads(args.threads),
                                        .repack = !args.no_repack};
  Backends out;
  Result<std::unique_ptr<kernels::Backend>> main = kernels::create_backend(args.device, options);
  if (!main) return main.error_value();
  out.main = std::move(*main);
  if (args.cpu_moe || args.n_cpu_moe > 0) {
    if (args.cpu_moe && args.n_cpu_moe > 0) {
      return Error("--cpu-moe and --n-cpu-moe: give one of them");
    }
    Result<std::unique_ptr<kernels::Backend>> cpu = kernels::create_backend("cpu", options);
    if (!cpu) return cpu.error_value();
    out.experts = std::move(*cpu);
    out.expert_layers = args.cpu_moe ? std::numeric_limits<int64_t>::max() : args.n_cpu_moe;
    if (out.main->device_ordinal() < 0) {
      spdlog::info("--cpu-moe / --n-cpu-moe with --device cpu: the experts run on a second CPU "
                   "backend (the same memory; useful to check a placement, not faster)");
    }
  }
  return out;
}

CLI::Option* add_kv_cache_type_option(CLI::App& sub, DType& value) {
  const std::string default_name = kv_cache_type_name(value);
  return sub
      .add_option_function<std::string>(
          "--kv-cache-type",
          [&value](const std::string& text) {
            if (Result<DType> t = parse_kv_cache_type(text)) value = *t;
          },
          "KV cache element type: f16, q8 (8-bit Q8_0 blocks of 32 values with an f16 scale: "
          "about half of f16's memory; head dims must be multiples of 32) or f32")
      ->check(CLI::Validator(
          [](std::string& text) {
            // CLI11 puts the option name in front of the message itself.
            Result<DType> t = parse_kv_cache_type(text);
            if (t) return std::string();
            const std::string prefix = "--kv-cache-type: ";
            const std::string& e = t.error();
            return e.rfind(prefix, 0) == 0 ? e.substr(prefix.size()) : e;
          },
          "{f16,q8,f32}"))
      ->default_str(default_name);
}

void add_speculative_options(CLI::App& sub, engine::SpeculativeConfig& value) {
  sub.add_option_function<std::string>(
         "--speculative-method",
         [&value](const std::string& text) {
           if (auto m = engine::parse_speculative_method(text)) value.method = *m;
         },
         "Speculative decoding: none, ngram (prompt lookup: drafts copied from the prompt and "
         "output, verified in one pass; faster when the text quotes its input) or draft (drafts "
         "from --draft-model); greedy output unchanged, sampled output of the same distribution")
      ->check(CLI::Validator(
          [](std::string& text) {
            auto m = engine::parse_speculative_method(text);
            return m ? std::string() : m.error();
          },
          "{none,ngram,draft}"))
      ->default_str(engine::to_string(value.method));
  sub.add_option("--num-speculative-tokens", value.num_speculative_tokens,
                 "Most draft tokens per request and step (1-32)")
      ->capture_default_str();
  sub.add_option("--speculative-adaptive", value.adaptive,
                 "true: each step's draft count per request (0 to the most) follows the measured "
                 "acceptance and step cost, so speculation stops where it does not pay; false: "
                 "always the most")
      ->capture_default_str();
  sub.add_option("--ngram-min", value.ngram_min, "Shortest suffix the n-gram lookup matches")
      ->capture_default_str();
  sub.add_option("--ngram-max", value.ngram_max, "Longest suffix the n-gram lookup matches (<= 32)")
      ->capture_default_str();
  // Not CLI::ExistingFile: the engine's start-up error names the file and says what is wrong.
  sub.add_option("--draft-model", value.draft_model,
                 "With --speculative-method draft: a smaller GGUF with the same vocabulary (or the "
                 "model itself quantized lower) that drafts the tokens; runs on the same device");
}

std::string speculative_summary(const engine::EngineStats& s) {
  const auto ratio = [](int64_t a, int64_t b) {
    return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  std::string line = fmt::format(
      "speculative: {} verifications, {} draft tokens, {} accepted ({:.1f}%), {:.2f} tokens per "
      "verification",
      s.num_spec_drafts, s.num_spec_draft_tokens, s.num_spec_accepted_tokens,
      100.0 * ratio(s.num_spec_accepted_tokens, s.num_spec_draft_tokens),
      ratio(s.num_spec_emitted_tokens, s.num_spec_drafts));
  // Acceptance rate at each draft position that had drafts (accepted there / drafted there).
  if (s.spec_draft_tokens_per_position[0] > 0) {
    line += "; acceptance by position:";
    for (size_t i = 0; i < s.spec_draft_tokens_per_position.size(); ++i) {
      if (s.spec_draft_tokens_per_position[i] == 0) break;
      line += fmt::format(" {:.2f}", ratio(s.spec_accepted_per_position[i], s.spec_draft_tokens_per_position[i]));
    }
  }
  return line;
}

Status apply_config_file(CLI::App& app, const std::string& path) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    return make_error("--config {}: {}", path, e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    if (!item.parents.empty() && (item.parents.size() != 1 || item.parents[0] != app.get_name()))
      return make_error("--config {}: section [{}] is not '{}'", path, item.parents[0],
                        app.get_name());
    CLI::Option* opt = app.get_option_no_throw("--" + item.name);
    if (opt == nullptr || item.name == "config")
      return make_error("--config {}: '{}' is not an option of '{}'", path, item.name,
                        app.get_name());
    if (opt->count() > 0) continue;  // given on the command line: that wins
    try {
      opt->add_result(item.inputs);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return make_error("--config {}: '{}': {}", path, item.name, e.what());
    }
  }
  return {};
}

}  // namespace cadenza::cli

namespace cadenza::cli {

void add_kv_tier_options(CLI::App& sub, KvTierArgs& value) {
  sub.add_option("--kv-offload-memory", value.offload_memory,
                 "Host-memory tier for evicted prefix-cache KV blocks, e.g. 8GiB (default: none)");
  sub.add_option("--kv-disk-dir", value.disk_dir,
                 "Directory of the disk tier for evicted prefix-cache KV blocks; it persists "
                 "across restarts (needs --kv-disk-size)");
  sub.add_option("--kv-disk-size", value.disk_size, "Disk tier budget, e.g. 100GiB");
}

void add_kv_layout_options(CLI::App& sub, KvLayoutArgs& value) {
  sub.add_flag("--no-sliding-window-kv", value.no_sliding_window_kv,
               "Sliding-window layers (gemma3, gpt-oss) keep full-context KV (default: only their "
               "window, in a block group of their own)");
  sub.add_option("--state-snapshot-memory", value.state_snapshot_memory,
                 "Hybrid models (qwen35): host memory for the recurrent-state snapshots that prefix "
                 "caching resumes from, e.g. 1GiB; 0 turns their prefix caching off (default: 512MiB)");
}

Status apply_kv_layout_options(const KvLayoutArgs& args, engine::EngineConfig& engine) {
  engine.sliding_window_kv = !args.no_sliding_window_kv;
  if (!args.state_snapshot_memory.empty()) {
    auto n = parse_byte_size("--state-snapshot-memory", args.state_snapshot_memory);
    if (!n) return n.error_value();
    engine.state_snapshot_bytes = *n;
  }
  return {};
}

Result<engine::KvTierConfig> kv_tier_config(const KvTierArgs& args) {
  engine::KvTierConfig c;
  if (!args.offload_memory.empty()) {
    auto n = parse_byte_size("--kv-offload-memory", args.offload_memory);
    if (!n) return n.error_value();
    c.memory_bytes = *n;
  }
  if (args.disk_dir.empty() != args.disk_size.empty())
    return make_error("--kv-disk-dir and --kv-disk-size go together");
  if (!args.disk_dir.empty()) {
    auto n = parse_byte_size("--kv-disk-size", args.disk_size);
    if (!n) return n.error_value();
    if (*n <= 0) return make_error("--kv-disk-size must be positive");
    c.disk_dir = args.disk_dir;
    c.disk_bytes = *n;
  }
  return c;
}

}  // namespace cadenza::cli
