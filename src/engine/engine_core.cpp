#include "engine/engine_core.h"

#include <algorithm>
#include <cassert>

#include <spdlog/spdlog.h>

#include "engine/grammar_mask.h"
#include "kv/kv_sizing.h"
#include "request/validate_request.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"
#include "util/thread_pool.h"

namespace cadenza::engine {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int32_t kv_window_for(const model::ModelConfig& mc, const EngineConfig& config) {
  if (!config.sliding_window_kv || config.kv_tiers.enabled()) return 0;
  int32_t window = 0;
  for (int64_t l = 0; l < mc.n_layers; ++l)
    if (!mc.is_recurrent(l)) window = std::max(window, mc.attention_window(l));
  const int64_t max_len =
      config.max_model_len > 0 ? config.max_model_len : std::min<int64_t>(mc.context_length, 4096);
  return window < max_len ? window : 0;
}

int32_t kv_window_for(const model::Model& model, const EngineConfig& config) {
  return model.distributed() != nullptr ? 0 : kv_window_for(model.config(), config);
}

Result<std::unique_ptr<EngineCore>> EngineCore::create(model::Model& model,
                                                       const Tokenizer& tokenizer,
                                                       const EngineConfig& config) {
  return create(model, tokenizer, config, nullptr);
}

Result<std::unique_ptr<EngineCore>> EngineCore::create(model::Model& model,
                                                       const Tokenizer& tokenizer,
                                                       const EngineConfig& config,
                                                       std::unique_ptr<spec::Proposer> custom) {
  EngineConfig c = config;
  const int64_t context = model.config().context_length;
  if (c.block_size < 1) return make_error("engine: block_size must be >= 1 (got {})", c.block_size);
  if (c.max_model_len < 0) return make_error("engine: max_model_len must be >= 0");
  if (c.max_model_len == 0) c.max_model_len = static_cast<int32_t>(std::min<int64_t>(context, 4096));
  if (c.max_model_len > context)
    return make_error("engine: max_model_len {} exceeds the model's context length {}",
                      c.max_model_len, context);
  if (c.max_model_len < 2) return make_error("engine: max_model_len must be >= 2");
  Status sv = sched::validate({c.max_num_batched_tokens, c.max_num_seqs});
  if (!sv) return sv.error_value();
  const int64_t seq_blocks = ceil_div(c.max_model_len, c.block_size);
  if (c.num_kv_blocks < 0) return make_error("engine: num_kv_blocks must be >= 0");
  if (c.num_kv_blocks == 0)
    c.num_kv_blocks = static_cast<int32_t>(seq_blocks * std::min(c.max_num_seqs, 8));
  if (c.num_kv_blocks < seq_blocks)
    return make_error(
        "engine: {} KV blocks of {} tokens cannot hold one {}-token sequence (need {}); lower "
        "max_model_len or add blocks",
        c.num_kv_blocks, c.block_size, c.max_model_len, seq_blocks);
  if (tokenizer.n_vocab() > model.config().n_vocab)
    return make_error("engine: the tokenizer's vocabulary ({}) is larger than the model's ({})",
                      tokenizer.n_vocab(), model.config().n_vocab);
  if (Status st = validate(c.speculative); !st) return make_error("engine: {}", st.error());
  if (model.config().hybrid()) {
    // A recurrent state only moves forward: rejected drafts could not be rolled back. A cached
    // prefix resumes from a snapshot of the state taken at its last block (state_snapshots_).
    if (c.speculative.enabled()) {
      return make_error("engine: speculative decoding is not supported for the hybrid model {} "
                        "(its linear-attention state cannot roll back rejected drafts)",
                        model.config().architecture);
    }
    if (c.state_snapshot_bytes < 0) return make_error("engine: state_snapshot_bytes must be >= 0");
    if (c.state_snapshot_interval < 0 || c.state_snapshot_interval % c.block_size != 0) {
      return make_error("engine: state_snapshot_interval {} must be a non-negative multiple of the "
                        "block size {}", c.state_snapshot_interval, c.block_size);
    }
    if (c.enable_prefix_caching && c.state_snapshot_bytes == 0) {
      spdlog::info("engine: prefix caching is off for the hybrid model {} (no memory for "
                   "recurrent-state snapshots)", model.config().architecture);
      c.enable_prefix_caching = false;
    }
  }
  std::unique_ptr<spec::Proposer> proposer;
  if (!c.speculative.enabled()) {
    // No speculation: a custom proposer is not used.
  } else if (custom) {
    proposer = std::move(custom);
  } else if (c.speculative.method == SpeculativeMethod::kNgram) {
    auto p = spec::NgramProposer::create({.ngram_min = c.speculative.ngram_min,
                                          .ngram_max = c.speculative.ngram_max,
                                          .num_speculative_tokens = c.speculative.num_speculative_tokens});
    if (!p) return make_error("engine: speculative: {}", p.error());
    proposer = std::move(*p);
  } else if (c.speculative.method == SpeculativeMethod::kDraft) {
    // Its own KV pool of the engine's block count: per request it needs at most the positions
    // the target holds for it (no shared prefix blocks, though; a full pool only skips drafts).
    auto p = spec::DraftModelProposer::create(
        model, tokenizer,
        {.path = c.speculative.draft_model,
         .num_speculative_tokens = c.speculative.num_speculative_tokens,
         .num_blocks = c.num_kv_blocks,
         .block_size = c.block_size,
         .kv_type = c.kv_type,
         .max_num_seqs = c.max_num_seqs,
         .max_model_len = c.max_model_len,
         .max_step_tokens = c.max_num_batched_tokens});
    if (!p) return make_error("engine: speculative: {}", p.error());
    proposer = std::move(*p);
  }
  const int32_t window = kv_window_for(model, c);
  if (window == 0 && c.sliding_window_kv && (c.kv_tiers.enabled() || model.distributed() != nullptr)) {
    const model::ModelConfig& mc = model.config();
    for (int64_t l = 0; l < mc.n_layers; ++l) {
      if (mc.attention_window(l) > 0 && mc.attention_window(l) < c.max_model_len) {
        spdlog::info("engine: the sliding-window layers keep full-context KV ({})",
                     c.kv_tiers.enabled() ? "KV tiers hold blocks of every layer"
                                          : "not supported on a model split across processes");
        break;
      }
    }
  }
  if (c.num_window_kv_blocks < 0) return make_error("engine: num_window_kv_blocks must be >= 0");
  if (window == 0) {
    c.num_window_kv_blocks = 0;
  } else {
    if (c.num_window_kv_blocks == 0) {
      c.num_window_kv_blocks = kv::kv_window_blocks(window, c.block_size, c.max_num_seqs,
                                                    c.max_num_batched_tokens, c.num_kv_blocks);
    }
    // One sequence alone: its window behind a step plus the step's own positions.
    const int64_t one = std::min<int64_t>(
        seq_blocks, ceil_div(window - 1, c.block_size) +
                        ceil_div(std::min(c.max_num_batched_tokens, c.max_model_len), c.block_size) + 1);
    if (c.num_window_kv_blocks < one)
      return make_error("engine: {} window KV blocks cannot hold one sequence's window (need {})",
                        c.num_window_kv_blocks, one);
  }
  auto kv = model.create_kv_cache({.num_blocks = c.num_kv_blocks,
                                   .block_size = c.block_size,
                                   .type = c.kv_type,
                                   .num_state_slots = c.max_num_seqs,
                                   .num_window_blocks = c.num_window_kv_blocks});
  if (!kv) return make_error("engine: KV cache: {}", kv.error());
  // Scratch for the largest step: the token budget, one logit row and one block table per running
  // request, tables as long as max_model_len. A speculating request wants a row per draft too
  // (never more rows than tokens).
  const int64_t rows_per_seq = proposer ? 1 + c.speculative.num_speculative_tokens : 1;
  const int64_t max_rows = std::min<int64_t>(c.max_num_batched_tokens, c.max_num_seqs * rows_per_seq);
  Status reserved = model.reserve({c.max_num_batched_tokens, max_rows, c.max_num_seqs, seq_blocks});
  if (!reserved) return make_error("engine: {}", reserved.error());
  // Tiers hold attention blocks only; a hybrid model's prefix needs its state snapshot too, kept
  // in host memory apart (not moved through tiers): tiers stay off there.
  if (model.config().hybrid() && c.kv_tiers.enabled())
    spdlog::info("engine: KV tiers are off for the hybrid model {}", model.config().architecture);
  auto tiers = make_kv_tiers(c.kv_tiers, model, **kv,
                             c.enable_prefix_caching && !model.config().hybrid());
  if (!tiers) return tiers.error_value();
  auto engine = std::unique_ptr<EngineCore>(new EngineCore(model, tokenizer, c, std::move(*kv)));
  engine->proposer_ = std::move(proposer);
  if (*tiers) {
    engine->kv_tiers_ = std::move(*tiers);
    model::KvCache* cache = engine->kv_cache_.get();
    engine->kv_manager_->attach_tiers(
        engine->kv_tiers_.get(),
        {[cache](int32_t b, std::span<uint8_t> out) { return cache->read_block(b, out).ok(); },
         [cache](int32_t b, std::span<const uint8_t> in) { return cache->write_block(b, in).ok(); }});
  }
  return engine;
}

EngineCore::EngineCore(model::Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                       std::unique_ptr<model::KvCache> kv_cache)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      n_vocab_(static_cast<int32_t>(model.config().n_vocab)),
      kv_cache_(std::move(kv_cache)) {
  kv_manager_ = std::make_unique<kv::KvCacheManager>(
      kv::KvCacheConfig{.num_blocks = config_.num_kv_blocks,
                        .block_size = config_.block_size,
                        .enable_prefix_caching = config_.enable_prefix_caching,
                        .window = config_.num_window_kv_blocks > 0 ? kv_window_for(model, config_) : 0,
                        .num_window_blocks = config_.num_window_kv_blocks});
  if (config_.num_window_kv_blocks > 0) {
    spdlog::info("engine: sliding-window layers keep only their window ({} tokens): {} window "
                 "blocks beside {} main blocks ({} MiB of KV instead of {} MiB)",
                 kv_manager_->window(), config_.num_window_kv_blocks, config_.num_kv_blocks,
                 kv_cache_->size_bytes() >> 20,
                 (kv_cache_->size_bytes() + static_cast<size_t>(config_.num_kv_blocks - config_.num_window_kv_blocks) *
                                                kv_cache_->window_block_bytes()) >> 20);
  }
  if (model.config().hybrid()) state_slots_ = std::make_unique<kv::StateSlots>(config_.max_num_seqs);
  const bool snapshots = state_slots_ && config_.enable_prefix_caching;
  if (snapshots) {
    state_snapshots_ = std::make_unique<kv::MemoryTier>(config_.state_snapshot_bytes);
    state_bytes_.resize(kv_cache_->state_slot_bytes());
    // A cached prefix is usable only where the state after it was snapshotted.
    kv_manager_->set_prefix_usable(
        [s = state_snapshots_.get()](const kv::BlockHash& h) { return s->contains(h); });
    if (static_cast<int64_t>(state_bytes_.size()) > config_.state_snapshot_bytes) {
      spdlog::warn("engine: one recurrent-state snapshot ({} bytes) exceeds state_snapshot_bytes "
                   "({}): no prefix will be reused", state_bytes_.size(), config_.state_snapshot_bytes);
    }
  }
  scheduler_ = std::make_unique<sched::Scheduler>(
      sched::SchedulerConfig{.max_num_batched_tokens = config_.max_num_batched_tokens,
                             .max_num_seqs = config_.max_num_seqs,
                             .cut_chunks_at_last_block = snapshots,
                             .snapshot_interval = snapshots ? config_.state_snapshot_interval : 0},
      *kv_manager_);
  for (int32_t id = 0; id < tokenizer_.n_vocab(); ++id)
    if (tokenizer_.is_end_of_generation(id)) eog_ids_.push_back(id);
}

EngineCore::Stream::Stream(const SamplingParams& params, std::span<const int32_t> prompt,
                           std::span<const int32_t> eog_ids, int32_t n_vocab,
                           const Tokenizer& tokenizer, RequestId public_id_, int32_t index_)
    : sampler(params),
      processor(params, prompt, eog_ids, n_vocab),
      // the text continues the prompt's: keeps its first space
      detokenizer(tokenizer, prompt, /*render_special=*/!params.skip_special_tokens),
      stops(params.stop),
      public_id(public_id_),
      index(index_) {
  if (params.grammar) matcher.emplace(params.grammar);
}

EngineCore::~EngineCore() {
  // The next run over the same disk directory finds what this one cached.
  if (kv_tiers_ && kv_tiers_->tiers().back()->name() == "disk") {
    const int64_t n = kv_manager_->persist_to_tiers();
    spdlog::info("engine: KV disk tier: {} pool blocks persisted", n);
  }
}

size_t EngineCore::kv_cache_bytes() const { return kv_cache_->size_bytes(); }

Status EngineCore::restore_state(const Request& r, int32_t start, int32_t slot) {
  const int32_t bs = config_.block_size;
  const std::optional<kv::BlockHash> h =
      start % bs == 0 ? kv_manager_->block_hash(r.id, start / bs - 1) : std::nullopt;
  if (!h || !state_snapshots_->get(*h, state_bytes_))
    return make_error("engine: the recurrent-state snapshot of a {}-token cached prefix is missing", start);
  state_snapshots_->count_promotion();
  return kv_cache_->write_state(slot, state_bytes_);
}

void EngineCore::snapshot_states(const sched::SchedulePlan& plan) {
  const int32_t bs = config_.block_size;
  for (const sched::ScheduledRequest& e : plan.scheduled) {
    const Request& r = *e.request;
    const int32_t end = e.start + e.num_tokens;
    // Prompt chunks (a decode step is one token at the end) that ended on a block boundary.
    if (end % bs != 0 || (e.num_tokens == 1 && end == r.num_tokens())) continue;
    const std::optional<kv::BlockHash> h = kv_manager_->block_hash(r.id, end / bs - 1);
    if (!h || state_snapshots_->contains(*h)) continue;
    const std::optional<int32_t> slot = state_slots_->find(r.id);
    if (slot && kv_cache_->read_state(*slot, state_bytes_)) state_snapshots_->put(*h, state_bytes_);
  }
}

Status EngineCore::copy_kv(const kv::BlockCopy& copy) {
  if (copy.src >= 0) {
    if (Status st = kv_cache_->copy_block(copy.src, copy.dst, copy.num_tokens); !st) return st;
  }
  if (copy.window_src >= 0) return kv_cache_->copy_window_block(copy.window_src, copy.window_dst, copy.num_tokens);
  return {};
}

Result<PrefixCacheCleared> EngineCore::clear_prefix_cache(std::string_view tier) {
  const bool all = tier == "all";
  if (!all && tier != "pool" && tier != "memory" && tier != "disk")
    return make_error("unknown cache tier '{}' (pool, memory, disk or all)", tier);
  PrefixCacheCleared c;
  if (all || tier == "pool") {
    c.pool_blocks = kv_manager_->pool().num_cached();
    kv_manager_->reset_prefix_cache();
    if (state_snapshots_) state_snapshots_->clear();  // the prefixes they resumed are gone
  }
  if (kv_tiers_) {
    for (const auto& t : kv_tiers_->tiers()) {
      if (!all && t->name() != tier) continue;
      const int64_t freed = t->clear();
      (t->name() == "disk" ? c.disk_bytes : c.memory_bytes) += freed;
    }
  }
  return c;
}

Result<RequestId> EngineCore::add_request(std::vector<int32_t> prompt, const SamplingParams& params,
                                          int32_t priority, std::string cache_salt,
                                          std::vector<ImageInput> images) {
  if (auto e = validate_request(prompt, params, {n_vocab_, config_.max_model_len}))
    return make_error("request: {}", e->message);
  if (!images.empty() && model_.distributed() != nullptr)
    return make_error("request: images are not supported on a model split across processes");
  const auto n_embd = static_cast<size_t>(model_.config().n_embd);
  int64_t next_free = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageInput& im = images[i];
    if (im.num_tokens < 1 || im.position < next_free ||
        static_cast<int64_t>(im.position) + im.num_tokens > static_cast<int64_t>(prompt.size()))
      return make_error("request: image {} (positions {}..{}) is out of order, overlaps another or "
                        "lies outside the {}-token prompt", i, im.position,
                        static_cast<int64_t>(im.position) + im.num_tokens, prompt.size());
    if (!im.embeddings || im.embeddings->size() != static_cast<size_t>(im.num_tokens) * n_embd)
      return make_error("request: image {} has {} embedding values, not {} x {}", i,
                        im.embeddings ? im.embeddings->size() : 0, im.num_tokens, n_embd);
    // Computed in one step beside at most max_num_seqs - 1 decodes (the scheduler's cut).
    const int32_t step_room = config_.max_num_batched_tokens - config_.max_num_seqs + 1;
    if (im.bidirectional && im.num_tokens > step_room)
      return make_error("request: image {} has {} tokens that attend to each other, more than the "
                        "{} one step computes beside the decodes (max_num_batched_tokens {} - "
                        "max_num_seqs {} + 1)", i, im.num_tokens, step_room,
                        config_.max_num_batched_tokens, config_.max_num_seqs);
    if (im.bidirectional && !model_.backend().supports_attention_spans())
      return make_error("request: image {} needs bidirectional attention (Gemma 3), which this "
                        "backend does not support", i);
    next_free = static_cast<int64_t>(im.position) + im.num_tokens;
  }
  const RequestId public_id = next_id_;
  const Clock::time_point arrival = Clock::now();
  for (int32_t i = 0; i < params.n; ++i) {
    auto r = std::make_unique<Request>();
    r->id = next_id_++;
    r->num_prompt_tokens = static_cast<int32_t>(prompt.size());
    r->tokens = prompt;
    r->params = params;
    r->params.seed = params.seed + static_cast<uint64_t>(i);
    r->priority = priority;
    r->arrival_time = arrival;
    r->cache_salt = cache_salt;
    r->images = images;  // shared embeddings: a copy of the descriptors per sample
    auto stream = std::make_unique<Stream>(r->params, r->prompt(), eog_ids_, n_vocab_, tokenizer_,
                                           public_id, i);
    stream->metrics.num_prompt_tokens = r->num_prompt_tokens;
    stream->acceptance = AcceptanceEstimate(acceptance_.rate());
    streams_.emplace(r->id, std::move(stream));
    if (params.n == 1)
      scheduler_->add(std::move(r));
    else
      join_group(public_id, i, std::move(r));
  }
  return public_id;
}

