// EngineBridge: runs an EngineCore on its own thread and lets any thread submit and abort work.
//
//   EngineBridge bridge(std::move(engine), tokenizer, metrics, {.max_queue = 64});
//   bridge.start();                       // engine thread: warm-up, then the loop
//   auto sub = bridge.submit({{prompt, params}}, [ex](GenEvent e) { post(ex, ...); });
//   bridge.abort(sub.ticket);             // e.g. the client went away
//   bridge.stop_accepting(); bridge.wait_idle(30s); bridge.abort_all(); bridge.shutdown();
//
// Threads: the engine thread is the only one that touches the EngineCore (it is not thread-safe).
// Other threads talk to it through a mutex-protected submission queue and abort list; the engine
// thread sleeps on a condition variable while it has nothing to do.
// Sinks are called on the engine thread, once per output of each of the submission's requests,
// the last time with `out.finished` set; they must not block (post to an executor and return).
// Every accepted request gets a final event, aborted or not, so sinks can release their state.
// Ownership: the bridge owns the EngineCore; the Tokenizer and Metrics are borrowed and must
// outlive it (as must the Model the engine borrows).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine_core.h"
#include "server/metrics.h"
#include "server/ttft_admission.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::server {

// One engine request. params.n > 1 runs n samples of it (the engine forks them from the computed
// prompt); they produce events with consecutive indices.
struct GenInput {
  std::vector<int32_t> prompt;
  SamplingParams params;
  int32_t priority = 0;  // EngineCore::add_request's: lower is scheduled first
  std::vector<ImageInput> images;  // image embeddings at the prompt's placeholders (add_request's)
  size_t samples() const { return static_cast<size_t>(params.n > 1 ? params.n : 1); }
};

struct GenEvent {
  size_t index = 0;            // which sample of the submission: inputs in order, n per input
  engine::RequestOutput out;   // finished + finish_reason kError + error: rejected or failed
  bool rejected = false;       // add_request refused it (validation): nothing was generated
};

using GenSink = std::function<void(GenEvent)>;

struct BridgeConfig {
  // Requests allowed beyond the running capacity (max_num_seqs): submissions that would exceed
  // max_num_seqs + max_queue in-flight requests are refused (HTTP 429).
  int32_t max_queue = 256;
  bool warmup = true;
  // A model split across processes: while idle, the engine thread checks every this many
  // seconds that the workers answer (within heartbeat_timeout_s).
  double heartbeat_interval_s = 2;
  double heartbeat_timeout_s = 10;
  // Called once, on the engine thread, when the engine can no longer step (a rank of a split
  // model failed or stopped answering), after the in-flight requests got their error events;
  // ready() is false from then on. Must not block; the server ends the job (cli/serve.cpp).
  std::function<void(const std::string& why)> on_fatal;
  // Router mode: the served name, as the `model` label of this bridge's metrics (empty: none).
  std::string metrics_model{};
  // `serve --ttft-slo-factor`: > 0 (and >= 1) refuses a submission whose predicted time to first
  // token exceeds this many times its prediction on an idle server (server/ttft_admission.h).
  double ttft_slo_factor = 0;
};

// kTtftLimit: refused by the time-to-first-token objective (BridgeConfig::ttft_slo_factor).
enum class SubmitStatus { kOk, kQueueFull, kNotAccepting, kTtftLimit };

struct Submission {
  SubmitStatus status = SubmitStatus::kOk;
  uint64_t ticket = 0;  // for abort(); 0 unless kOk
  // kTtftLimit: the prediction, its limit, and when to try again (seconds).
  double predicted_ttft_s = 0;
  double ttft_limit_s = 0;
  double retry_after_s = 0;
};

class EngineBridge {
 public:
  // `engine` may be null (an encoder model, which does not generate): the bridge then runs only
  // tasks (run_task), one at a time (max_num_seqs 1 for the queue limit), and refuses
  // submissions' requests as rejected.
  EngineBridge(std::unique_ptr<engine::EngineCore> engine, const Tokenizer& tokenizer,
               Metrics& metrics, BridgeConfig config);
  ~EngineBridge();  // shutdown()
  EngineBridge(const EngineBridge&) = delete;
  EngineBridge& operator=(const EngineBridge&) = delete;

  // Starts the engine thread (warm-up first; ready() turns true after it).
  void start();
  bool ready() const { return ready_.load(); }

  // Thread-safe. All inputs of one submission are admitted together or not at all.
  Submission submit(std::vector<GenInput> inputs, GenSink sink);
  // Thread-safe. Runs `task` on the engine thread between two engine steps: work that needs the
  // model, which only that thread may use (embeddings, rerank scores). It counts as one in-flight
  // request (the queue limit, the drain). `task(true)` when it runs; `task(false)` when the bridge
  // shuts down first (it must then only clean up). Not queued (never called): kQueueFull,
  // kNotAccepting. The task must not block on the I/O threads.
  using EngineTask = std::function<void(bool run)>;
  SubmitStatus run_task(EngineTask task);
  // Thread-safe. Aborts every request of the ticket still running; unknown tickets are ignored.
  void abort(uint64_t ticket);
  void abort_all();

