// `cadenza serve`: the OpenAI-compatible HTTP server (src/server, docs/server.md).
#include <algorithm>
#include <optional>
#include <chrono>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/parallel.h"
#include "engine/engine_core.h"
#include "hub/pull.h"
#include "kernels/backend_factory.h"
#include "kv/kv_sizing.h"
#include "gguf/gguf.h"
#include "model/encoder.h"
#include "model/model.h"
#include "server/chat_template.h"
#include "server/model_catalog.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::cli {
namespace {

struct ServeArgs {
  ParallelArgs parallel;
  std::vector<std::string> models;  // -m (repeatable: router mode)
  // Router mode (docs/server.md "Several models"): the catalog and what stays loaded.
  std::string models_dir;
  int32_t models_max = 0;
  std::string models_memory;
  double idle_unload = 0;
  BackendArgs backend;  // -t, --device, --no-repack
  std::string host = "127.0.0.1";
  int port = 8080;
  int io_threads = 2;
  std::string served_model_name;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;  // a CPU step of 2048 prompt tokens stalls every decode ~2 s
  std::string kv_cache_memory;
  KvLayoutArgs kv_layout;
  KvTierArgs kv_tiers;  // --kv-offload-memory, --kv-disk-dir, --kv-disk-size
  DType kv_cache_type = DType::F16;
  engine::SpeculativeConfig speculative;  // --speculative-method etc.
  int32_t max_model_len = 0;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string chat_template;
  std::string tool_call_parser = "auto";
  std::string reasoning_parser = "auto";
  std::string pooling;
  int32_t max_queue = 256;
  double ttft_slo_factor = 0;
  std::string scheduling_policy = "fcfs";
  double drain_timeout = 30;
  double request_timeout = 0;
  std::string max_body_bytes = "8MiB";
  int64_t responses_store = 0;  // --responses-store: finished /v1/responses kept (LRU)
  bool no_warmup = false;
  bool no_webui = false;
  // Images (docs/vision.md): --mmproj, --vision-threads, --max-images-per-request,
  // --allowed-media-domains, --media-fetch-timeout (in `vision`); the sizes parsed in run_serve.
  server::VisionOptions vision;
  std::string max_image_bytes = "20MiB";
  std::string vision_cache_size = "256MiB";
  std::string ssl_certfile;
  std::string ssl_keyfile;
  std::string ssl_ca_certs;
  std::string config;        // --config FILE: options not given on the command line
  CLI::App* app = nullptr;   // the subcommand, to apply --config after parsing
};

int fail(const std::string& message) {
  spdlog::error("serve: {}", message);
  return 1;
}

Result<std::vector<std::string>> collect_keys(const ServeArgs& a) {
  std::vector<std::string> keys = a.api_keys;
  if (const char* env = std::getenv("CADENZA_API_KEY"); env && *env) {
    std::stringstream ss(env);
    std::string k;
    while (std::getline(ss, k, ',')) keys.push_back(k);
  }
  if (!a.api_key_file.empty()) {
    std::ifstream in(a.api_key_file);
    if (!in) return make_error("--api-key-file: cannot open '{}'", a.api_key_file);
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      size_t b = 0;
      while (b < line.size() && std::isspace(static_cast<unsigned char>(line[b]))) ++b;
      line = line.substr(b);
      if (line.empty() || line[0] == '#') continue;
      keys.push_back(line);
    }
  }
  std::erase_if(keys, [](const std::string& k) { return k.empty(); });
  return keys;
}

bool router_mode(const ServeArgs& a) {
  return !a.models_dir.empty() || a.models.size() > 1 || a.models_max > 0 ||
         !a.models_memory.empty() || a.idle_unload > 0;
}

// The engine options every served model gets (one model, or each of a router's).
Result<engine::EngineConfig> engine_config(const ServeArgs& a, const model::ModelConfig& mc) {
  engine::EngineConfig ec;
  ec.max_num_seqs = a.max_num_seqs;
  ec.max_num_batched_tokens = a.max_num_batched_tokens;
  ec.max_model_len = a.max_model_len;
  ec.kv_type = a.kv_cache_type;
  ec.speculative = a.speculative;
  if (Status st = apply_kv_layout_options(a.kv_layout, ec); !st) return st.error_value();
  auto tiers = kv_tier_config(a.kv_tiers);  // before sizing: tiers turn the window group off
  if (!tiers) return tiers.error_value();
  ec.kv_tiers = *tiers;
  if (!a.kv_cache_memory.empty()) {
    auto blocks = kv_blocks_for_memory(mc, ec, a.kv_cache_memory);
    if (!blocks) return blocks.error_value();
    ec.num_kv_blocks = *blocks;
  }
  return ec;
}