RequestOutput EngineCore::new_output(RequestId id) const {
  RequestOutput out;
  out.id = id;
  if (auto it = streams_.find(id); it != streams_.end()) {
    out.id = it->second->public_id;
    out.index = it->second->index;
  }
  return out;
}

void EngineCore::drop_stream(RequestId id, RequestOutput& out) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  out.metrics = std::move(it->second->metrics);
  leave_group(it->second->public_id, id);
  streams_.erase(it);
}

void EngineCore::mark_scheduled(const Request& r, Stream& s, Clock::time_point now) {
  s.scheduled = true;
  s.metrics.queue_time_s = seconds(now - r.arrival_time);
  totals_.queue_time.add(s.metrics.queue_time_s);
}

void EngineCore::finish(RequestId id, FinishReason reason, RequestOutput& out,
                        std::unique_ptr<Request> ended) {
  std::unique_ptr<Request> r = ended ? std::move(ended) : scheduler_->finish(id, reason);
  out.finished = true;
  out.finish_reason = reason;
  drop_stream(id, out);
  if (proposer_) proposer_->release(id);
  if (state_slots_) state_slots_->release(id);
  if (r) {
    out.metrics.num_output_tokens = r->num_output_tokens();
    out.metrics.num_cached_prompt_tokens = std::max(r->num_cached_prompt_tokens, 0);
    out.metrics.num_preemptions = r->num_preemptions;
  }
  ++totals_.num_finished;
}

