#include "loadgen/workload.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace cadenza::loadgen {
namespace {

// Common English words that are one token each (with a leading space) in mainstream vocabularies.
constexpr std::array<std::string_view, 128> kWords = {
    "the",    "of",      "and",    "to",      "in",      "is",       "was",    "for",     "on",
    "that",   "with",    "as",     "it",      "by",      "at",       "from",   "his",     "an",
    "be",     "this",    "are",    "or",      "which",   "also",     "had",    "first",   "one",
    "their",  "its",     "new",    "after",   "but",     "who",      "not",    "they",    "have",
    "has",    "her",     "she",    "two",     "been",    "other",    "when",   "there",   "all",
    "during", "into",    "school", "time",    "may",     "years",    "more",   "most",    "only",
    "over",   "city",    "some",   "world",   "would",   "where",    "later",  "up",      "such",
    "used",   "many",    "can",    "state",   "about",   "national", "out",    "known",   "under",
    "made",   "these",   "while",  "team",    "then",    "part",     "year",   "between", "house",
    "three",  "being",   "both",   "through", "history", "each",     "than",   "them",    "were",
    "water",  "light",   "small",  "large",   "music",   "river",    "book",   "north",   "south",
    "game",   "black",   "white",  "early",   "high",    "long",     "life",   "area",    "name",
    "number", "place",   "work",   "power",   "line",    "film",     "second", "family",  "party",
    "end",    "country", "group",  "well",    "back",    "found",    "local",  "old",     "great",
    "began",  "death"};

class TextSynth {
 public:
  TextSynth(const Tokenizer* tok, uint64_t seed) : tok_(tok), rng_(seed) {
    if (tok_) {
      for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
        if (tok_->is_control(id) || tok_->is_end_of_generation(id)) continue;
        const std::string piece = tok_->token_piece(id);
        if (piece.empty()) continue;
        // Printable ASCII-ish pieces keep prompts readable and avoid half characters.
        if (!std::all_of(piece.begin(), piece.end(), [](char c) {
              return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
            }))
          continue;
        ids_.push_back(id);
      }
      if (ids_.empty()) tok_ = nullptr;
    }
  }

  // Text of about n tokens; *count is its token count (exact with a tokenizer).
  std::string text(int32_t n, int32_t* count, bool* exact) {
    n = std::max(n, 1);
    if (!tok_) {
      std::string s;
      for (int32_t i = 0; i < n; ++i) {
        if (i) s.push_back(' ');
        s.append(kWords[rng_() % kWords.size()]);
      }
      *count = n;
      *exact = false;
      return s;
    }
    std::vector<int32_t> ids = random_ids(static_cast<size_t>(n));
    std::string s;
    std::vector<int32_t> enc;
    for (int round = 0; round < 6; ++round) {
      s = tok_->decode(ids);
      enc = tok_->encode(s, false, false);
      if (enc.size() == static_cast<size_t>(n)) break;
      if (enc.size() > static_cast<size_t>(n)) {
        enc.resize(static_cast<size_t>(n));
        ids = enc;
      } else {
        ids = enc;
        auto more = random_ids(static_cast<size_t>(n) - enc.size());
        ids.insert(ids.end(), more.begin(), more.end());
      }
    }
    *count = static_cast<int32_t>(enc.size());
    *exact = true;
    return s;
  }

 private:
  std::vector<int32_t> random_ids(size_t n) {
    std::vector<int32_t> out(n);
    for (auto& id : out) id = ids_[rng_() % ids_.size()];
    return out;
  }

  const Tokenizer* tok_;
  std::mt19937_64 rng_;
  std::vector<int32_t> ids_;
};

int32_t count_tokens(const Tokenizer* tok, std::string_view text) {
  if (tok) return static_cast<int32_t>(tok->encode(text, false, false).size());
  return estimate_tokens(text);
}

std::string flatten(const nlohmann::json& messages) {
  std::string s;
  for (const auto& m : messages) {
    if (!s.empty()) s.push_back('\n');
    s += m.value("content", std::string());
  }
  return s;
}

struct DatasetLine {
  nlohmann::json messages;
  int32_t output_len = 0;  // 0: not given
};

