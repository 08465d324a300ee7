// ModelPool: router mode of `cadenza serve` (--models-dir DIR, several -m NAME=FILE): a fixed
// catalog of models, loaded on first use, unloaded least-recently-used first beyond a count or a
// memory budget, and after an idle time.
//
//   ModelPool pool(catalog, loader, metrics, {.max_loaded = 2});
//   pool.start();                                   // the loader thread
//   auto found = pool.find("qwen");                 // I/O thread: loaded -> a handle at once
//   pool.acquire("qwen", [](Result<ModelHandle> h) { post(strand, ...); });  // else: wait
//
// Threads: one loader thread does every load and unload (and the idle checks), so a load never
// runs on an I/O thread or on another model's engine thread, and requests to loaded models go on
// while it works. Each loaded model has its own EngineBridge (its engine thread).
// Ownership: the pool owns every loaded model (ServedModel) through a shared_ptr; a ModelHandle
// (a copy) keeps the model alive and marks it busy. A connection holds one from routing until its
// generation's final event, so a model is unloaded only when the pool's reference is the last
// one and its bridge has nothing in flight: unloading never aborts a request (the loader waits
// for a victim instead, or picks another). The pool's reference is dropped on the loader thread
// (or in shutdown()), so a model's engine thread is never joined by itself.
// Thread-safety: every public method may be called from any thread (one mutex, held for map
// look-ups only: never during a load, an unload or a callback). Waiter callbacks run on the
// loader thread (or the thread calling stop_accepting/shutdown) and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_core.h"
#include "server/chat_template.h"
#include "server/embedder.h"
#include "server/engine_bridge.h"
#include "server/metrics.h"
#include "server/output_grammar.h"
#include "server/server_context.h"
#include "tokenizer/tokenizer.h"
#include "toolcall/tool_call.h"
#include "util/result.h"

namespace cadenza::server {

// The tool-call syntax and reasoning format of a model: a toolcall format name or "auto" (detect
// from the chat template, Hermes when it shows none), a reasoning format name or "auto". Shared by
// the one-model server and each pooled model. Errors name the option.
struct OutputFormats {
  toolcall::ToolCallFormat tools = toolcall::ToolCallFormat::kHermes;
  toolcall::ReasoningFormat reasoning = toolcall::ReasoningFormat::kNone;
};
Result<OutputFormats> resolve_output_formats(const std::string& tool_call_parser,
                                             const std::string& reasoning_parser,
                                             const std::string& template_text);

// One servable model: its API name and its GGUF file.
struct ModelSpec {
  std::string name;
  std::string path;
};

// What the loader makes of a ModelSpec. Destroyed after the model's bridge (which owns `engine`
// once running): `chat`, `tokenizer`, `model`, then `keep` (the backend the model runs on).
struct ModelParts {
  std::shared_ptr<void> keep;  // whatever `model` needs alive (its backend); may be null
  std::shared_ptr<void> model;  // the model::Model the engine borrows (type-erased)
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<engine::EngineCore> engine;  // null for an encoder (embeddings only)
  std::unique_ptr<ChatRenderer> chat;
  // Bytes the model holds while loaded: its weights (the file's mapped size) plus the KV cache
  // the engine reserved (num_kv_blocks x bytes per block). The memory budget counts these.
  uint64_t memory_bytes = 0;
  // /v1/embeddings and /v1/rerank (null: the model has no pooling; those routes answer 400).
  // Declared last: destroyed first, before the model it reads.
  std::unique_ptr<Embedder> embedder;
  // The longest prompt or input (an encoder's; a decoder's comes from its engine).
  int32_t max_model_len = 0;
};

// Loads one model; called on the loader thread only. Errors are the load's clear message.
using ModelLoader = std::function<Result<ModelParts>(const ModelSpec& spec)>;

// A loaded model: its parts, its grammars and its engine bridge. Immutable once loaded.
class ServedModel {
 public:
  ServedModel(ModelParts parts, std::unique_ptr<EngineBridge> bridge, ModelContext ctx,
              std::unique_ptr<GrammarCache> grammars);
  ~ServedModel();  // joins the engine thread first (shutdown), then frees the parts

  const ModelContext& context() const { return ctx_; }
  EngineBridge& bridge() { return *bridge_; }
  uint64_t memory_bytes() const { return memory_bytes_; }