bool EngineCore::process_token(Request& r, Stream& s, int32_t token, RequestOutput& out) {
  const Clock::time_point now = Clock::now();
  r.tokens.push_back(token);
  out.new_token_ids.push_back(token);
  ++totals_.num_generated_tokens;
  if (!s.has_token) {
    s.metrics.ttft_s = seconds(now - r.arrival_time);
    totals_.ttft.add(s.metrics.ttft_s);
    s.has_token = true;
  } else {
    const double gap = seconds(now - s.last_token);
    s.metrics.inter_token_s.push_back(gap);
    totals_.inter_token.add(gap);
  }
  s.last_token = now;

  const SamplingParams& p = r.params;
  const bool stop_token =
      (!p.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  if (stop_token) {  // its text is not returned; flush what was held back
    StopStringFilter::Output o = s.stops.finish(s.detokenizer.finish());
    out.text += o.text;
    return true;
  }
  const bool length = r.num_output_tokens() >= p.max_tokens || r.num_tokens() >= config_.max_model_len;
  const std::string piece = s.detokenizer.push(token);
  StopStringFilter::Output o =
      length ? s.stops.finish(piece + s.detokenizer.finish()) : s.stops.push(piece);
  out.text += o.text;
  if (o.stopped) {
    out.finish_reason = FinishReason::kStop;
    out.stop_string = std::move(o.matched);
    return true;
  }
  if (length) {
    out.finish_reason = FinishReason::kLength;
    return true;
  }
  if (s.matcher && s.matcher->is_terminated()) {  // the grammar admits nothing more
    out.text += s.stops.finish(s.detokenizer.finish()).text;
    out.finish_reason = FinishReason::kStop;
    return true;
  }
  return false;
}

std::vector<RequestOutput> EngineCore::step() {
  std::vector<RequestOutput> outputs;
  const Clock::time_point step_start = Clock::now();
  if (proposer_) propose_drafts();
  sched::SchedulePlan plan = scheduler_->schedule();
  if (proposer_)  // a preempted request starts over (the proposer contract)
    for (RequestId id : plan.preempted) proposer_->release(id);
  if (state_slots_)  // and so does its recurrent state (position 0 clears the slot it gets next)
    for (RequestId id : plan.preempted) state_slots_->release(id);

  for (std::unique_ptr<Request>& r : plan.aborted) {
    const RequestId id = r->id;
    RequestOutput out = new_output(id);
    finish(id, FinishReason::kAbort, out, std::move(r));
    outputs.push_back(std::move(out));
    drop_pending(id, FinishReason::kAbort, {}, outputs);
  }
  if (state_snapshots_) {
    // Requests admitted on a prefix hit start past 0 without a state: their fresh slot gets the
    // state snapshotted after that prefix (the manager found only prefixes with one).
    for (size_t i = 0; i < plan.scheduled.size();) {
      const sched::ScheduledRequest& e = plan.scheduled[i];
      if (e.start == 0 || state_slots_->find(e.request->id)) {
        ++i;
        continue;
      }
      const std::optional<int32_t> slot = state_slots_->acquire(e.request->id);
      Status st = slot ? restore_state(*e.request, e.start, *slot)
                       : Status(Error("engine: no recurrent-state slot"));
      if (st) {
        ++i;
        continue;
      }
      const RequestId id = e.request->id;  // a bug if it happens: the manager checked the snapshot
      plan.num_batched_tokens -= e.num_tokens;
      plan.scheduled.erase(plan.scheduled.begin() + static_cast<std::ptrdiff_t>(i));
      RequestOutput out = new_output(id);
      out.error = st.error();
      finish(id, FinishReason::kError, out);
      outputs.push_back(std::move(out));
      drop_pending(id, FinishReason::kError, st.error(), outputs);
    }
    if (plan.empty()) return outputs;
  }

  // One ragged batch over every scheduled request.
  tokens_.clear();
  positions_.clear();
  seq_index_.clear();
  logit_rows_.clear();
  tables_.clear();
  window_tables_.clear();
  batch_state_slots_.clear();
  embd_rows_.clear();
  embd_values_.clear();
  attention_spans_.clear();
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& e = plan.scheduled[i];
    const Request& r = *e.request;
    const auto first_row = static_cast<int32_t>(tokens_.size());
    for (int32_t p = e.start; p < e.start + e.num_tokens; ++p) {
      tokens_.push_back(r.tokens[static_cast<size_t>(p)]);
      positions_.push_back(p);
      seq_index_.push_back(static_cast<int32_t>(i));
    }
    if (!r.images.empty()) add_image_rows(r, e.start, e.num_tokens, first_row, static_cast<int32_t>(i));
    tables_.push_back(e.block_table);
    if (kv_manager_->has_window_group()) window_tables_.push_back(e.window_block_table);
    if (state_slots_) {
      // At most max_num_seqs requests run, each holding one of max_num_seqs slots.
      const std::optional<int32_t> slot = state_slots_->acquire(r.id);
      assert(slot && "more running requests than state slots");
      batch_state_slots_.push_back(slot.value_or(0));
    }
    // Drafts: the rows of the last real token and of every draft (each verifies the next).
    if (e.sample)
      for (int32_t d = e.num_draft_tokens; d >= 0; --d)
        logit_rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1 - d);
    Stream& s = *streams_.at(r.id);
    if (!s.scheduled) mark_scheduled(r, s, now);
  }
  logits_.resize(logit_rows_.size() * static_cast<size_t>(n_vocab_));
  model::Batch batch{tokens_, positions_, seq_index_, tables_, logit_rows_, batch_state_slots_};
  batch.window_block_tables = window_tables_;
  batch.embd_rows = embd_rows_;
  batch.embd_values = embd_values_;
  batch.attention_spans = attention_spans_;
  const Clock::time_point forward_start = Clock::now();
  totals_.step_schedule_s += seconds(forward_start - step_start);
  Status status = model_.forward(batch, *kv_cache_, logits_);
  const Clock::time_point forward_end = Clock::now();
  totals_.step_forward_s += seconds(forward_end - forward_start);
  // Adaptive speculation fits decode steps only (every position has a logit row, as drafts do):
  // prompt chunks cost less per position and would blur the slope.
  if (status && logit_rows_.size() == tokens_.size())
    step_cost_.add(static_cast<double>(tokens_.size()), seconds(forward_end - forward_start));
  if (!status) {
    // Nothing was computed; every scheduled request fails with the reason.
    for (const sched::ScheduledRequest& e : plan.scheduled) {
      const RequestId id = e.request->id;
      RequestOutput out = new_output(id);
      out.error = status.error();
      finish(id, FinishReason::kError, out);
      outputs.push_back(std::move(out));
      drop_pending(id, FinishReason::kError, status.error(), outputs);
    }
    return outputs;
  }
  ++totals_.num_steps;
  totals_.num_computed_tokens += plan.num_batched_tokens;
  scheduler_->commit(plan);
  if (state_snapshots_) snapshot_states(plan);

  // Each sampling entry's first logit row.
  std::vector<size_t> rows(plan.scheduled.size(), 0);
  size_t row = 0;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    rows[i] = row;
    if (plan.scheduled[i].sample) row += 1 + static_cast<size_t>(plan.scheduled[i].num_draft_tokens);
  }
  draw_in_parallel(plan, rows);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& e = plan.scheduled[i];
    if (!e.sample) continue;
    Request& r = *e.request;
    row = rows[i];
    if (e.num_draft_tokens > 0) {
      const size_t n_rows = 1 + static_cast<size_t>(e.num_draft_tokens);
      verify_drafts(r, e,
                    std::span<float>(logits_.data() + row * static_cast<size_t>(n_vocab_),
                                     n_rows * static_cast<size_t>(n_vocab_)),
                    outputs);
      continue;
    }
    if (drawn_[i] >= 0) {  // drawn on the pool: emit in plan order, as the serial loop does
      RequestOutput out = std::move(drawn_out_[i]);
      if (emit_token(r, *streams_.at(r.id), drawn_[i], out)) finish_ended(r, out);
      outputs.push_back(std::move(out));
      continue;
    }
    std::span<float> logits(logits_.data() + row * static_cast<size_t>(n_vocab_),
                            static_cast<size_t>(n_vocab_));
    // Its prompt is computed (and its full blocks cached): the other samples start, from the
    // same logits when they can be forked (the row is then shared: each processes a copy).
    const std::vector<Request*> forked = release_pending(r.id, outputs);
    const bool shared = !forked.empty();
    sample_next(r, logits, shared, outputs);
    for (Request* child : forked) sample_next(*child, logits, shared, outputs);
  }
  totals_.step_sample_s += seconds(Clock::now() - forward_end);
  return outputs;
}

