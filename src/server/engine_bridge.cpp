#include "server/engine_bridge.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace cadenza::server {

using engine::seconds;

EngineBridge::EngineBridge(std::unique_ptr<engine::EngineCore> engine, const Tokenizer& tokenizer,
                           Metrics& metrics, BridgeConfig config)
    : engine_(std::move(engine)),
      config_(engine_ ? engine_->config() : engine::EngineConfig{.max_num_seqs = 1}),
      tokenizer_(tokenizer),
      metrics_(metrics),
      bridge_config_(config),
      ttft_(engine_ ? config.ttft_slo_factor : 0, config_.max_num_batched_tokens),
      // Blocks of 16 tokens by default: 64k blocks are about a million prompt tokens, ~2 MiB.
      prefix_estimate_(config_.block_size, 65536) {}

EngineBridge::~EngineBridge() { shutdown(); }

void EngineBridge::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

Submission EngineBridge::submit(std::vector<GenInput> inputs, GenSink sink) {
  if (!accepting_.load()) return {SubmitStatus::kNotAccepting, 0};
  int64_t n = 0;  // in-flight requests are counted per sample
  // Prompt tokens to compute, per input: less what the prefix cache probably holds.
  std::vector<int64_t> to_compute;
  int64_t prompt_tokens = 0;
  const bool estimate_cache = ttft_.enabled() && config_.enable_prefix_caching;
  for (const GenInput& in : inputs) {
    n += static_cast<int64_t>(in.samples());
    int64_t t = static_cast<int64_t>(in.prompt.size());
    if (estimate_cache && in.images.empty()) t -= prefix_estimate_.cached_tokens(in.prompt);
    to_compute.push_back(t);
    prompt_tokens += t;
  }
  const int64_t cap = static_cast<int64_t>(config_.max_num_seqs) + bridge_config_.max_queue;
  int64_t cur = in_flight_.load();
  TtftAdmission::Decision ttft;
  if (ttft_.enabled()) {
    const int64_t decoding = std::max<int64_t>(0, cur - unstarted_requests_.load());
    ttft = ttft_.decide(prompt_tokens, unstarted_tokens_.load(), decoding, engine::Clock::now());
    if (!ttft.admit) {
      if (spdlog::should_log(spdlog::level::debug)) {
        const TtftAdmission::Model m = ttft_.model();
        spdlog::debug("ttft admission: refused {} prompt tokens ({} queued, {} decoding): "
                      "predicted {:.1f} ms (rest of step {:.1f}), idle {:.1f} ms; prompt step "
                      "{:.2f} ms + {:.3f} ms/token, decode step {:.2f} + {:.2f} ms/seq, k_idle "
                      "{:.2f}, k_load {:.2f}",
                      prompt_tokens, unstarted_tokens_.load(), decoding, 1000 * ttft.predicted_s,
                      1000 * ttft.rest_s, 1000 * ttft.idle_s, 1000 * m.a, 1000 * m.b,
                      1000 * m.dec_a, 1000 * m.dec_c, m.k_idle, m.k_load);
      }
      metrics_.add_ttft_refusal(bridge_config_.metrics_model);
      return {SubmitStatus::kTtftLimit, 0, ttft.predicted_s,
              bridge_config_.ttft_slo_factor * ttft.idle_s, ttft.retry_after_s};
    }
  }
  do {
    if (cur + n > cap) {
      ttft_.started(ttft.id);  // not admitted after all
      return {SubmitStatus::kQueueFull, 0};
    }
  } while (!in_flight_.compare_exchange_weak(cur, cur + n));
  if (estimate_cache) {
    for (const GenInput& in : inputs) prefix_estimate_.add(in.prompt);
  }
  unstarted_tokens_.fetch_add(prompt_tokens);
  unstarted_requests_.fetch_add(static_cast<int64_t>(inputs.size()));
  const uint64_t ticket = next_ticket_.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    pending_.push_back(Pending{ticket, std::move(inputs),
                               std::make_shared<GenSink>(std::move(sink)), engine::Clock::now(),
                               ttft, std::move(to_compute)});
  }
  cv_.notify_one();
  return {SubmitStatus::kOk, ticket};
}

