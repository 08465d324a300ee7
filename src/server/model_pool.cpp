#include "server/model_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

namespace cadenza::server {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double gib(uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1ull << 30); }

}  // namespace

Result<OutputFormats> resolve_output_formats(const std::string& tool_call_parser,
                                             const std::string& reasoning_parser,
                                             const std::string& template_text) {
  OutputFormats f;
  if (tool_call_parser == "auto") {
    if (auto d = toolcall::detect_tool_call_format(template_text)) f.tools = *d;
  } else if (auto p = toolcall::parse_tool_call_format(tool_call_parser)) {
    f.tools = *p;
  } else {
    return make_error("--tool-call-parser: unknown format '{}'", tool_call_parser);
  }
  f.reasoning = toolcall::detect_reasoning_format(template_text);
  if (reasoning_parser != "auto") {
    auto r = toolcall::parse_reasoning_format(reasoning_parser);
    if (!r) return make_error("--reasoning-parser: unknown format '{}'", reasoning_parser);
    f.reasoning = *r;
  }
  return f;
}

const char* model_state_name(ModelState s) {
  switch (s) {
    case ModelState::kUnloaded: return "unloaded";
    case ModelState::kLoading: return "loading";
    case ModelState::kLoaded: return "loaded";
  }
  return "unloaded";
}

ServedModel::ServedModel(ModelParts parts, std::unique_ptr<EngineBridge> bridge, ModelContext ctx,
                         std::unique_ptr<GrammarCache> grammars)
    : parts_(std::move(parts)),
      grammars_(std::move(grammars)),
      bridge_(std::move(bridge)),
      ctx_(std::move(ctx)),
      memory_bytes_(parts_.memory_bytes) {}

ServedModel::~ServedModel() {
  // The engine thread uses the engine, the tokenizer and the model: it stops before they go.
  if (bridge_) bridge_->shutdown();
  bridge_.reset();
}

ModelPool::ModelPool(std::vector<ModelSpec> catalog, ModelLoader loader, Metrics& metrics,
                     PoolConfig config)
    : loader_(std::move(loader)), metrics_(metrics), config_(std::move(config)) {
  for (ModelSpec& spec : catalog) {
    Entry e;
    std::error_code ec;
    const auto size = std::filesystem::file_size(spec.path, ec);
    e.size_hint = ec ? 0 : static_cast<uint64_t>(size);
    const std::string name = spec.name;
    e.spec = std::move(spec);
    entries_.emplace(name, std::move(e));
  }
  metrics_.set_models_loaded(0);
}

ModelPool::~ModelPool() { shutdown(); }

void ModelPool::start() { thread_ = std::thread([this] { loop(); }); }

ModelPool::FindResult ModelPool::find(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return {Found::kUnknown, nullptr};
  it->second.last_used = Clock::now();
  if (it->second.state == ModelState::kLoaded) return {Found::kLoaded, it->second.model};
  return {Found::kNotLoaded, nullptr};
}

ModelPool::AcquireResult ModelPool::acquire(const std::string& name, OnLoaded on_loaded) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return {Acquire::kUnknown, nullptr};
  if (!accepting_) return {Acquire::kNotAccepting, nullptr};
  Entry& e = it->second;
  e.last_used = Clock::now();
  if (e.state == ModelState::kLoaded) return {Acquire::kReady, e.model};
  if (e.waiters.size() >= static_cast<size_t>(std::max(config_.max_waiting, 1)))
    return {Acquire::kQueueFull, nullptr};
  e.waiters.push_back(std::move(on_loaded));
  if (e.state == ModelState::kUnloaded) {
    e.state = ModelState::kLoading;
    queue_.push_back(name);
    cv_.notify_all();
  }
  return {Acquire::kWaiting, nullptr};
}

