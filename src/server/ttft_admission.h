#pragma once
// Admission by predicted time to first token: `cadenza serve --ttft-slo-factor F`.
//
// Under overload a server that only caps its slots (--max-num-seqs, --max-queue) admits whoever
// arrives when a slot frees; that request waits out the rest of the running step, then its
// prompt runs beside a full batch of decodes: on a small CPU its first token comes 3-5x later
// than on an idle server. With a factor F a request is admitted only when its predicted time to
// first token is within F times the same prompt's on an idle server; the others get 429 with a
// Retry-After (and retry-after-ms, which OpenAI's SDKs read) at the time the prediction says a
// retry could pass. Arrivals near a step's end are admitted, those that would wait are not, and
// when a full batch makes every prompt's step too slow, requests are refused until fewer run: the
// batch shrinks to what the objective allows. An idle server admits everything.
//
// The prediction, in seconds, for a prompt of P tokens with D requests decoding, and Q prompt
// tokens of admitted requests that have not produced a first token yet:
//   idle(P)        = k_idle * (a + b * P)
//   own(P, Q, D)   = k * (steps * decode(D) + b * (Q + P)),  steps = ceil((Q + P) / chunk)
//   predicted      = rest of the running step + own(P, Q, D),  k = k_load + 2 * dev_load
// Admitting a prompt lengthens the step of every admitted prompt that has not started yet (they
// run in the same step, or it pushes theirs back): a request is admitted only if each of those
// keeps its own first token within its limit, after the added k * b * P.
// a, b: a prompt step's fixed cost and cost per prompt token on the idle engine, measured at
// start (calibrate_idle: single prompts of two lengths). decode(D): the duration of recent steps
// that only decoded, a least-squares line over D with exponentially decaying weights (half-life
// 64 steps; a constant while D does not vary). rest: the last step's duration less the time
// since the running one started. k_idle, k_load: feedback, the moving average (weight 1/8) of
// measured over predicted for requests admitted while idle and while busy, so that what the
// model leaves out (attention over long contexts, other processes on the cores) is learnt; the
// busy prediction uses k_load + 2 * its mean absolute deviation, so that most admitted requests
// (not half of them) come in under their limit.
// chunk: max_num_batched_tokens - D.
//
// Thread-safety: every member takes one mutex (a few arithmetic operations); the engine thread
// calls calibrate_idle / step_* / observe_first_token, the I/O threads decide().

#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cadenza::server {

class TtftAdmission {
 public:
  using Clock = std::chrono::steady_clock;  // the same as engine::Clock

  struct Decision {
    bool admit = true;
    double predicted_s = 0;    // the request's predicted time to first token (admitted: too)
    double rest_s = 0;         // the part that is the running step's rest
    double own_raw_s = 0;      // its own part before the k_load correction (for the feedback)
    double idle_s = 0;         // the same prompt on an idle server
    double retry_after_s = 0;  // refused: when to try again (>= 0.001)
    bool busy = false;         // something was running or waiting when it was decided
    uint64_t id = 0;           // admitted: pass to started() (0: admission is off)
  };

  // factor <= 0: off (decide() admits everything); else >= 1.
  TtftAdmission(double factor, int32_t max_num_batched_tokens);

  bool enabled() const { return factor_ > 0; }
  // Until calibrate_idle, decide() admits everything.
  bool calibrated() const;

  // The idle engine: a prompt step costs base_s + per_token_s * tokens.
  void calibrate_idle(double base_s, double per_token_s);

  // Engine thread: around each engine step. `prompt_tokens`: prompt (and draft) tokens the step
  // computed besides its `decodes` (requests computing exactly one token).
  void step_started(Clock::time_point t);
  void step_finished(Clock::time_point t, int64_t prompt_tokens, int64_t decodes);
  // Engine thread: an admitted request's first output came `measured_s` after its submission.
  void observe_first_token(const Decision& d, double measured_s);

  // Any thread. `queued_tokens`: Q above; `decoding`: D above. An admitted request is held as
  // not started (its first token's predicted time and limit) until started(id).
  Decision decide(int64_t prompt_tokens, int64_t queued_tokens, int64_t decoding,
                  Clock::time_point now);
  // Its first output came, or it ended (or was refused) without one. Unknown ids are ignored.
  void started(uint64_t id);
  // Nothing is in flight: no admitted prompt waits.
  void clear_waiting();

  struct Model {
    double a = 0, b = 0;            // the idle prompt step (calibrated)
    double dec_a = 0, dec_c = 0;    // decode(D) = dec_a + dec_c * D
    double k_idle = 1, k_load = 1;  // feedback corrections
    double dev_load = 0;            // mean absolute deviation of k_load's samples
  };
  Model model() const;

 private:
  double decode_locked(double d) const;

  const double factor_;
  const int32_t max_batched_;
  mutable std::mutex mu_;
  bool calibrated_ = false;
  double a_ = 0, b_ = 0;
  double k_idle_ = 1, k_load_ = 1, dev_load_ = 0;
  // Decayed sums of the decode-only fit (x: decodes, y: seconds): 1, x, y, xx, xy.
  double s1_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
  // Admitted, first token not yet out: its predicted time and its limit.
  struct Waiting {
    uint64_t id;
    Clock::time_point predicted, limit;
  };
  std::vector<Waiting> waiting_;
  uint64_t next_id_ = 1;
  bool stepping_ = false;
  Clock::time_point step_start_{};
  double last_step_s_ = 0;
};

// Which prompt prefixes the engine's prefix cache probably holds, for the prediction above: the
// admission runs on the I/O threads, which cannot ask the engine's cache, so this keeps its own
// record of the full blocks of recently admitted prompts (chained hashes of block_size tokens,
// the last `capacity` blocks, least recently used dropped). A prompt's tokens in blocks seen
// before are predicted as cached. An estimate: the engine may have evicted them since, and it
// cannot know the images inside a prompt. Thread-safety: one mutex.
class PrefixEstimate {
 public:
  PrefixEstimate(int32_t block_size, size_t capacity);
  // Tokens at the start of `prompt` (whole blocks, and always fewer than its length) in blocks
  // recorded before.
  int64_t cached_tokens(const std::vector<int32_t>& prompt) const;
  // Records `prompt`'s full blocks as cached.
  void add(const std::vector<int32_t>& prompt);

 private:
  std::vector<uint64_t> block_hashes(const std::vector<int32_t>& prompt) const;

  const int32_t block_;
  const size_t capacity_;
  mutable std::mutex mu_;
  mutable uint64_t clock_ = 0;
  mutable std::unordered_map<uint64_t, uint64_t> last_used_;  // block hash -> clock
};

}  // namespace cadenza::server