SubmitStatus EngineBridge::run_task(EngineTask task) {
  if (!accepting_.load()) return SubmitStatus::kNotAccepting;
  const int64_t cap = static_cast<int64_t>(config_.max_num_seqs) + bridge_config_.max_queue;
  int64_t cur = in_flight_.load();
  do {
    if (cur + 1 > cap) return SubmitStatus::kQueueFull;
  } while (!in_flight_.compare_exchange_weak(cur, cur + 1));
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return SubmitStatus::kOk;
}

void EngineBridge::finish_task(EngineTask& task, bool run) {
  task(run);
  if (in_flight_.fetch_sub(1) == 1) {
    std::lock_guard lock(mu_);
    idle_cv_.notify_all();
  }
}

void EngineBridge::abort(uint64_t ticket) {
  {
    std::lock_guard lock(mu_);
    aborts_.push_back(ticket);
  }
  cv_.notify_one();
}

void EngineBridge::abort_all() {
  {
    std::lock_guard lock(mu_);
    abort_all_ = true;
  }
  cv_.notify_one();
}

bool EngineBridge::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return in_flight_.load() == 0; });
}

void EngineBridge::shutdown() {
  if (!thread_.joinable()) return;
  accepting_.store(false);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    abort_all_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void EngineBridge::warm_up() {
  if (!engine_) return;
  // A forward pass over two batch shapes (one longer prompt, then two short ones decoding
  // together), so the first real request does not pay for first-touch page faults and scratch
  // growth. The warm-up requests finish and free their blocks before ready() turns true.
  const int32_t n_vocab = tokenizer_.n_vocab();
  const int32_t len = std::max(1, std::min(32, config_.max_model_len / 2 - 2));
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 2;
  p.ignore_eos = true;
  auto prompt = [&](int32_t n, int32_t salt) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 7 + salt) % n_vocab;
    return t;
  };
  for (int round = 0; round < 2; ++round) {
    const int count = round == 0 ? 1 : 2;
    for (int i = 0; i < count; ++i) {
      auto id = engine_->add_request(prompt(round == 0 ? len : std::min(len, 8), i + 1), p, 0,
                                     "warmup");
      if (!id) spdlog::warn("warm-up request refused: {}", id.error());
    }
    while (engine_->has_work()) engine_->step();
  }
}

void EngineBridge::calibrate_ttft() {
  if (!engine_) return;
  // Two prompt lengths, each timed twice (the faster kept), each prompt its own tokens so that
  // no prefix-cache hit shortens it. One step each while they fit the step's token budget.
  const int32_t n_vocab = tokenizer_.n_vocab();
  const int32_t hi = std::max(2, std::min({128, config_.max_model_len / 2 - 2,
                                           config_.max_num_batched_tokens}));
  const int32_t lo = std::max(1, std::min(16, hi / 4));
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 1;
  p.ignore_eos = true;
  int32_t salt = 1000;
  auto time_prompt = [&](int32_t n) {
    double best = 0;
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<int32_t> t(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 13 + salt) % n_vocab;
      ++salt;
      auto id = engine_->add_request(std::move(t), p, 0, "ttft-calibration");
      if (!id) {
        spdlog::warn("ttft admission: calibration request refused: {}", id.error());
        return 0.0;
      }
      const auto t0 = engine::Clock::now();
      while (engine_->has_work()) engine_->step();
      const double s = seconds(engine::Clock::now() - t0);
      best = rep == 0 ? s : std::min(best, s);
    }
    return best;
  };
  const double t_lo = time_prompt(lo), t_hi = time_prompt(hi);
  const double b = hi > lo ? std::max(0.0, (t_hi - t_lo) / (hi - lo)) : 0;
  const double a = std::max(0.0, t_lo - b * lo);
  ttft_.calibrate_idle(a, b);
  spdlog::info("ttft admission: factor {:g}; an idle prompt step takes {:.1f} ms + {:.3f} ms per "
               "token ({} tokens: {:.1f} ms, {}: {:.1f} ms)",
               bridge_config_.ttft_slo_factor, 1000 * a, 1000 * b, lo, 1000 * t_lo, hi,
               1000 * t_hi);
}

