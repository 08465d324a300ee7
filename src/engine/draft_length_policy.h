// Adaptive speculation: how many draft tokens each request gets this step (issue 25, item 3).
//
// Speculation pays only when verifying one more position costs less than the tokens it is
// expected to add. Both sides are measured:
//   - StepCostModel fits the forward pass's time as fixed_s + per_token_s * positions over recent
//     decode steps. A bandwidth-bound step (one sequence of a large model on a CPU) has a large
//     fixed part, reading the weights; a compute-bound one (a large batch, or a tiny model) has
//     almost none, and there more positions cost proportionally more time.
//   - AcceptanceEstimate tracks a request's rate alpha: the chance that a draft token is accepted
//     given that the ones before it were. Draft position j (1-based) then adds alpha^j expected
//     tokens.
//   - The proposer's own time per draft token (a draft model's passes; about 0 for n-gram lookup),
//     measured by the engine around each propose call, adds to every draft position's cost.
// plan_draft_lengths hands out draft positions greedily, the best expected gain first, while a
// position raises the step's expected tokens per second: with c = per_token_s + draft_s per draft
// position, adding gain g to a step expected to emit E tokens in time S pays iff  g * S > c * E.
// With no fixed cost that needs g > E / T >= 1, which never holds: no drafts; with no per-position
// cost every draft with any chance pays.
//
// Plain values, no threads: the engine thread owns them. Units: seconds and positions (tokens
// computed in one forward pass).
#pragma once

#include <cstdint>
#include <span>

namespace cadenza::engine {

// Exponentially weighted least-squares fit of step time against positions per step.
class StepCostModel {
 public:
  // Older steps weigh half as much every `half_life_steps` steps.
  explicit StepCostModel(double half_life_steps = 256);
  // One forward pass that computed `positions` positions in `seconds`.
  void add(double positions, double seconds);
  // A fit exists: at some point enough recent steps (weight >= 8) had different sizes (weighted
  // variance of the positions >= 0.25) for the slope to mean something. Stays true.
  bool ready() const { return has_fit_; }
  // The latest such fit, clamped to >= 0 (a negative intercept or slope is noise). While the
  // recent steps are all of one size (speculation off, a steady batch) the fit is kept as it was,
  // not refitted from the fading old points.
  double fixed_s() const { return fixed_s_; }
  double per_token_s() const { return per_token_s_; }

 private:
  double decay_ = 1.0;
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // weighted sums
  bool has_fit_ = false;
  double fixed_s_ = 0, per_token_s_ = 0;
};

// A request's draft acceptance rate, as accepted / tried drafts with older verifications decayed
// (each new one multiplies the old counts by 0.8), starting from a prior of `prior_rate` worth two
// drafts.
struct AcceptanceEstimate {
  explicit AcceptanceEstimate(double prior_rate = 0.5);
  // One verification that examined `tried` draft tokens and accepted the first `accepted` of them:
  // tried = accepted + 1 when the walk stopped at a rejection, tried = accepted when every draft
  // was accepted or a stop (EOS, a stop string, max tokens) ended the walk on an accepted one (the
  // drafts after it were never judged, so they count neither way).
  void add(int32_t tried, int32_t accepted);
  double rate() const;

  double accepted_ = 0;
  double tried_ = 0;
};

// Draft lengths for one step. rates[i] in [0, 1] and max_k[i] >= 0 describe request i; the step
// is expected to compute `base_positions` positions (decodes and prompt chunks) and emit
// `base_tokens` tokens without drafts; proposing costs `draft_s` seconds per draft token. Writes
// k[i] in [0, max_k[i]] (sizes must match).
void plan_draft_lengths(std::span<const double> rates, std::span<const int32_t> max_k,
                        double fixed_s, double per_token_s, double draft_s, double base_positions,
                        double base_tokens, std::span<int32_t> k);

}  // namespace cadenza::engine