 private:
  ModelParts parts_;
  std::unique_ptr<GrammarCache> grammars_;
  std::unique_ptr<EngineBridge> bridge_;
  ModelContext ctx_;
  uint64_t memory_bytes_;
};

using ModelHandle = std::shared_ptr<ServedModel>;

struct PoolConfig {
  int32_t max_loaded = 0;          // models loaded at once at most (0: no limit)
  uint64_t memory_budget = 0;      // bytes of all loaded models' memory_bytes at most (0: none)
  double idle_unload_s = 0;        // unload a model unused this long (0: never)
  // Requests that may wait for one model's load (more: 429, as a full engine queue).
  int32_t max_waiting = 256;
  // The per-model parts of the server's configuration (ServerConfig).
  BridgeConfig bridge;             // metrics_model is set per model
  std::string tool_call_parser = "auto";
  std::string reasoning_parser = "auto";
  // Test hook (tests only; `cadenza serve` sets it from CADENZA_TEST_LOAD_DELAY=NAME:MS): the
  // loader thread sleeps this long before loading the model of this name.
  std::string slow_load_model{};
  std::chrono::milliseconds slow_load_delay{0};
};

enum class ModelState { kUnloaded, kLoading, kLoaded };
const char* model_state_name(ModelState s);  // "unloaded", "loading", "loaded"

struct ModelStatus {
  std::string name;
  ModelState state = ModelState::kUnloaded;
  int32_t max_model_len = 0;  // when loaded
  uint64_t memory_bytes = 0;  // when loaded
  std::string last_error;     // the last failed load's message (cleared by a successful one)
};

class ModelPool {
 public:
  // `catalog`: distinct names (checked by the caller). `metrics` is borrowed and outlives the pool.
  ModelPool(std::vector<ModelSpec> catalog, ModelLoader loader, Metrics& metrics, PoolConfig config);
  ~ModelPool();  // shutdown()

  // Starts the loader thread.
  void start();

  enum class Found { kLoaded, kNotLoaded, kUnknown };
  struct FindResult {
    Found found = Found::kUnknown;
    ModelHandle model;  // kLoaded
  };
  // A loaded model's handle (and marks it used now), without starting anything.
  FindResult find(const std::string& name);

  enum class Acquire { kReady, kWaiting, kUnknown, kQueueFull, kNotAccepting };
  struct AcquireResult {
    Acquire status = Acquire::kUnknown;
    ModelHandle model;  // kReady (on_loaded is not called)
  };
  // kReady: loaded now. kWaiting: a load is started or under way; `on_loaded` is called exactly
  // once, with the handle or the load's error (or a drain's), on the loader thread.
  using OnLoaded = std::function<void(Result<ModelHandle>)>;
  AcquireResult acquire(const std::string& name, OnLoaded on_loaded);

  std::vector<ModelStatus> status() const;
  bool knows(const std::string& name) const;

  // Drain: new acquires are refused (kNotAccepting), waiting ones get an error, every loaded
  // bridge refuses new submissions.
  void stop_accepting();
  int64_t in_flight() const;  // requests in flight across the loaded models
  bool wait_idle(std::chrono::milliseconds timeout);
  void abort_all();
  // Stops the loader thread and unloads every model (their remaining requests are aborted).
  void shutdown();

 private:
  struct Entry {
    ModelSpec spec;
    // The budget's estimate before a load: the file's size, then the last load's memory_bytes.
    uint64_t size_hint = 0;
    ModelState state = ModelState::kUnloaded;
    ModelHandle model;
    std::vector<OnLoaded> waiters;
    std::chrono::steady_clock::time_point last_used{};
    std::string last_error;
  };

  void loop();
  // Loads `name` (loader thread): makes room, loads, then answers its waiters.
  void load(const std::string& name);
  // Unloads least-recently-used idle models until one more of `incoming_bytes` fits. Waits (and
  // rechecks) while every candidate is busy. False when stopping.
  bool make_room(const std::string& incoming, uint64_t incoming_bytes);
  Result<ModelHandle> build(const ModelSpec& spec);
  // After a load: unloads idle models (LRU, never `keep`) while the budget is exceeded.
  void trim_to_budget(const std::string& keep);
  // Idle models past idle_unload_s (loader thread).
  void unload_idle();
  // Takes an idle loaded model out of the map (under mu_); null when it is busy.
  ModelHandle take_if_idle(Entry& e);
  // Destroys a taken model outside the lock and counts it (loader thread).
  void unload(ModelHandle model, const std::string& name, const char* reason);
  void publish_loaded();  // under mu_

  ModelLoader loader_;
  Metrics& metrics_;
  PoolConfig config_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // the loader thread: loads queued, stop
  std::map<std::string, Entry> entries_;
  std::deque<std::string> queue_;  // names to load, in request order
  bool accepting_ = true;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cadenza::server