void EngineBridge::count_started(int64_t prompt_tokens, uint64_t ttft_id) {
  unstarted_tokens_.fetch_sub(prompt_tokens);
  unstarted_requests_.fetch_sub(1);
  ttft_.started(ttft_id);
}

void EngineBridge::refuse(const Pending& p, size_t base, const GenInput& input, bool rejected,
                          const std::string& error) {
  for (size_t s = 0; s < input.samples(); ++s) {
    GenEvent e;
    e.index = base + s;
    e.rejected = rejected;
    e.out.finished = true;
    e.out.finish_reason = rejected ? engine::FinishReason::kError : engine::FinishReason::kAbort;
    e.out.error = error;
    (*p.sink)(std::move(e));
    in_flight_.fetch_sub(1);
  }
}

void EngineBridge::admit(Pending& p) {
  auto& ids = by_ticket_[p.ticket];
  size_t base = 0;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    GenInput& input = p.inputs[i];
    const size_t samples = input.samples();
    const int64_t prompt_tokens = p.to_compute[i];
    auto id = engine_ ? engine_->add_request(std::move(input.prompt), input.params, input.priority,
                                             {}, std::move(input.images))
                      : Result<engine::RequestId>(Error("this model does not generate text"));
    if (!id) {
      count_started(prompt_tokens, p.ttft.id);
      refuse(p, base, input, /*rejected=*/true, id.error());
    } else {
      live_[*id] = Live{p.ticket, base, p.sink, p.submitted, samples, prompt_tokens, p.ttft};
      ids.push_back(*id);
    }
    base += samples;
  }
  if (ids.empty()) by_ticket_.erase(p.ticket);
}

void EngineBridge::record_finished(const engine::RequestOutput& out, const Live& live) {
  const auto& m = out.metrics;
  const std::string& model = bridge_config_.metrics_model;
  metrics_.observe_e2e(seconds(engine::Clock::now() - live.submitted), model);
  if (m.num_output_tokens > 0) {
    metrics_.observe_ttft(m.ttft_s, model);
    for (double s : m.inter_token_s) metrics_.observe_inter_token(s, model);
  }
  if (m.queue_time_s > 0 || m.num_output_tokens > 0) metrics_.observe_queue_time(m.queue_time_s, model);
  metrics_.add_prompt_tokens(m.num_prompt_tokens, model);
  metrics_.add_generation_tokens(m.num_output_tokens, model);
  metrics_.add_request_finished(to_string(out.finish_reason), model);
}

void EngineBridge::deliver(engine::RequestOutput out) {
  auto it = live_.find(out.id);
  if (it == live_.end()) return;
  const bool finished = out.finished;
  if (it->second.unstarted_tokens >= 0) {
    count_started(it->second.unstarted_tokens, it->second.ttft.id);
    it->second.unstarted_tokens = -1;
    if (ttft_.enabled() && out.error.empty() && !out.new_token_ids.empty()) {
      ttft_.observe_first_token(it->second.ttft, seconds(engine::Clock::now() - it->second.submitted));
    }
  }
  if (finished) record_finished(out, it->second);
  GenEvent e;
  e.index = it->second.index + static_cast<size_t>(out.index);
  e.out = std::move(out);
  auto sink = it->second.sink;
  if (finished && --it->second.remaining == 0) {
    auto t = by_ticket_.find(it->second.ticket);
    if (t != by_ticket_.end()) {
      std::erase(t->second, it->first);
      if (t->second.empty()) by_ticket_.erase(t);
    }
    live_.erase(it);
  }
  (*sink)(std::move(e));
  if (finished && in_flight_.fetch_sub(1) == 1) {
    // Nothing in flight: no prompt waits (a submission racing this only makes the next
    // predictions optimistic, never stuck refusing).
    unstarted_tokens_.store(0);
    unstarted_requests_.store(0);
    ttft_.clear_waiting();
    std::lock_guard lock(mu_);
    idle_cv_.notify_all();
  }
}

