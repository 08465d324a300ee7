// A Backend that computes with another and, on the way, adds every weight matmul's input
// activations to an importance matrix (quantize/imatrix.h): for matmul(w, x, y) and each row of
// x, x[c]^2 to column c of w's entry and 1 to its count; for matmul_experts, each (token, slot)
// row to the entry's matrix of the slot's expert (slots whose id is -1 are skipped). Everything
// else passes through unchanged, so the model computes exactly what it would on the inner backend.
//
// Which weights: every matmul weight except the LM head (`output.weight`, or `token_embd.weight`
// where the embeddings are tied; the LM head's importance is rarely
// wanted and costs a vocabulary-sized row; record_output turns it on).
//
// The inner backend must keep activations in host memory (host_memory(): the CPU backend); the
// recorder reads the views directly after synchronize(). Not thread-safe (like any Backend, one
// thread issues ops). The inner backend must outlive the recorder.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "quantize/imatrix.h"

namespace cadenza::eval {

class ActivationRecorder final : public kernels::Backend {
 public:
  ActivationRecorder(kernels::Backend& inner, quantize::Imatrix& out, bool record_output = false)
      : inner_(inner), out_(out), record_output_(record_output) {}

  // Recording on or off (on by default): off while warming up or running rows that should not
  // count.
  void set_recording(bool on) { recording_ = on; }

  std::string_view name() const override { return inner_.name(); }
  Result<std::unique_ptr<kernels::Weight>> upload_weight(const kernels::WeightDesc& d) override {
    return inner_.upload_weight(d);
  }
  Result<std::unique_ptr<kernels::Buffer>> allocate(size_t n) override { return inner_.allocate(n); }
  void write(kernels::Buffer& dst, size_t off, const void* src, size_t n) override {
    inner_.write(dst, off, src, n);
  }
  void read(const kernels::Buffer& src, size_t off, void* dst, size_t n) override {
    inner_.read(src, off, dst, n);
  }
  void copy(kernels::Buffer& dst, size_t doff, const kernels::Buffer& src, size_t soff,
            size_t n) override {
    inner_.copy(dst, doff, src, soff, n);
  }
  bool host_memory() const override { return inner_.host_memory(); }
  ThreadPool* host_pool() override { return inner_.host_pool(); }
  void read_view(kernels::Matrix src, float* dst) override { inner_.read_view(src, dst); }
  void write_view(const float* src, kernels::Matrix dst) override { inner_.write_view(src, dst); }
  void synchronize() override { inner_.synchronize(); }
  int device_ordinal() const override { return inner_.device_ordinal(); }
  bool supports_kv_type(DType t) const override { return inner_.supports_kv_type(t); }
  bool supports_recurrent() const override { return inner_.supports_recurrent(); }
  bool supports_attention_spans() const override { return inner_.supports_attention_spans(); }
  void short_conv(kernels::Matrix x, const kernels::Weight& w, const kernels::Weight* bias,
                  kernels::Matrix state, const kernels::RecurrentBatch& b,
                  kernels::Matrix out) override {
    inner_.short_conv(x, w, bias, state, b, out);
  }
  void ssm_scan(kernels::Matrix x, kernels::Matrix bm, kernels::Matrix c, kernels::Matrix dt,
                kernels::Matrix state, const kernels::RecurrentBatch& b,
                const kernels::SsmScanParams& p, kernels::Matrix out) override {
    inner_.ssm_scan(x, bm, c, dt, state, b, p, out);
  }
  void gated_delta_rule(kernels::Matrix q, kernels::Matrix k, kernels::Matrix v,
                        kernels::Matrix alpha, kernels::Matrix beta, kernels::Matrix state,
                        const kernels::RecurrentBatch& b, const kernels::DeltaRuleParams& p,
                        kernels::Matrix out) override {
    inner_.gated_delta_rule(q, k, v, alpha, beta, state, b, p, out);
  }
  bool supports_latent_kv(int32_t k, int32_t v) const override {
    return inner_.supports_latent_kv(k, v);
  }

