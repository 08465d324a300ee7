#include "cli/bench_prompt.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "loadgen/stats.h"

namespace cadenza::cli {

int run_prompt_bench(model::Model& model, const Tokenizer& tokenizer, const PromptBenchArgs& a) {
  using Clock = std::chrono::steady_clock;
  auto text = read_text_file(a.prompt_file);
  if (!text) {
    fmt::print(stderr, "bench: {}\n", text.error());
    return 1;
  }
  engine::EngineConfig ec;
  ec.max_num_seqs = a.concurrency;
  ec.max_num_batched_tokens = std::max(2048, a.concurrency);
  ec.enable_prefix_caching = false;  // every round computes its prompt: rounds stay alike
  ec.kv_type = a.kv_type;
  ec.speculative = a.speculative;
  auto created = engine::EngineCore::create(model, tokenizer, ec);
  if (!created) {
    fmt::print(stderr, "bench: {}\n", created.error());
    return 1;
  }
  engine::EngineCore& e = **created;
  const int32_t context = e.config().max_model_len;
  if (a.n_gen < 1 || a.n_gen >= context) {
    fmt::print(stderr, "bench: --n-gen {} must be in [1, {}) with --prompt-file\n", a.n_gen, context);
    return 1;
  }
  std::vector<int32_t> prompt = tokenizer.encode(*text, true, false);
  // The head of the file: the continuation then follows text the model has seen.
  prompt.resize(std::min(prompt.size(), static_cast<size_t>(context - a.n_gen)));
  if (prompt.empty()) {
    fmt::print(stderr, "bench: {} has no tokens\n", a.prompt_file);
    return 1;
  }
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = a.n_gen;
  sp.ignore_eos = true;

  std::vector<double> rates;
  std::vector<std::vector<int32_t>> first_round;
  bool identical = true;
  for (int rep = 0; rep < a.repetitions; ++rep) {
    std::vector<engine::RequestId> ids;
    for (int32_t i = 0; i < a.concurrency; ++i) {
      auto id = e.add_request(prompt, sp);
      if (!id) {
        fmt::print(stderr, "bench: {}\n", id.error());
        return 1;
      }
      ids.push_back(*id);
    }
    std::vector<std::vector<int32_t>> tokens(ids.size());
    Clock::time_point t_first{}, t_last{};
    int64_t generated = 0;
    while (e.has_work()) {
      for (engine::RequestOutput& out : e.step()) {
        if (out.finish_reason == engine::FinishReason::kError) {
          fmt::print(stderr, "bench: {}\n", out.error);
          return 1;
        }
        if (out.new_token_ids.empty()) continue;
        t_last = Clock::now();
        if (generated == 0) t_first = t_last;
        generated += static_cast<int64_t>(out.new_token_ids.size());
        const size_t slot = static_cast<size_t>(
            std::find(ids.begin(), ids.end(), out.id) - ids.begin());
        tokens[slot].insert(tokens[slot].end(), out.new_token_ids.begin(), out.new_token_ids.end());
      }
    }
    const double s = std::chrono::duration<double>(t_last - t_first).count();
    const int64_t decoded = generated - a.concurrency;  // the first tokens end the prompt phase
    rates.push_back(s > 0 ? static_cast<double>(decoded) / s : 0.0);
    if (rep == 0) first_round = tokens;
    for (const auto& t : tokens) identical = identical && t == first_round[0];
  }
  const double median = loadgen::summarize(rates).median;
  const engine::EngineStats st = e.stats();
  if (a.json) {
    nlohmann::json j;
    j["prompt_tokens"] = prompt.size();
    j["n_gen"] = a.n_gen;
    j["concurrency"] = a.concurrency;
    j["speculative_method"] = engine::to_string(a.speculative.method);
    j["num_speculative_tokens"] = a.speculative.num_speculative_tokens;
    j["tg_tokens_per_s_median"] = median;
    j["spec_num_drafts"] = st.num_spec_drafts;
    j["spec_num_draft_tokens"] = st.num_spec_draft_tokens;
    j["spec_num_accepted_tokens"] = st.num_spec_accepted_tokens;
    j["spec_num_emitted_tokens"] = st.num_spec_emitted_tokens;
    j["speculative_adaptive"] = a.speculative.adaptive;
    nlohmann::json per_pos = nlohmann::json::array();
    for (size_t i = 0; i < st.spec_draft_tokens_per_position.size(); ++i) {
      if (st.spec_draft_tokens_per_position[i] == 0) break;
      per_pos.push_back({{"drafted", st.spec_draft_tokens_per_position[i]},
                         {"accepted", st.spec_accepted_per_position[i]}});
    }
    j["spec_per_position"] = per_pos;
    j["steps"] = st.num_steps;
    j["identical_outputs"] = identical;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("prompt {} tokens, tg{} x {} concurrent, speculative {} (k={}): {:.2f} tokens/s "
               "(median of {}), {} steps\n",
               prompt.size(), a.n_gen, a.concurrency, engine::to_string(a.speculative.method),
               a.speculative.num_speculative_tokens, median, a.repetitions, st.num_steps);
    if (a.speculative.enabled()) fmt::print("{}\n", speculative_summary(st));
    fmt::print("outputs identical across requests and rounds: {}\n", identical ? "yes" : "NO");
  }
  return identical ? 0 : 1;
}

}  // namespace cadenza::cli