size_t EngineBridge::waiting_submissions() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& p : pending_)
    for (const GenInput& in : p.inputs) n += in.samples();
  return n;
}

void EngineBridge::publish_gauges(size_t pending) {
  if (!engine_) return;  // an encoder: no engine state to report
  const engine::EngineStats s = engine_->stats();
  last_computed_tokens_ = s.num_computed_tokens;
  last_generated_tokens_ = s.num_generated_tokens;
  EngineGauges g;
  g.num_running = s.num_running;
  g.num_waiting = s.num_waiting + static_cast<int32_t>(pending);
  g.kv_usage = s.kv_usage;
  g.num_preemptions = s.num_preemptions;
  g.prefix_cache_queries = s.prefix_cache_queries;
  g.prefix_cache_hits = s.prefix_cache_hits;
  g.kv_tiers.clear();
  for (const engine::EngineStats::KvTier& t : s.kv_tiers) g.kv_tiers.push_back({t.name, t.stats});
  g.spec_num_drafts = s.num_spec_drafts;
  g.spec_num_draft_tokens = s.num_spec_draft_tokens;
  g.spec_num_accepted_tokens = s.num_spec_accepted_tokens;
  g.step_schedule_s = s.step_schedule_s;
  g.step_forward_s = s.step_forward_s;
  g.step_sample_s = s.step_sample_s;
  g.spec_accepted_per_position.clear();
  for (size_t i = 0; i < s.spec_draft_tokens_per_position.size(); ++i) {
    if (s.spec_draft_tokens_per_position[i] == 0) break;  // positions fill from 0 up
    g.spec_accepted_per_position.push_back(s.spec_accepted_per_position[i]);
  }
  const model::Model& model = engine_->model();
  if (model.config().n_experts > 0) {
    g.moe_layers = model.config().n_layers;
    g.moe_experts = model.config().n_experts;
    g.expert_tokens = model.expert_token_counts();
  }
  if (const model::Distributed* d = model.distributed()) {
    for (const model::RankReport& rep : d->reports(model.held_expert_tokens())) {
      RankGauges r;
      r.rank = rep.rank;
      r.expert_tokens = rep.expert_tokens;
      for (int op = 0; op < static_cast<int>(dist::Op::kCount); ++op) {
        const dist::OpStats& s = rep.comm[static_cast<dist::Op>(op)];
        if (s.calls == 0) continue;
        r.ops.push_back({dist::op_name(static_cast<dist::Op>(op)), s.calls, s.bytes, s.seconds});
      }
      g.ranks.push_back(std::move(r));
    }
    g.heartbeat_seconds = d->last_ping_seconds();
  }
  metrics_.set_engine_gauges(g, bridge_config_.metrics_model);
}

void EngineBridge::fail_engine(const std::string& why) {
  if (failed_) return;
  failed_ = true;
  ready_.store(false);
  spdlog::error("engine: the model can no longer run: {}", why);
  if (bridge_config_.on_fatal) bridge_config_.on_fatal(why);
}

void EngineBridge::heartbeat() {
  last_heartbeat_ = engine::Clock::now();
  if (Status st = engine_->check_workers(bridge_config_.heartbeat_timeout_s); !st) {
    fail_engine(st.error());
  }
}

