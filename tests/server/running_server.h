// An in-process `cadenza serve` for the server tests: a Server on an ephemeral port over the tiny
// synthesized model (tests/test_models.h), with its own Model, Tokenizer and engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_tiers.h"
#include "kernels/backend.h"
#include "model/encoder.h"
#include "model/model.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::server::testing {

struct Options {
  std::string model_path;  // empty: the tiny synthesized model (model_path())
  int32_t max_model_len = 1024;
  int32_t max_num_seqs = 8;
  int32_t max_queue = 16;
  bool priority_scheduling = false;  // --scheduling-policy priority
  size_t max_body_bytes = 64 * 1024;
  std::vector<std::string> keys;
  double drain_timeout_s = 30;
  double request_timeout_s = 0;  // --request-timeout
  double ttft_slo_factor = 0;    // --ttft-slo-factor
  size_t responses_store = 0;  // --responses-store
  std::string ssl_certfile;  // both set: HTTPS
  std::string ssl_keyfile;
  std::string pooling;  // ServerConfig::pooling (empty: the GGUF's)
  std::string model_name = "tiny";
  int io_threads = 2;
  bool webui = true;  // false: --no-webui
  int32_t num_kv_blocks = 0;          // 0: the engine's default pool
  engine::KvTierConfig kv_tiers = {};  // --kv-offload-memory, --kv-disk-dir/--kv-disk-size
  int32_t max_num_batched_tokens = 2048;  // the engine's token budget per step
  std::string chat_template;  // --chat-template's text (empty: the model's, else ChatML)
  VisionOptions vision = {};  // --mmproj etc. (vision.mmproj empty: no images)
};

// A running server with its own model (a Model runs one forward pass at a time).
struct Running {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<model::Encoder> encoder;  // instead of `model` for an encoder (start_encoder)
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Server> server;
  uint16_t port = 0;
};

// The tiny model's file (written once per process, removed at exit).
std::string model_path();

// A model slow enough for tests that need steps that take a while: the tiny shape widened to
// 512 and 4 layers (about 13M parameters, Q8_0, ~14 MB, context kSlowModelLen), a few ms a
// token on a CPU core, so thousands of tokens take seconds. Written once per process.
inline constexpr int32_t kSlowModelLen = 4096;
std::string slow_model_path();

// Loads the model and creates the server without starting it. Errors: loading, Server::create
// (e.g. a bad TLS certificate or key).
Result<std::unique_ptr<Running>> build(const Options& o);

// build(), start(), and waits until /ready; gtest failures and nullptr when anything fails.
std::unique_ptr<Running> start(const Options& o = {});

// The same for an encoder model (o.model_path, a bert GGUF): no engine, embeddings (and rerank)
// only.
std::unique_ptr<Running> start_encoder(const Options& o);

}  // namespace cadenza::server::testing