std::vector<ModelStatus> ModelPool::status() const {
  std::lock_guard lock(mu_);
  std::vector<ModelStatus> out;
  for (const auto& [name, e] : entries_) {
    ModelStatus s;
    s.name = name;
    s.state = e.state;
    s.last_error = e.last_error;
    if (e.model) {
      s.max_model_len = e.model->context().max_model_len;
      s.memory_bytes = e.model->memory_bytes();
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool ModelPool::knows(const std::string& name) const {
  std::lock_guard lock(mu_);
  return entries_.count(name) > 0;
}

void ModelPool::loop() {
  // Idle checks a few times per idle period (at most once a second, at least every 50 ms).
  const auto check = std::chrono::milliseconds(static_cast<int64_t>(
      std::clamp(config_.idle_unload_s * 250.0, 50.0, 1000.0)));
  std::unique_lock lock(mu_);
  while (!stop_) {
    auto has_work = [this] { return stop_ || !queue_.empty(); };
    if (config_.idle_unload_s > 0)
      cv_.wait_for(lock, check, has_work);
    else
      cv_.wait(lock, has_work);
    if (stop_) break;
    if (!queue_.empty()) {
      const std::string name = queue_.front();
      queue_.pop_front();
      lock.unlock();
      load(name);
      lock.lock();
    }
    lock.unlock();
    unload_idle();
    lock.lock();
  }
}

ModelHandle ModelPool::take_if_idle(Entry& e) {
  // use_count() == 1: only the pool holds it, and nobody can get a new handle while mu_ is held;
  // in_flight() == 0: no aborted request still runs. Both together: unloading aborts nothing.
  if (e.state != ModelState::kLoaded || !e.model || e.model.use_count() != 1 ||
      e.model->bridge().in_flight() != 0)
    return nullptr;
  ModelHandle m = std::move(e.model);
  e.state = ModelState::kUnloaded;
  publish_loaded();
  return m;
}

void ModelPool::unload(ModelHandle model, const std::string& name, const char* reason) {
  const auto started = Clock::now();
  model.reset();  // the last reference: joins the model's engine thread, frees its memory
  metrics_.forget_engine_gauges(name);
  metrics_.add_model_unload(name, reason);
  spdlog::info("router: unloaded model '{}' ({}) in {:.2f} s", name, reason,
               seconds_since(started));
}

void ModelPool::publish_loaded() {
  int64_t n = 0;
  for (const auto& [name, e] : entries_) n += e.state == ModelState::kLoaded ? 1 : 0;
  metrics_.set_models_loaded(n);
}

bool ModelPool::make_room(const std::string& incoming, uint64_t incoming_bytes) {
  std::unique_lock lock(mu_);
  bool waiting_logged = false;
  while (!stop_) {
    int32_t count = 0;
    uint64_t bytes = 0;
    for (const auto& [name, e] : entries_) {
      if (e.state != ModelState::kLoaded) continue;
      ++count;
      bytes += e.model->memory_bytes();
    }
    const bool count_ok = config_.max_loaded <= 0 || count < config_.max_loaded;
    const bool memory_ok = config_.memory_budget == 0 || bytes + incoming_bytes <= config_.memory_budget;
    // Nothing loaded: the load goes ahead, and its exact size decides (load()).
    if ((count_ok && memory_ok) || count == 0) return true;
    // The least recently used idle model goes.
    Entry* victim = nullptr;
    for (auto& [name, e] : entries_) {
      if (name == incoming || e.state != ModelState::kLoaded) continue;
      if (e.model.use_count() != 1 || e.model->bridge().in_flight() != 0) continue;
      if (!victim || e.last_used < victim->last_used) victim = &e;
    }
    if (victim) {
      const std::string name = victim->spec.name;
      ModelHandle m = take_if_idle(*victim);
      lock.unlock();
      unload(std::move(m), name, count_ok ? "memory" : "lru");
      lock.lock();
      continue;
    }
    // Every loaded model has requests in flight: they finish first (never aborted).
    if (!waiting_logged) {
      spdlog::info("router: loading '{}' waits for a loaded model to finish its requests",
                   incoming);
      waiting_logged = true;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
  return false;
}

Result<ModelHandle> ModelPool::build(const ModelSpec& spec) {
  auto parts = loader_(spec);
  if (!parts) return parts.error_value();
  if (!parts->tokenizer || !parts->chat || (!parts->engine && !parts->embedder))
    return make_error("loading model '{}': the loader returned no engine", spec.name);
  auto formats = resolve_output_formats(config_.tool_call_parser, config_.reasoning_parser,
                                        parts->chat->source());
  if (!formats) return formats.error_value();
  if (config_.memory_budget > 0 && parts->memory_bytes > config_.memory_budget)
    return make_error("model '{}' needs {:.2f} GiB (weights + KV cache), more than the whole "
                      "--models-memory budget ({:.2f} GiB)",
                      spec.name, gib(parts->memory_bytes), gib(config_.memory_budget));
  BridgeConfig bc = config_.bridge;
  bc.metrics_model = spec.name;
  auto grammars =
      std::make_unique<GrammarCache>(grammar::TokenIndex::from_tokenizer(*parts->tokenizer));
  ModelContext ctx;
  ctx.model_name = spec.name;
  ctx.max_model_len =
      parts->engine ? parts->engine->config().max_model_len : parts->max_model_len;
  ctx.generates = parts->engine != nullptr;
  ctx.embedder = parts->embedder.get();
  ctx.tokenizer = parts->tokenizer.get();
  ctx.chat = parts->chat.get();
  ctx.grammars = grammars.get();
  ctx.tool_format = formats->tools;
  ctx.reasoning = formats->reasoning;
  auto bridge = std::make_unique<EngineBridge>(std::move(parts->engine), *parts->tokenizer,
                                               metrics_, bc);
  ctx.bridge = bridge.get();
  auto served = std::make_shared<ServedModel>(std::move(*parts), std::move(bridge), std::move(ctx),
                                              std::move(grammars));
  served->bridge().start();
  // Loaded means warmed up: the first request does not pay for it.
  while (!served->bridge().ready()) {
    std::unique_lock lock(mu_);
    if (stop_) return make_error("the server is shutting down");
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  return served;
}

void ModelPool::load(const std::string& name) {
  ModelSpec spec;
  uint64_t hint = 0;
  {
    std::lock_guard lock(mu_);
    const Entry& e = entries_.at(name);
    spec = e.spec;
    hint = e.size_hint;
  }
  const auto started = Clock::now();
  Result<ModelHandle> built = Error("the server is shutting down");
  if (make_room(name, hint)) {
    if (name == config_.slow_load_model && config_.slow_load_delay.count() > 0) {
      spdlog::warn("router: test hook: loading '{}' sleeps {} ms first", name,
                   config_.slow_load_delay.count());
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, config_.slow_load_delay, [this] { return stop_; });
    }
    spdlog::info("router: loading model '{}' from {}", name, spec.path);
    built = build(spec);
  }
  const double took = seconds_since(started);
  std::vector<OnLoaded> waiters;
  {
    std::lock_guard lock(mu_);
    Entry& e = entries_.at(name);
    if (built) {
      e.state = ModelState::kLoaded;
      e.model = *built;
      e.last_error.clear();
      e.last_used = Clock::now();
      e.size_hint = (*built)->memory_bytes();  // the next load's estimate is exact
    } else {
      e.state = ModelState::kUnloaded;  // the next request tries again
      e.last_error = built.error();
    }
    waiters.swap(e.waiters);
    publish_loaded();
  }
  metrics_.add_model_load(name, built ? "ok" : "error", took);
  if (built)
    spdlog::info("router: loaded model '{}' in {:.2f} s ({:.2f} GiB); {} requests were waiting",
                 name, took, gib((*built)->memory_bytes()), waiters.size());
  else
    spdlog::error("router: loading model '{}' failed: {}", name, built.error());
  // The budget holds again before anyone is answered.
  if (built) trim_to_budget(name);
  for (OnLoaded& w : waiters) w(built);
}

void ModelPool::trim_to_budget(const std::string& keep) {
  // The estimate before a load (the file's size the first time) may have been short of the
  // model's real size (its KV cache): idle models go until the budget holds again.
  if (config_.memory_budget == 0) return;
  while (true) {
    std::unique_lock lock(mu_);
    uint64_t bytes = 0;
    Entry* victim = nullptr;
    for (auto& [name, e] : entries_) {
      if (e.state != ModelState::kLoaded) continue;
      bytes += e.model->memory_bytes();
      if (name == keep || e.model.use_count() != 1 || e.model->bridge().in_flight() != 0) continue;
      if (!victim || e.last_used < victim->last_used) victim = &e;
    }
    if (bytes <= config_.memory_budget || !victim) return;  // busy ones go later (next load)
    const std::string name = victim->spec.name;
    ModelHandle m = take_if_idle(*victim);
    lock.unlock();
    unload(std::move(m), name, "memory");
  }
}

void ModelPool::unload_idle() {
  if (config_.idle_unload_s <= 0) return;
  const auto now = Clock::now();
  const auto idle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config_.idle_unload_s));
  std::vector<std::pair<std::string, ModelHandle>> taken;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, e] : entries_) {
      if (e.state != ModelState::kLoaded) continue;
      if (e.model.use_count() != 1 || e.model->bridge().in_flight() != 0) {
        e.last_used = now;  // busy: its idle time starts when its requests end
        continue;
      }
      if (now - e.last_used < idle) continue;
      if (ModelHandle m = take_if_idle(e)) taken.emplace_back(name, std::move(m));
    }
  }
  for (auto& [name, m] : taken) unload(std::move(m), name, "idle");
}