void EngineBridge::loop() {
  if (bridge_config_.warmup) warm_up();
  if (ttft_.enabled()) calibrate_ttft();
  publish_gauges(0);
  computed_tokens_seen_ = last_computed_tokens_;  // the warm-up's tokens are no step of ours
  generated_tokens_seen_ = last_generated_tokens_;
  ready_.store(true);
  spdlog::info("engine ready");
  while (true) {
    std::deque<Pending> pending;
    std::deque<EngineTask> tasks;
    std::vector<uint64_t> aborts;
    bool all = false, stop = false;
    {
      std::unique_lock lock(mu_);
      auto has_news = [this] {
        return stop_ || abort_all_ || !pending_.empty() || !aborts_.empty() ||
               !tasks_.empty() || has_work();
      };
      if (!engine_ || !engine_->distributed() || failed_) {
        cv_.wait(lock, has_news);
      } else if (!cv_.wait_for(lock, std::chrono::duration<double>(
                                         bridge_config_.heartbeat_interval_s), has_news)) {
        lock.unlock();  // idle: are the other ranks still there?
        heartbeat();
        publish_gauges(0);  // the workers' reports; the next pass counts any new submissions
        continue;
      }
      pending.swap(pending_);
      tasks.swap(tasks_);
      aborts.swap(aborts_);
      all = abort_all_;
      abort_all_ = false;
      stop = stop_;
    }
    for (auto& p : pending) admit(p);
    // Between two steps, one forward pass at a time on the model (failed engine: refused).
    for (auto& task : tasks) finish_task(task, !failed_);
    if (!engine_) {
      // nothing to abort: an encoder runs tasks only
    } else if (all) {
      for (const auto& [id, live] : live_) engine_->abort(id);
    } else {
      for (uint64_t t : aborts) {
        auto it = by_ticket_.find(t);
        if (it == by_ticket_.end()) continue;
        for (auto id : it->second) engine_->abort(id);
      }
    }
    const bool stepped = has_work();
    bool gauges_current = false;  // published since the engine's state last changed
    if (stepped) {
      ttft_.step_started(engine::Clock::now());
      auto outputs = engine_->step();
      // The gauges first: a client that reads /metrics right after its reply sees the state
      // after the step that produced it, not the one before (a finished request still counted).
      publish_gauges(waiting_submissions());
      gauges_current = true;
      for (auto& out : outputs) deliver(std::move(out));
      if (!failed_) {
        if (Status st = engine_->health(); !st) fail_engine(st.error());
      }
      // Under load too, now and then: the workers' reports for the metrics.
      if (!failed_ && engine_->distributed() &&
          engine::Clock::now() - last_heartbeat_ >
              std::chrono::duration<double>(bridge_config_.heartbeat_interval_s)) {
        heartbeat();
        gauges_current = false;  // the workers' new reports
      }
    }
    // Once per pass: after a step it was done before the delivery, unless a heartbeat came since.
    if (!gauges_current) publish_gauges(waiting_submissions());
    if (stepped && engine_) {
      // Tokens computed beyond one per sampled row: prompt chunks (0 in a decode-only step).
      const int64_t tokens = last_computed_tokens_ - computed_tokens_seen_;
      const int64_t rows = last_generated_tokens_ - generated_tokens_seen_;
      computed_tokens_seen_ = last_computed_tokens_;
      generated_tokens_seen_ = last_generated_tokens_;
      ttft_.step_finished(engine::Clock::now(), tokens - rows, rows);
    }
    if (stop && !has_work()) {
      std::lock_guard lock(mu_);
      if (pending_.empty() && tasks_.empty()) break;
    }
  }
  // Anything submitted after the last pass (only possible during shutdown races) is refused.
  std::deque<Pending> rest;
  std::deque<EngineTask> rest_tasks;
  {
    std::lock_guard lock(mu_);
    rest.swap(pending_);
    rest_tasks.swap(tasks_);
  }
  for (auto& task : rest_tasks) finish_task(task, false);
  for (auto& p : rest) {
    size_t base = 0;
    size_t i = 0;
    for (const GenInput& input : p.inputs) {
      count_started(p.to_compute[i++], p.ttft.id);
      refuse(p, base, input, /*rejected=*/false, {});
      base += input.samples();
    }
  }
  std::lock_guard lock(mu_);
  idle_cv_.notify_all();
}

}  // namespace cadenza::server
