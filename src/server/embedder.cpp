#include "server/embedder.h"

#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/session.h"
#include "server/embeddings_routes.h"

namespace cadenza::server {

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

class DecoderEmbedder final : public Embedder {
 public:
  DecoderEmbedder(model::Model& model, const Tokenizer& tok, EmbedderOptions options)
      : Embedder(options), model_(model) {
    yes_id_ = tok.find_token("yes").value_or(-1);
    no_id_ = tok.find_token("no").value_or(-1);
  }

  int64_t n_embd() const override { return model_.config().n_embd; }
  int32_t n_vocab() const override { return static_cast<int32_t>(model_.config().n_vocab); }

  std::optional<std::string> rerank_unsupported(const Tokenizer&) const override {
    if (yes_id_ < 0 || no_id_ < 0)
      return std::string("its vocabulary has no 'yes' and 'no' tokens");
    return std::nullopt;
  }
  RerankInput rerank_input(const Tokenizer& tok, const std::string& instruction,
                           const std::string& query, const std::string& document) const override {
    return {tok.encode(reranker_prompt(instruction, query, document), false, true), {}};
  }

  Result<std::vector<std::vector<float>>> embed(
      const std::vector<std::vector<int32_t>>& inputs) override {
    std::vector<std::vector<float>> out;
    out.reserve(inputs.size());
    for (const auto& tokens : inputs) {
      auto s = session();
      if (!s) return s.error_value();
      // Every row's hidden state: the final norm per row costs little beside the prefill.
      Result<std::vector<float>> hidden = (*s)->hidden_all(tokens);
      if (!hidden) return hidden.error_value();
      std::vector<float> v = model::pool(*hidden, static_cast<int64_t>(tokens.size()), n_embd(),
                                         options_.pooling);
      model::l2_normalize(v);
      out.push_back(std::move(v));
    }
    return out;
  }

  Result<std::vector<double>> score(const std::vector<RerankInput>& inputs) override {
    std::vector<double> out;
    out.reserve(inputs.size());
    for (const RerankInput& in : inputs) {
      auto s = session();
      if (!s) return s.error_value();
      Result<std::vector<float>> logits = (*s)->eval(in.tokens);
      if (!logits) return logits.error_value();
      out.push_back(sigmoid(static_cast<double>((*logits)[static_cast<size_t>(yes_id_)]) -
                            (*logits)[static_cast<size_t>(no_id_)]));
    }
    return out;
  }

 private:
  Result<model::Session*> session() {
    if (!session_) {
      model::SessionOptions o;
      o.max_tokens = options_.max_tokens;
      o.max_batch_tokens = options_.max_batch_tokens;
      auto s = model::Session::create(model_, o);
      if (!s) return make_error("embeddings: {}", s.error());
      session_ = std::move(*s);
    }
    session_->reset();
    return session_.get();
  }

  model::Model& model_;
  std::unique_ptr<model::Session> session_;
  int32_t yes_id_ = -1, no_id_ = -1;  // the tokens "yes" and "no" (-1: absent)
};

class EncoderEmbedder final : public Embedder {
 public:
  EncoderEmbedder(model::Encoder& encoder, EmbedderOptions options)
      : Embedder(options), enc_(encoder) {
    options_.pooling = encoder.config().pooling;
    options_.max_tokens = static_cast<int32_t>(
        std::min<int64_t>(options.max_tokens > 0 ? options.max_tokens : encoder.config().n_ctx,
                          encoder.config().n_ctx));
  }

  int64_t n_embd() const override { return enc_.config().n_embd; }
  int32_t n_vocab() const override { return static_cast<int32_t>(enc_.config().n_vocab); }

  std::optional<std::string> rerank_unsupported(const Tokenizer& tok) const override {
    if (enc_.config().n_classes == 0) return std::string("it has no classification head");
    if (tok.bos_id() < 0 || tok.eos_id() < 0)
      return std::string("its vocabulary has no [CLS] / [SEP] tokens");
    return std::nullopt;
  }
  RerankInput rerank_input(const Tokenizer& tok, const std::string&, const std::string& query,
                           const std::string& document) const override {
    RerankInput in;
    in.tokens.push_back(tok.bos_id());  // [CLS]
    for (int32_t t : tok.encode(query, false, false)) in.tokens.push_back(t);
    in.tokens.push_back(tok.eos_id());  // [SEP]
    in.types.assign(in.tokens.size(), 0);
    for (int32_t t : tok.encode(document, false, false)) in.tokens.push_back(t);
    in.tokens.push_back(tok.eos_id());
    in.types.resize(in.tokens.size(), enc_.config().n_token_types > 1 ? 1 : 0);
    return in;
  }