void EngineCore::add_image_rows(const Request& r, int32_t start, int32_t count, int32_t first_row,
                                int32_t seq) {
  const auto n_embd = static_cast<size_t>(model_.config().n_embd);
  const int32_t end = start + count;
  for (const ImageInput& im : r.images) {
    const int32_t lo = std::max(start, im.position);
    const int32_t hi = std::min(end, im.position + im.num_tokens);
    if (im.bidirectional && lo < hi) attention_spans_.push_back({seq, im.position, im.position + im.num_tokens - 1});
    for (int32_t p = lo; p < hi; ++p) {
      embd_rows_.push_back(first_row + (p - start));
      const float* src = im.embeddings->data() + static_cast<size_t>(p - im.position) * n_embd;
      embd_values_.insert(embd_values_.end(), src, src + n_embd);
    }
  }
}

void EngineCore::sample_next(Request& r, std::span<float> logits, bool shared_row,
                             std::vector<RequestOutput>& outputs) {
  Stream& s = *streams_.at(r.id);
  RequestOutput out = new_output(r.id);
  if (sample_token(r, s, logits, shared_row, out)) finish_ended(r, out);
  outputs.push_back(std::move(out));
}

void EngineCore::draw_in_parallel(const sched::SchedulePlan& plan,
                                  const std::vector<size_t>& rows) {
  drawn_.assign(plan.scheduled.size(), -1);
  drawn_out_.resize(plan.scheduled.size());
  ThreadPool* pool = model_.backend().host_pool();
  if (!config_.parallel_sampling || pool == nullptr || pool->size() < 2) return;
  std::vector<size_t> plain;  // plan entries drawn on the pool
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const sched::ScheduledRequest& e = plan.scheduled[i];
    if (!e.sample || e.num_draft_tokens > 0) continue;
    const Stream& s = *streams_.at(e.request->id);
    // A grammar shares the engine's mask scratch; samples waiting to fork share the row.
    if (s.matcher || pending_.count(e.request->id) != 0) continue;
    plain.push_back(i);
  }
  if (plain.size() < 2) return;  // nothing to spread
  for (size_t i : plain) drawn_out_[i] = new_output(plan.scheduled[i].request->id);
  pool->parallel_for(static_cast<int64_t>(plain.size()), [&](int64_t k, int) {
    thread_local std::vector<int32_t> logprob_scratch;
    const size_t i = plain[static_cast<size_t>(k)];
    Request& r = *plan.scheduled[i].request;
    Stream& s = *streams_.find(r.id)->second;  // find: no insertion, safe beside other readers
    std::span<float> row(logits_.data() + rows[i] * static_cast<size_t>(n_vocab_),
                         static_cast<size_t>(n_vocab_));
    // Without a grammar a draw always yields a token.
    drawn_[i] = draw_token(r, s, row, /*shared_row=*/false, drawn_out_[i], -1, nullptr,
                           logprob_scratch);
  });
}