Result<std::vector<DatasetLine>> read_dataset(const std::string& path, const Tokenizer* tok) {
  std::ifstream in(path);
  if (!in) return make_error("{}: cannot open dataset", path);
  std::vector<DatasetLine> lines;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return make_error("{}:{}: not a JSON object", path, line_no);
    DatasetLine d;
    d.messages = nlohmann::json::array();
    if (j.contains("prompt") && j["prompt"].is_string()) {
      d.messages.push_back({{"role", "user"}, {"content", j["prompt"]}});
    } else if (j.contains("messages") && j["messages"].is_array()) {
      for (const auto& m : j["messages"]) {
        if (!m.is_object() || !m.contains("content") || !m["content"].is_string())
          return make_error("{}:{}: each message needs a string \"content\"", path, line_no);
        d.messages.push_back(
            {{"role", m.value("role", std::string("user"))}, {"content", m["content"]}});
      }
    } else if (j.contains("conversations") && j["conversations"].is_array()) {
      bool have_prompt = false;
      for (const auto& turn : j["conversations"]) {
        if (!turn.is_object() || !turn.contains("value") || !turn["value"].is_string()) continue;
        const std::string from = turn.value("from", std::string());
        const std::string& value = turn["value"].get_ref<const std::string&>();
        if (!have_prompt && from == "system") {
          d.messages.push_back({{"role", "system"}, {"content", value}});
        } else if (!have_prompt && (from == "human" || from == "user")) {
          d.messages.push_back({{"role", "user"}, {"content", value}});
          have_prompt = true;
        } else if (have_prompt && (from == "gpt" || from == "assistant" || from == "chatgpt")) {
          d.output_len = std::max(1, count_tokens(tok, value));
          break;
        }
      }
      if (!have_prompt)
        return make_error("{}:{}: conversation without a human turn", path, line_no);
    } else {
      return make_error("{}:{}: expected \"prompt\", \"messages\" or \"conversations\"", path,
                        line_no);
    }
    if (d.messages.empty()) return make_error("{}:{}: no messages", path, line_no);
    for (const char* key : {"output_len", "max_tokens"})
      if (j.contains(key) && j[key].is_number_integer()) d.output_len = j[key].get<int32_t>();
    lines.push_back(std::move(d));
  }
  if (lines.empty()) return make_error("{}: dataset has no requests", path);
  return lines;
}

}  // namespace

int32_t estimate_tokens(std::string_view text) {
  int32_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return std::max<int32_t>(words, static_cast<int32_t>((text.size() + 3) / 4));
}

int32_t draw_length(const LengthSpec& spec, std::mt19937_64& rng) {
  double len = spec.mean;
  const double s = std::max(0.0, spec.spread);
  if (spec.dist == LenDist::uniform) {
    std::uniform_real_distribution<double> u(spec.mean * (1 - s), spec.mean * (1 + s));
    len = u(rng);
  } else if (spec.dist == LenDist::normal && s > 0) {
    std::normal_distribution<double> n(spec.mean, s * spec.mean);
    len = n(rng);
  }
  int32_t out = static_cast<int32_t>(std::lround(len));
  out = std::max({out, spec.min_len, 1});
  if (spec.max_len > 0) out = std::min(out, spec.max_len);
  return std::max(out, 1);
}

Result<std::vector<WorkItem>> make_workload(const WorkloadOptions& o, const Tokenizer* tok,
                                            size_t count) {
  std::mt19937_64 rng(o.seed);
  std::vector<WorkItem> items;
  items.reserve(count);
  if (!o.dataset.empty()) {
    auto lines = read_dataset(o.dataset, tok);
    if (!lines) return lines.error_value();
    std::vector<size_t> order(lines->size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < count; ++i) {
      const DatasetLine& d = (*lines)[order[i % order.size()]];
      WorkItem w;
      w.messages = d.messages;
      w.prompt = flatten(d.messages);
      w.prompt_tokens = count_tokens(tok, w.prompt);
      w.prompt_tokens_exact = tok != nullptr;
      w.max_tokens =
          (o.output_len_explicit || d.output_len <= 0) ? draw_length(o.output, rng) : d.output_len;
      items.push_back(std::move(w));
    }
    return items;
  }
  TextSynth synth(tok, o.seed ^ 0x9E3779B97F4A7C15ULL);
  std::vector<std::string> prefixes;
  std::vector<int32_t> prefix_tokens;
  const bool shared = o.prefix_groups > 0 && o.prefix_len > 0;
  if (shared) {
    for (int32_t g = 0; g < o.prefix_groups; ++g) {
      int32_t n = 0;
      bool exact = false;
      prefixes.push_back(synth.text(o.prefix_len, &n, &exact));
      prefix_tokens.push_back(n);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    WorkItem w;
    int32_t n = 0;
    bool exact = false;
    std::string user = synth.text(draw_length(o.input, rng), &n, &exact);
    w.prompt_tokens = n;
    w.prompt_tokens_exact = exact;
    if (shared) {
      w.group = static_cast<int32_t>(i % prefixes.size());
      const std::string& p = prefixes[static_cast<size_t>(w.group)];
      w.messages.push_back({{"role", "system"}, {"content", p}});
      w.prompt = p + "\n";
      w.prompt_tokens += prefix_tokens[static_cast<size_t>(w.group)];
    }
    w.prompt += user;
    w.messages.push_back({{"role", "user"}, {"content", std::move(user)}});
    w.max_tokens = draw_length(o.output, rng);
    items.push_back(std::move(w));
  }
  return items;
}

}  // namespace cadenza::loadgen