// What both modes share: the ServerConfig from the options.
server::ServerConfig server_config(const ServeArgs& a, std::vector<std::string> keys,
                                   int64_t body_limit) {
  server::ServerConfig sc;
  sc.host = a.host;
  sc.port = static_cast<uint16_t>(a.port);
  sc.io_threads = a.io_threads;
  sc.api_keys = std::move(keys);
  sc.max_queue = a.max_queue;
  sc.ttft_slo_factor = a.ttft_slo_factor;
  sc.priority_scheduling = a.scheduling_policy == "priority";
  sc.responses_store = static_cast<size_t>(a.responses_store);
  sc.tool_call_parser = a.tool_call_parser;
  sc.reasoning_parser = a.reasoning_parser;
  sc.pooling = a.pooling;
  sc.drain_timeout_s = a.drain_timeout;
  sc.request_timeout_s = a.request_timeout;
  sc.max_body_bytes = static_cast<size_t>(body_limit);
  sc.warmup = !a.no_warmup;
  sc.webui = !a.no_webui;
  sc.handle_signals = true;
  sc.vision = a.vision;  // the sizes were checked by run_serve
  const auto size_of = [](const char* name, const std::string& text) {
    auto size = parse_byte_size(name, text);
    return size ? static_cast<size_t>(*size) : size_t{0};
  };
  sc.vision.source.max_bytes = size_of("--max-image-bytes", a.max_image_bytes);
  sc.vision.cache_bytes = size_of("--vision-cache-size", a.vision_cache_size);
  sc.heartbeat_timeout_s = a.parallel.timeout_s;
  sc.ssl_certfile = a.ssl_certfile;
  sc.ssl_keyfile = a.ssl_keyfile;
  sc.ssl_ca_certs = a.ssl_ca_certs;
  return sc;
}

int listen_and_wait(const ServeArgs& a, server::Server& server) {
  auto started = server.start();
  if (!started) return fail(started.error());
  // The bound address on stdout (one line), so that scripts can wait for it even with --port 0.
  fmt::print("cadenza serve: listening on {}://{}:{}\n", server.tls() ? "https" : "http", a.host,
             server.port());
  std::fflush(stdout);
  server.wait();
  spdlog::info("serve: stopped");
  return 0;
}

// An encoder model (bert) on `backend`, which must outlive the parts: no engine, no KV cache; the
// encoder as `model` (owned), its tokenizer, chat renderer and embedder (/v1/embeddings, and
// /v1/rerank for a cross-encoder) and max_model_len (--max-model-len, at most the encoder's
// context). `config` is the encoder's. For the one-model server and the router's catalog alike.
struct EncoderParts {
  server::ModelParts parts;
  const model::EncoderConfig* config = nullptr;
};

Result<EncoderParts> load_encoder(const ServeArgs& a, const std::string& template_source,
                                  std::shared_ptr<const gguf::GgufFile> file,
                                  kernels::Backend& backend) {
  auto encoder = model::Encoder::load(std::move(file), backend);
  if (!encoder) return encoder.error_value();
  auto tokenizer = Tokenizer::from_gguf((*encoder)->file());
  if (!tokenizer) return tokenizer.error_value();
  auto chat = server::ChatRenderer::create((*encoder)->file(), **tokenizer, template_source);
  if (!chat) return chat.error_value();
  EncoderParts e;
  e.config = &(*encoder)->config();
  server::ModelParts& parts = e.parts;
  parts.max_model_len = static_cast<int32_t>(
      a.max_model_len > 0 ? std::min<int64_t>(a.max_model_len, e.config->n_ctx) : e.config->n_ctx);
  parts.embedder = server::make_encoder_embedder(
      **encoder, {.max_tokens = parts.max_model_len,
                  .max_batch_tokens = std::max(a.max_num_batched_tokens, parts.max_model_len)});
  parts.tokenizer = std::move(*tokenizer);
  parts.chat = std::move(*chat);
  parts.model = std::shared_ptr<model::Encoder>(std::move(*encoder));
  return e;
}