  void get_rows(const kernels::Weight& t, kernels::IndexMatrix ids, kernels::Matrix out) override {
    inner_.get_rows(t, ids, out);
  }
  void gather_rows(kernels::Matrix src, kernels::IndexMatrix rows, kernels::Matrix out) override {
    inner_.gather_rows(src, rows, out);
  }
  void copy_matrix(kernels::Matrix src, kernels::Matrix out) override { inner_.copy_matrix(src, out); }
  void matmul(const kernels::Weight& w, kernels::Matrix x, kernels::Matrix y) override;
  void matmul_experts(const kernels::Weight& w, kernels::Matrix x, kernels::IndexMatrix ids,
                      kernels::Matrix y) override;
  void add_bias(kernels::Matrix x, const kernels::Weight& b, kernels::Matrix out) override {
    inner_.add_bias(x, b, out);
  }
  void add_expert_bias(kernels::Matrix y, const kernels::Weight& b, kernels::IndexMatrix ids) override {
    inner_.add_expert_bias(y, b, ids);
  }
  void rms_norm(kernels::Matrix x, const kernels::Weight& w, float eps, kernels::Matrix out) override {
    inner_.rms_norm(x, w, eps, out);
  }
  void add(kernels::Matrix a, kernels::Matrix b, kernels::Matrix out) override { inner_.add(a, b, out); }
  void mul(kernels::Matrix a, kernels::Matrix b, kernels::Matrix out) override { inner_.mul(a, b, out); }
  void swiglu(kernels::Matrix g, kernels::Matrix u, kernels::Matrix out) override {
    inner_.swiglu(g, u, out);
  }
  void sigmoid(kernels::Matrix x, kernels::Matrix out) override { inner_.sigmoid(x, out); }
  void swiglu_clamped(kernels::Matrix g, kernels::Matrix u, float alpha, float limit,
                      kernels::Matrix out) override {
    inner_.swiglu_clamped(g, u, alpha, limit, out);
  }
  void scale(kernels::Matrix x, float s, kernels::Matrix out) override { inner_.scale(x, s, out); }
  void geglu(kernels::Matrix g, kernels::Matrix u, kernels::Matrix out) override {
    inner_.geglu(g, u, out);
  }
  void softcap(kernels::Matrix x, float cap, kernels::Matrix out) override {
    inner_.softcap(x, cap, out);
  }
  void scale_by_position(kernels::Matrix x, kernels::IndexMatrix pos, float beta, int32_t length,
                         int32_t offset, kernels::Matrix out) override {
    inner_.scale_by_position(x, pos, beta, length, offset, out);
  }
  void rope(kernels::Matrix x, int32_t n_heads, int32_t head_dim, kernels::IndexMatrix positions,
            const kernels::RopeParams& p) override {
    inner_.rope(x, n_heads, head_dim, positions, p);
  }
  void kv_write(const kernels::KvLayer& kv, kernels::Matrix k, kernels::Matrix v,
                kernels::IndexMatrix slots) override {
    inner_.kv_write(kv, k, v, slots);
  }
  void attention(kernels::Matrix q, const kernels::KvLayer& kv, const kernels::AttentionBatch& b,
                 int32_t n_heads, const kernels::AttentionParams& p, kernels::Matrix out) override {
    inner_.attention(q, kv, b, n_heads, p, out);
  }
  void route_experts(kernels::Matrix logits, const kernels::RoutingParams& p,
                     kernels::IndexMatrix ids, kernels::Matrix weights) override {
    inner_.route_experts(logits, p, ids, weights);
  }
  void weighted_sum_slots(kernels::Matrix rows, kernels::Matrix weights, kernels::Matrix out) override {
    inner_.weighted_sum_slots(rows, weights, out);
  }

 private:
  bool wanted(const kernels::Weight& w) const;

  kernels::Backend& inner_;
  quantize::Imatrix& out_;
  bool record_output_;
  bool recording_ = true;
};

}  // namespace cadenza::eval