bool EngineCore::sample_token(Request& r, Stream& s, std::span<float> row, bool shared_row,
                              RequestOutput& out, int32_t draft, bool* accepted) {
  const int32_t token = draw_token(r, s, row, shared_row, out, draft, accepted, scratch_);
  if (token < 0) return true;
  return emit_token(r, s, token, out);
}

int32_t EngineCore::draw_token(Request& r, Stream& s, std::span<float> row, bool shared_row,
                               RequestOutput& out, int32_t draft, bool* accepted,
                               std::vector<int32_t>& logprob_scratch) {
  std::span<const float> logits = row;
  if (s.processor.active() || s.matcher) {
    // A row no other sample reads is processed where it lies: copying 150k logits per token
    // was a measurable part of a constrained request's cost (docs/structured-output.md).
    std::span<float> processed = row;
    if (shared_row) {
      processed_.assign(row.begin(), row.end());
      processed = processed_;
    }
    if (s.processor.active()) s.processor.apply(processed, r.num_output_tokens());
    if (s.matcher) {
      grammar_mask_.resize(s.matcher->mask_words());
      s.matcher->fill_next_token_bitmask(grammar_mask_);
      if (!apply_token_bitmask(grammar_mask_, processed)) {
        // The grammar allows only tokens that processing ruled out (end-of-generation under
        // min_tokens, say): nothing can be sampled, so the request ends here.
        out.text += s.stops.finish(s.detokenizer.finish()).text;
        out.finish_reason = FinishReason::kStop;
        return -1;
      }
    }
    logits = processed;
  }
  int32_t token = -1;
  if (draft >= 0) {
    const Sampler::Verdict v = s.sampler.verify(logits, draft);
    token = v.token;
    *accepted = v.accepted;
  } else {
    token = s.sampler.sample(logits);
  }
  if (r.params.logprobs >= 0)
    out.logprobs.push_back(compute_logprobs(logits, token, r.params.logprobs, logprob_scratch));
  return token;
}