// Loads one model of the catalog the way the one-model server does (its own backend, engine
// and chat renderer; the same engine options for every model). Runs on the pool's loader thread.
// An encoder (bert) of the router's catalog: no engine, embeddings (and rerank) only.
Result<server::ModelParts> load_encoder_parts(const ServeArgs& a, const std::string& template_source,
                                              const server::ModelSpec& spec,
                                              std::shared_ptr<const gguf::GgufFile> file,
                                              uint64_t file_bytes) {
  auto created = create_backends(a.backend);
  if (!created) return created.error_value();
  // Declared first in ModelParts, `keep` (the backends) outlives the encoder (`model`).
  auto backends = std::make_shared<Backends>(std::move(*created));
  auto loaded = load_encoder(a, template_source, std::move(file), *backends->main);
  if (!loaded) return make_error("{}: {}", spec.path, loaded.error());
  server::ModelParts parts = std::move(loaded->parts);
  parts.memory_bytes = file_bytes;  // an encoder holds its weights and per-call scratch only
  spdlog::info("router: model '{}' ({} encoder, pooling {}): embeddings only", spec.name,
               loaded->config->arch, model::pooling_name(loaded->config->pooling));
  parts.keep = std::move(backends);
  return parts;
}

Result<server::ModelParts> load_model_parts(const ServeArgs& a, const std::string& template_source,
                                            const server::ModelSpec& spec) {
  std::error_code size_ec;
  const auto file_size = std::filesystem::file_size(spec.path, size_ec);
  const uint64_t file_bytes = size_ec ? 0 : static_cast<uint64_t>(file_size);
  {
    auto file = gguf::GgufFile::open(spec.path);
    if (!file) return make_error("{}: {}", spec.path, file.error());
    if (model::Encoder::is_encoder(**file))
      return load_encoder_parts(a, template_source, spec,
                                std::shared_ptr<const gguf::GgufFile>(std::move(*file)), file_bytes);
  }
  struct Owned {
    Backends backends;
    std::unique_ptr<model::Model> model;
  };
  auto created = create_backends(a.backend);
  if (!created) return created.error_value();
  auto owned = std::make_shared<Owned>();
  owned->backends = std::move(*created);
  auto model = model::Model::open(spec.path, *owned->backends.main,
                                  {.expert_offload = owned->backends.expert_offload()});
  if (!model) return make_error("{}: {}", spec.path, model.error());
  owned->model = std::move(*model);
  auto tokenizer = Tokenizer::from_gguf(owned->model->file());
  if (!tokenizer) return make_error("{}: {}", spec.path, tokenizer.error());
  const model::ModelConfig& mc = owned->model->config();
  auto ec = engine_config(a, mc);
  if (!ec) return ec.error_value();
  auto engine = engine::EngineCore::create(*owned->model, **tokenizer, *ec);
  if (!engine) return make_error("{}: {}", spec.path, engine.error());
  auto chat = server::ChatRenderer::create(owned->model->file(), **tokenizer, template_source);
  if (!chat) return make_error("{}: {}", spec.path, chat.error());
  const engine::EngineConfig& cfg = (*engine)->config();
  auto block_bytes = kv_block_bytes(mc, cfg);
  if (!block_bytes) return block_bytes.error_value();
  server::ModelParts parts;
  auto embedder =
      server::decoder_embedder_for(*owned->model, **tokenizer, a.pooling, cfg.max_model_len);
  if (!embedder) return make_error("{}: {}", spec.path, embedder.error());
  parts.embedder = std::move(*embedder);
  // The budget's arithmetic: the mapped weights plus the KV cache this engine reserved.
  parts.memory_bytes =
      file_bytes + static_cast<uint64_t>(cfg.num_kv_blocks) * static_cast<uint64_t>(*block_bytes);
  spdlog::info("router: model '{}' ({}): KV {} blocks x {} tokens; max_model_len {}; "
               "chat template: {}",
               spec.name, mc.architecture, cfg.num_kv_blocks, cfg.block_size, cfg.max_model_len,
               (*chat)->source_name());
  parts.tokenizer = std::move(*tokenizer);
  parts.engine = std::move(*engine);
  parts.chat = std::move(*chat);
  parts.model = std::shared_ptr<void>(owned, owned->model.get());
  parts.keep = owned;
  return parts;
}