  // Refuse new submissions from now on (kNotAccepting).
  void stop_accepting() { accepting_.store(false); }
  bool accepting() const { return accepting_.load(); }
  // Requests submitted and not finished.
  int64_t in_flight() const { return in_flight_.load(); }
  // Waits until no request is in flight or the timeout passes; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Stops and joins the engine thread (remaining requests are aborted, their sinks told).
  void shutdown();

  const engine::EngineConfig& engine_config() const { return config_; }
  // The engine, for a run_task task (the engine thread only); null for an encoder model.
  engine::EngineCore* engine_for_task() { return engine_.get(); }

 private:
  struct Pending {
    uint64_t ticket;
    std::vector<GenInput> inputs;
    std::shared_ptr<GenSink> sink;
    engine::Clock::time_point submitted;
    TtftAdmission::Decision ttft;  // the admission's prediction (ttft_slo_factor > 0)
    std::vector<int64_t> to_compute;  // per input: its prompt's tokens the prediction counted
  };
  struct Live {
    uint64_t ticket;
    size_t index;  // event index of the request's sample 0
    std::shared_ptr<GenSink> sink;
    engine::Clock::time_point submitted;
    size_t remaining;  // samples without their final output yet
    int64_t unstarted_tokens;  // its prompt's tokens until its first output; then -1
    TtftAdmission::Decision ttft;
  };
  // Ends every sample of `input` (event indices from `base`) without running it.
  void refuse(const Pending& p, size_t base, const GenInput& input, bool rejected,
              const std::string& error);

  void loop();
  bool has_work() const { return engine_ && engine_->has_work(); }
  // Marks the engine failed (not ready), logs `why`, calls on_fatal. Engine thread.
  void fail_engine(const std::string& why);
  // A split model: every worker must answer within heartbeat_timeout_s (else fail_engine).
  void heartbeat();
  void warm_up();
  // --ttft-slo-factor: times single prompts of two lengths on the idle engine (TtftAdmission).
  void calibrate_ttft();
  void admit(Pending& p);
  void finish_task(EngineTask& task, bool run);
  void deliver(engine::RequestOutput out);
  void record_finished(const engine::RequestOutput& out, const Live& live);
  // Engine thread: the gauges from the engine's stats, `pending` submissions not yet admitted
  // counted as waiting. Called after each step before its outputs are delivered.
  void publish_gauges(size_t pending);
  // Sequences submitted but not yet taken by the engine thread (locks mu_).
  size_t waiting_submissions();
  // A request's first output (or its end without one): its prompt no longer waits.
  void count_started(int64_t prompt_tokens, uint64_t ttft_id);

  std::unique_ptr<engine::EngineCore> engine_;
  engine::EngineConfig config_;
  const Tokenizer& tokenizer_;
  Metrics& metrics_;
  BridgeConfig bridge_config_;

  std::mutex mu_;
  std::condition_variable cv_;       // the engine thread waits for work on it
  std::condition_variable idle_cv_;  // wait_idle() waits on it
  std::deque<Pending> pending_;
  std::deque<EngineTask> tasks_;
  std::vector<uint64_t> aborts_;
  bool abort_all_ = false;
  bool stop_ = false;

  std::atomic<bool> ready_{false};
  std::atomic<bool> accepting_{true};
  bool failed_ = false;  // engine thread: fail_engine ran
  std::chrono::steady_clock::time_point last_heartbeat_ = std::chrono::steady_clock::now();
  std::atomic<int64_t> in_flight_{0};
  std::atomic<uint64_t> next_ticket_{1};
  std::thread thread_;

  // Time-to-first-token admission: the step-cost fit, and the prompts submitted that have not
  // produced a first output yet (their tokens and their count; updated by submit and the engine
  // thread, reset when nothing is in flight so that no miscount can last).
  TtftAdmission ttft_;
  PrefixEstimate prefix_estimate_;  // with prefix caching: what the prediction counts as cached
  std::atomic<int64_t> unstarted_tokens_{0};
  std::atomic<int64_t> unstarted_requests_{0};
  // Engine thread: EngineStats::num_computed_tokens and num_generated_tokens as publish_gauges
  // last read them, and as the last step's fit used them (the differences: the tokens the step
  // just run computed and sampled).
  int64_t last_computed_tokens_ = 0, computed_tokens_seen_ = 0;
  int64_t last_generated_tokens_ = 0, generated_tokens_seen_ = 0;

  // Engine-thread state.
  std::unordered_map<engine::RequestId, Live> live_;
  std::unordered_map<uint64_t, std::vector<engine::RequestId>> by_ticket_;
};

}  // namespace cadenza::server