  Result<std::vector<std::vector<float>>> embed(
      const std::vector<std::vector<int32_t>>& inputs) override {
    std::vector<std::vector<float>> out;
    out.reserve(inputs.size());
    return batched(inputs.size(), [&](size_t i) { return model::EncoderInput{inputs[i]}; },
                   [&](std::span<const model::EncoderInput> batch) -> Status {
                     auto v = enc_.embed(batch);
                     if (!v) return v.error_value();
                     for (auto& e : *v) out.push_back(std::move(e));
                     return {};
                   })
               ? Result<std::vector<std::vector<float>>>(std::move(out))
               : Result<std::vector<std::vector<float>>>(Error(error_));
  }

  Result<std::vector<double>> score(const std::vector<RerankInput>& inputs) override {
    std::vector<double> out;
    out.reserve(inputs.size());
    const bool ok = batched(
        inputs.size(),
        [&](size_t i) { return model::EncoderInput{inputs[i].tokens, inputs[i].types}; },
        [&](std::span<const model::EncoderInput> batch) -> Status {
          auto logits = enc_.classify(batch);
          if (!logits) return logits.error_value();
          for (const auto& l : *logits) out.push_back(sigmoid(l[0]));
          return {};
        });
    if (!ok) return Error(error_);
    return out;
  }

 private:
  // Runs `run` over consecutive batches of at most max_batch_tokens tokens (an input longer than
  // that is a batch of its own). false (error_ set) when a batch fails.
  template <typename Make, typename Run>
  bool batched(size_t n, Make make, Run run) {
    std::vector<model::EncoderInput> batch;
    size_t tokens = 0;
    for (size_t i = 0; i <= n; ++i) {
      const model::EncoderInput in = i < n ? make(i) : model::EncoderInput{};
      if (!batch.empty() &&
          (i == n || tokens + in.tokens.size() > static_cast<size_t>(options_.max_batch_tokens))) {
        if (Status st = run(std::span<const model::EncoderInput>(batch)); !st) {
          error_ = st.error();
          return false;
        }
        batch.clear();
        tokens = 0;
      }
      if (i < n) {
        batch.push_back(in);
        tokens += in.tokens.size();
      }
    }
    return true;
  }

  model::Encoder& enc_;
  std::string error_;
};

}  // namespace

std::unique_ptr<Embedder> make_decoder_embedder(model::Model& model, const Tokenizer& tokenizer,
                                                EmbedderOptions options) {
  return std::make_unique<DecoderEmbedder>(model, tokenizer, options);
}

Result<std::unique_ptr<Embedder>> decoder_embedder_for(model::Model& model, const Tokenizer& tokenizer,
                                                       const std::string& pooling_option,
                                                       int32_t max_tokens) {
  std::optional<model::Pooling> pooling;
  if (pooling_option.empty()) {
    auto from_file = model::pooling_of(model.file());
    if (!from_file) return from_file.error_value();
    pooling = *from_file;
  } else {
    pooling = model::parse_pooling(pooling_option);
    if (!pooling)
      return make_error("--pooling: unknown type '{}' (mean, cls, last, rank, none)", pooling_option);
  }
  if (!pooling || *pooling == model::Pooling::kNone) return std::unique_ptr<Embedder>();
  if (model.distributed() != nullptr) {
    spdlog::warn("pooling '{}' ignored: embeddings are not supported on a split model",
                 model::pooling_name(*pooling));
    return std::unique_ptr<Embedder>();
  }
  spdlog::info("embeddings: pooling '{}'", model::pooling_name(*pooling));
  return make_decoder_embedder(model, tokenizer,
                               EmbedderOptions{.pooling = *pooling, .max_tokens = max_tokens});
}

std::unique_ptr<Embedder> make_encoder_embedder(model::Encoder& encoder, EmbedderOptions options) {
  return std::make_unique<EncoderEmbedder>(encoder, options);
}

}  // namespace cadenza::server