int run_router(const ServeArgs& a, std::vector<std::string> keys, int64_t body_limit,
               const std::string& template_source) {
  if (a.parallel.tensor > 1 || a.parallel.pipeline > 1 || a.parallel.expert_parallel)
    return fail("router mode (--models-dir, several -m) runs every model in one process: "
                "-tp/-pp/--enable-expert-parallel are not supported with it");
  if (!a.served_model_name.empty())
    return fail("--served-model-name names the one model; in router mode use -m NAME=FILE");
  for (const std::string& m : a.models)
    if (hub::is_remote(m))
      return fail(fmt::format("-m {}: router mode serves local files; `cadenza pull` it first", m));
  if (a.models_max < 0) return fail("--models-max must be >= 0");
  if (!(a.idle_unload >= 0)) return fail("--idle-unload must be >= 0");
  server::RouterConfig rc;
  rc.max_loaded = a.models_max;
  rc.idle_unload_s = a.idle_unload;
  if (!a.models_memory.empty()) {
    auto budget = parse_byte_size("--models-memory", a.models_memory);
    if (!budget) return fail(budget.error());
    rc.memory_budget = static_cast<uint64_t>(*budget);
  }
  // Test hook, documented in docs/server.md: CADENZA_TEST_LOAD_DELAY=NAME:MS slows one load.
  if (const char* env = std::getenv("CADENZA_TEST_LOAD_DELAY"); env && *env) {
    const std::string v = env;
    const size_t colon = v.rfind(':');
    char* end = nullptr;
    const long ms =
        colon == std::string::npos ? -1 : std::strtol(v.c_str() + colon + 1, &end, 10);
    if (colon == std::string::npos || ms < 0 || end == v.c_str() + colon + 1 || *end != '\0')
      return fail("CADENZA_TEST_LOAD_DELAY must be NAME:MILLISECONDS");
    rc.slow_load_model = v.substr(0, colon);
    rc.slow_load_delay = std::chrono::milliseconds(ms);
  }
  auto catalog = server::build_catalog(a.models_dir, a.models);
  if (!catalog) return fail(catalog.error());
  std::string names;
  for (const server::ModelSpec& s : *catalog) names += (names.empty() ? "" : ", ") + s.name;
  spdlog::info("serve: router mode, {} models ({}); at most {} loaded, memory budget {}, "
               "idle unload {}; API keys: {}",
               catalog->size(), names, a.models_max > 0 ? std::to_string(a.models_max) : "any",
               a.models_memory.empty() ? "none" : a.models_memory,
               a.idle_unload > 0 ? fmt::format("{} s", a.idle_unload) : "off",
               keys.empty() ? "off" : "on");
  server::ServerConfig sc = server_config(a, std::move(keys), body_limit);
  auto loader = [&a, template_source](const server::ModelSpec& spec) {
    return load_model_parts(a, template_source, spec);
  };
  auto server = server::Server::create_router(sc, std::move(*catalog), loader, rc);
  if (!server) return fail(server.error());
  return listen_and_wait(a, **server);
}

// An encoder model (bert): no engine, no KV cache; /v1/embeddings (and /v1/rerank for a
// cross-encoder) only, generation routes answer 400.
int serve_encoder(const ServeArgs& a, std::shared_ptr<const gguf::GgufFile> file,
                  kernels::Backend& backend, std::vector<std::string> keys, int64_t body_limit,
                  const std::string& template_source) {
  if (a.parallel.tensor > 1 || a.parallel.pipeline > 1 || a.parallel.expert_parallel)
    return fail("an encoder model runs in one process (no -tp / -pp)");
  auto loaded = load_encoder(a, template_source, file, backend);
  if (!loaded) return fail(loaded.error());
  const model::EncoderConfig& ec = *loaded->config;
  server::ModelParts& parts = loaded->parts;
  auto general_name = file->get_string_or("general.name", "");
  if (!general_name) return fail(general_name.error());
  server::ServerConfig sc = server_config(a, std::move(keys), body_limit);
  sc.model_name = !a.served_model_name.empty() ? a.served_model_name
                  : !general_name->empty()     ? *general_name
                                               : std::filesystem::path(file->name()).stem().string();
  spdlog::info("serve: encoder '{}' ({}, {} layers, width {}, pooling {}), max {} tokens per "
               "input; API keys: {}", sc.model_name, ec.arch, ec.n_layers, ec.n_embd,
               model::pooling_name(ec.pooling), parts.max_model_len,
               sc.api_keys.empty() ? "off" : "on");
  auto server = server::Server::create(sc, *parts.tokenizer, nullptr, std::move(parts.chat),
                                       std::move(parts.embedder));
  if (!server) return fail(server.error());
  return listen_and_wait(a, **server);
}