bool EngineCore::emit_token(Request& r, Stream& s, int32_t token, RequestOutput& out) {
  s.processor.accept(token);
  if (s.matcher) {
    const bool allowed = s.matcher->accept_token(token);
    assert(allowed && "the mask admitted the token");
    (void)allowed;
  }
  return process_token(r, s, token, out);
}

void EngineCore::finish_ended(Request& r, RequestOutput& out) {
  const FinishReason reason =
      out.finish_reason == FinishReason::kNone ? FinishReason::kStop : out.finish_reason;
  finish(r.id, reason, out);
}

Status EngineCore::health() const {
  const model::Distributed* d = model_.distributed();
  return d ? d->status() : Status{};
}

Status EngineCore::check_workers(double timeout_s) { return model_.ping(timeout_s); }

EngineStats EngineCore::stats() const {
  EngineStats s = totals_;
  const sched::SchedulerStats ss = scheduler_->stats();
  s.num_running = ss.num_running;
  s.num_waiting = ss.num_waiting;
  s.num_preemptions = ss.num_preemptions;
  s.kv_usage = kv_manager_->usage();
  if (state_snapshots_) {
    const kv::KvTierStats ss = state_snapshots_->stats();
    s.state_snapshots = ss.blocks;
    s.state_snapshot_bytes = ss.bytes;
    s.state_snapshot_restores = ss.promotions;
  }
  s.kv_used_bytes =
      static_cast<int64_t>(kv_manager_->num_blocks() - kv_manager_->num_free_blocks()) *
          static_cast<int64_t>(kv_cache_->block_bytes()) +
      static_cast<int64_t>(kv_manager_->num_window_blocks() - kv_manager_->num_free_window_blocks()) *
          static_cast<int64_t>(kv_cache_->window_block_bytes());
  const kv::KvCacheStats ks = kv_manager_->stats();
  s.prefix_cache_queries = ks.queries;
  s.prefix_cache_hits = ks.hits;
  s.prefix_cache_query_tokens = ks.query_tokens;
  s.prefix_cache_hit_tokens = ks.hit_tokens;
  s.prefix_cache_tier_hit_blocks = ks.tier_hit_blocks;
  if (kv_tiers_)
    for (const auto& t : kv_tiers_->tiers()) s.kv_tiers.push_back({std::string(t->name()), t->stats()});
  return s;
}

}  // namespace cadenza::engine