void ModelPool::stop_accepting() {
  std::vector<OnLoaded> waiters;
  std::vector<ModelHandle> loaded;
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    for (auto& [name, e] : entries_) {
      for (OnLoaded& w : e.waiters) waiters.push_back(std::move(w));
      e.waiters.clear();
      if (e.model) loaded.push_back(e.model);
    }
  }
  for (ModelHandle& m : loaded) m->bridge().stop_accepting();
  for (OnLoaded& w : waiters) w(Error("the server is draining"));
}

int64_t ModelPool::in_flight() const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [name, e] : entries_)
    if (e.model) n += e.model->bridge().in_flight();
  return n;
}

bool ModelPool::wait_idle(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (in_flight() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void ModelPool::abort_all() {
  std::vector<ModelHandle> loaded;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, e] : entries_)
      if (e.model) loaded.push_back(e.model);
  }
  for (ModelHandle& m : loaded) m->bridge().abort_all();
}

void ModelPool::shutdown() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<OnLoaded> waiters;
  std::vector<ModelHandle> loaded;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, e] : entries_) {
      for (OnLoaded& w : e.waiters) waiters.push_back(std::move(w));
      e.waiters.clear();
      if (e.model) loaded.push_back(std::move(e.model));
      e.state = ModelState::kUnloaded;
    }
    queue_.clear();
  }
  for (OnLoaded& w : waiters) w(Error("the server is shutting down"));
  // Connections may still hold handles (they go with the io_context): stop the engine threads
  // here, the memory goes with the last handle.
  for (ModelHandle& m : loaded) m->bridge().shutdown();
}

}  // namespace cadenza::server