int run_serve(const ServeArgs& a) {
  // Logs go to stderr; stdout carries only the "listening on" line.
  spdlog::set_default_logger(spdlog::stderr_color_mt("serve"));
  if (a.models.empty() && a.models_dir.empty())
    return fail("--model is required (or --models-dir; on the command line or in --config)");
  auto keys = collect_keys(a);
  if (!keys) return fail(keys.error());
  std::string template_source;
  if (!a.chat_template.empty()) {
    std::ifstream in(a.chat_template, std::ios::binary);
    if (!in) return fail(fmt::format("--chat-template: cannot open '{}'", a.chat_template));
    std::stringstream ss;
    ss << in.rdbuf();
    template_source = ss.str();
  }
  auto body_limit = parse_byte_size("--max-body-bytes", a.max_body_bytes);
  if (!body_limit) return fail(body_limit.error());
  if (auto size = parse_byte_size("--vision-cache-size", a.vision_cache_size); !size)
    return fail(size.error());
  if (auto size = parse_byte_size("--max-image-bytes", a.max_image_bytes); !size || *size < 1)
    return fail(size ? "--max-image-bytes must be at least 1 byte" : size.error());
  if (a.vision.mmproj.empty() && (!a.vision.source.allowed_domains.empty()))
    return fail("--allowed-media-domains needs --mmproj (images need a vision encoder)");
  if (a.port < 0 || a.port > 65535) return fail("--port must be in 0..65535");
  if (router_mode(a)) return run_router(a, std::move(*keys), *body_limit, template_source);
  const std::string& model_arg = a.models.front();

  const int threads = resolve_threads(a.backend.threads);
  auto created = create_backends(a.backend);
  if (!created) return fail(created.error());
  Backends backends = std::move(*created);
  kernels::Backend* backend = backends.main.get();
  // -m hf:// or ms://ORG/REPO/FILE.gguf (or an https:// URL): fetched into the cache first
  // (docs/pull.md).
  std::string model_path = model_arg;
  if (hub::is_remote(model_arg)) {
    hub::PullOptions po;
    po.source = model_arg;
    hub::apply_environment(po);
    auto last = std::chrono::steady_clock::now();
    po.on_progress = [&](const hub::DownloadProgress& p) {
      if (std::chrono::steady_clock::now() - last < std::chrono::seconds(10)) return;
      last = std::chrono::steady_clock::now();
      spdlog::info("pull: {}", hub::progress_line(model_arg, p));
    };
    po.on_info = [](const std::string& m) { spdlog::info("pull: {}", m); };
    auto pulled = hub::pull(po);
    if (!pulled) return fail(pulled.error());
    model_path = pulled->path;
  }
  {
    auto file = gguf::GgufFile::open(model_path);
    if (!file) return fail(file.error());
    if (model::Encoder::is_encoder(**file))
      return serve_encoder(a, std::shared_ptr<const gguf::GgufFile>(std::move(*file)), *backend,
                           std::move(*keys), *body_limit, template_source);
  }
  auto job = start_job(a.parallel);
  if (!job) return fail(job.error());
  auto model = model::Model::open(model_path, *backend,
                                  {.world = job->world.get(), .parallel = job->config,
                                   .expert_offload = backends.expert_offload()});
  if (!model) return fail(model.error());
  if (std::optional<int> code = serve_if_worker(**model)) return *code;
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  if (!tokenizer) return fail(tokenizer.error());
  const model::ModelConfig& mc = (*model)->config();

  auto ec = engine_config(a, mc);
  if (!ec) return fail(ec.error());
  auto engine = engine::EngineCore::create(**model, **tokenizer, *ec);
  if (!engine) return fail(engine.error());
  const engine::EngineConfig& cfg = (*engine)->config();

  auto chat = server::ChatRenderer::create((*model)->file(), **tokenizer, template_source);
  if (!chat) return fail(chat.error());

  server::ServerConfig sc = server_config(a, std::move(*keys), *body_limit);
  sc.model_name = !a.served_model_name.empty() ? a.served_model_name
                  : !mc.name.empty()           ? mc.name
                                               : std::filesystem::path(model_path).stem().string();
  if (job->world) {
    // A rank failed: the in-flight requests have their errors and /ready says 503; give the
    // connections a moment to carry the errors out, then end every rank (non-zero exit).
    sc.on_fatal = [](const std::string& why) {
      std::thread([why] {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        abort_job("serve: " + why);
      }).detach();
    };
  }
  spdlog::info("serve: model '{}' ({}), {} threads; KV {} blocks x {} tokens ({}); max {} sequences, "
               "{} tokens per step, max_model_len {}; chat template: {}; API keys: {}",
               sc.model_name, mc.architecture, threads, cfg.num_kv_blocks, cfg.block_size,
               kv_cache_type_name(cfg.kv_type),
               cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.max_model_len,
               (*chat)->source_name(), sc.api_keys.empty() ? "off" : "on");
  auto server = server::Server::create(sc, **tokenizer, std::move(*engine), std::move(*chat));
  if (!server) return fail(server.error());
  return listen_and_wait(a, **server);
}

}  // namespace

Command serve_command() {
  auto args = std::make_shared<ServeArgs>();
  Command c;
  c.name = "serve";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server (docs/server.md)");
    // Every option below can also come from a TOML file: `port = 8080`, `api-key-file = "..."`
    // (long names without the dashes); the command line wins over the file.
    sub->add_option("--config", args->config, "Read options from a TOML file (docs/server.md)");
    args->app = sub;
    sub->add_option("-m,--model", args->models,
                    "GGUF model file, or hf:// or ms://ORG/REPO/FILE.gguf (downloaded first, as by pull); "
                    "required, here or in --config. Repeatable (router mode): -m FILE or "
                    "-m NAME=FILE");
    sub->add_option("--models-dir", args->models_dir,
                    "Router mode: serve every .gguf under DIR, named by its path without .gguf, "
                    "each loaded on its first request (docs/server.md)");
    sub->add_option("--models-max", args->models_max,
                    "Router mode: models loaded at once at most; the least recently used idle "
                    "one is unloaded (0: no limit)");
    sub->add_option("--models-memory", args->models_memory,
                    "Router mode: memory budget of the loaded models, weights + KV cache, "
                    "e.g. 16GiB");
    sub->add_option("--idle-unload", args->idle_unload,
                    "Router mode: unload a model unused for this many seconds (0: never)");
    add_backend_options(*sub, args->backend, "Compute threads (default: all cores)");
    add_parallel_options(*sub, args->parallel);
    sub->add_option("--host", args->host, "Address to listen on")->capture_default_str();
    sub->add_option("--port", args->port, "Port (0: any free port)")->capture_default_str();
    sub->add_option("--io-threads", args->io_threads, "HTTP I/O threads")->capture_default_str();
    sub->add_option("--served-model-name", args->served_model_name,
                    "Model name in the API (default: general.name, else the file stem)");
    sub->add_option("--max-num-seqs", args->max_num_seqs, "Requests running at once at most")
        ->capture_default_str();
    sub->add_option("--max-num-batched-tokens", args->max_num_batched_tokens,
                    "Tokens per engine step at most")
        ->capture_default_str();
    sub->add_option("--kv-cache-memory", args->kv_cache_memory,
                    "KV cache size, e.g. 1GiB (default: room for min(max-num-seqs, 8) "
                    "maximum-length sequences)");
    add_kv_cache_type_option(*sub, args->kv_cache_type);
    add_kv_tier_options(*sub, args->kv_tiers);
    add_kv_layout_options(*sub, args->kv_layout);
    add_speculative_options(*sub, args->speculative);
    sub->add_option("--max-model-len", args->max_model_len,
                    "Prompt + output tokens at most (default: the model's context, at most 4096)");
    sub->add_option("--api-key", args->api_keys,
                    "Accepted API key (repeatable; also CADENZA_API_KEY, comma-separated)");
    sub->add_option("--api-key-file", args->api_key_file, "File with one API key per line");
    sub->add_option("--chat-template", args->chat_template,
                    "Jinja chat template file (default: the model's, else ChatML)");
    sub->add_option("--tool-call-parser", args->tool_call_parser,
                    "Tool-call syntax: hermes, llama3, mistral, mistral_v11, deepseek_v3, "
                    "deepseek_v31, kimi_k2, glm45, gpt_oss, none; auto: from the chat template")
        ->capture_default_str();
    sub->add_option("--reasoning-parser", args->reasoning_parser,
                    "Where reasoning_content comes from: qwen3, deepseek_r1, glm45, think, "
                    "gpt_oss, none; auto: from the chat template")
        ->capture_default_str();
    sub->add_option("--pooling", args->pooling,
                    "/v1/embeddings pooling of the hidden states: mean, cls, last, or rank "
                    "(/v1/rerank, Qwen3-Reranker style), none; default: the GGUF's pooling_type");
    sub->add_option("--mmproj", args->vision.mmproj,
                    "Vision encoder + projector GGUF (LLaVA-1.5 style): chat messages may carry "
                    "image_url parts (docs/vision.md)");
    sub->add_option("--vision-threads", args->vision.threads,
                    "Threads that fetch, decode and encode images (and the encoder's kernel "
                    "threads)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    sub->add_option("--max-images-per-request", args->vision.max_images_per_request,
                    "Images one request may carry (more: HTTP 400)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    sub->add_option("--max-image-bytes", args->max_image_bytes,
                    "Largest encoded image, data URL or fetched (larger: HTTP 400)")
        ->capture_default_str();
    sub->add_option("--vision-cache-size", args->vision_cache_size,
                    "Memory for cached encoder outputs (LRU by image content; 0: none)")
        ->capture_default_str();
    sub->add_option("--allowed-media-domains", args->vision.source.allowed_domains,
                    "Hosts http(s) image URLs may be fetched from (and their subdomains; '*': "
                    "any). Default: none, only data URLs")
        ->delimiter(',');
    sub->add_option("--media-fetch-timeout", args->vision.source.fetch_timeout_s,
                    "Seconds a fetch of an image URL may take")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--max-queue", args->max_queue,
                    "Requests allowed to wait beyond max-num-seqs (more: HTTP 429)")
        ->capture_default_str();
    sub->add_option("--ttft-slo-factor", args->ttft_slo_factor,
                    "Admit a request only when its predicted time to first token (the running "
                    "step's rest, the prompts queued ahead, its own prompt beside the running "
                    "decodes) is within this many times the same prompt's on an idle server; "
                    "else HTTP 429 with Retry-After and retry-after-ms. 0: off; else >= 1 "
                    "(docs/reliability.md)")
        ->capture_default_str();
    sub->add_option("--scheduling-policy", args->scheduling_policy,
                    "fcfs: first come, first served (a request's non-zero 'priority' is a 400); "
                    "priority: requests with a lower 'priority' value run first and are "
                    "preempted last, FCFS within one value")
        ->check(CLI::IsMember({"fcfs", "priority"}))
        ->capture_default_str();
    sub->add_option("--drain-timeout", args->drain_timeout,
                    "Seconds running requests get to finish on SIGTERM/SIGINT")
        ->capture_default_str();
    sub->add_option("--request-timeout", args->request_timeout,
                    "Seconds a generation may take from its request's arrival: later it is "
                    "aborted (HTTP 504, or an error event mid-stream); a request's "
                    "X-Request-Timeout header may ask for less; 0: no limit")
        ->capture_default_str();
    sub->add_option("--max-body-bytes", args->max_body_bytes, "Largest request body (HTTP 413)")
        ->capture_default_str();
    sub->add_option("--responses-store", args->responses_store,
                    "Finished /v1/responses kept in memory (LRU) for previous_response_id and "
                    "GET/DELETE /v1/responses/{id}; 0: none")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
    sub->add_flag("--no-warmup", args->no_warmup, "Skip the warm-up forward passes");
    sub->add_flag("--no-webui", args->no_webui,
                  "No web console at / (docs/webui.md): / and /webui/* answer 404");
    sub->add_option("--ssl-certfile", args->ssl_certfile,
                    "PEM certificate chain: serve HTTPS (with --ssl-keyfile)");
    sub->add_option("--ssl-keyfile", args->ssl_keyfile, "PEM private key (unencrypted) for HTTPS");
    sub->add_option("--ssl-ca-certs", args->ssl_ca_certs,
                    "PEM CA file: require client certificates signed by it (mutual TLS)");
  };
  c.run = [args] {
    if (!args->config.empty()) {
      if (Status st = apply_config_file(*args->app, args->config); !st) {
        fmt::print(stderr, "serve: {}\n", st.error());  // logging is set up in run_serve
        return 1;
      }
    }
    return run_serve(*args);
  };
  return c;
}

}  // namespace cadenza::cli
