// The per-tensor type rules of `cadenza quantize` (quantize/mixture.h) on names and shapes.
#include <gtest/gtest.h>

#include "quantize/mixture.h"

namespace cadenza::quantize {
namespace {

Target target(const char* name) {
  Result<Target> t = parse_target(name);
  EXPECT_TRUE(t) << t.error();
  return *t;
}

DType type_of(const Target& t, const std::string& name, std::vector<int64_t> shape,
              const Overrides& o = {}, ModelFacts facts = {32, true}) {
  return choose(t, o, facts, name, shape, DType::F16).type;
}

TEST(Mixture, TargetsAliasesAndUnknownNames) {
  EXPECT_EQ(target("Q4_K_M").base, DType::Q4_K);
  EXPECT_EQ(target("q4_k").file_type, 15u);  // the reference's alias for q4_k_m
  EXPECT_EQ(target("q8_0").file_type, 7u);
  EXPECT_EQ(target("iq4_xs").base, DType::IQ4_XS);
  Result<Target> bad = parse_target("q4_z");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("q4_z"), std::string::npos);
  EXPECT_NE(bad.error().find("q4_k_m"), std::string::npos) << "the error lists the known names";
}

TEST(Mixture, VectorsAndTheRouterStay) {
  const Target t = target("q4_0");
  const Choice norm = choose(t, {}, {4, true}, "blk.0.attn_norm.weight", {4096}, DType::F32);
  EXPECT_FALSE(norm.quantized);
  EXPECT_EQ(norm.type, DType::F32);
  EXPECT_EQ(type_of(t, "blk.0.ffn_gate_inp.weight", {4096, 64}), DType::F16);
  EXPECT_EQ(type_of(t, "blk.0.ffn_up_exps.weight", {4096, 1024, 64}), DType::Q4_0);
}

TEST(Mixture, Q4_K_MGivesMoreBitsToSomeLayers) {
  const Target t = target("q4_k_m");
  // 32 layers: the first 4, the last 4 and every third in between.
  EXPECT_EQ(type_of(t, "blk.0.attn_v.weight", {4096, 1024}), DType::Q6_K);
  EXPECT_EQ(type_of(t, "blk.4.attn_v.weight", {4096, 1024}), DType::Q4_K);
  EXPECT_EQ(type_of(t, "blk.6.ffn_down.weight", {14336, 4096}), DType::Q6_K);
  EXPECT_EQ(type_of(t, "blk.6.ffn_down_exps.weight", {1024, 4096, 8}), DType::Q6_K);
  EXPECT_EQ(type_of(t, "blk.31.ffn_down.weight", {14336, 4096}), DType::Q6_K);
  EXPECT_EQ(type_of(t, "blk.5.ffn_down.weight", {14336, 4096}), DType::Q4_K);
  EXPECT_EQ(type_of(t, "blk.5.attn_q.weight", {4096, 4096}), DType::Q4_K);
  EXPECT_EQ(type_of(t, "output.weight", {4096, 128256}), DType::Q6_K);
  EXPECT_EQ(type_of(t, "token_embd.weight", {4096, 128256}), DType::Q4_K);
  // Tied: the embedding is the output.
  EXPECT_EQ(type_of(t, "token_embd.weight", {4096, 128256}, {}, {32, false}), DType::Q6_K);
}

TEST(Mixture, Q3_KAndQ2_KRules) {
  EXPECT_EQ(type_of(target("q3_k_m"), "blk.1.attn_v.weight", {4096, 1024}), DType::Q5_K);
  EXPECT_EQ(type_of(target("q3_k_m"), "blk.2.attn_v.weight", {4096, 1024}), DType::Q4_K);
  EXPECT_EQ(type_of(target("q3_k_m"), "blk.1.ffn_down.weight", {14336, 4096}), DType::Q5_K);  // < 32/16
  EXPECT_EQ(type_of(target("q3_k_m"), "blk.9.ffn_down.weight", {14336, 4096}), DType::Q4_K);
  EXPECT_EQ(type_of(target("q3_k_m"), "blk.9.attn_output.weight", {4096, 4096}), DType::Q4_K);
  EXPECT_EQ(type_of(target("q3_k_m"), "blk.9.attn_q.weight", {4096, 4096}), DType::Q3_K);
  EXPECT_EQ(type_of(target("q3_k_l"), "blk.9.attn_output.weight", {4096, 4096}), DType::Q5_K);
  EXPECT_EQ(type_of(target("q2_k"), "blk.9.attn_v.weight", {4096, 1024}), DType::Q3_K);
  EXPECT_EQ(type_of(target("q4_k_s"), "blk.3.attn_v.weight", {4096, 1024}), DType::Q5_K);
  EXPECT_EQ(type_of(target("q4_k_s"), "blk.4.attn_v.weight", {4096, 1024}), DType::Q4_K);
}

TEST(Mixture, RowsThatDoNotFitFallBackAndSaySo) {
  const Choice c = choose(target("q4_k_m"), {}, {4, true}, "blk.1.attn_q.weight", {128, 128}, DType::F16);
  EXPECT_EQ(c.type, DType::Q5_0);
  EXPECT_TRUE(c.fallback);
  EXPECT_EQ(c.wanted, DType::Q4_K);
  EXPECT_EQ(fit_row(DType::Q6_K, 128), DType::Q8_0);
  EXPECT_EQ(fit_row(DType::IQ4_XS, 96), DType::IQ4_NL);
  EXPECT_EQ(fit_row(DType::Q3_K, 64), DType::Q4_0);
  EXPECT_EQ(fit_row(DType::Q8_0, 48), DType::F16);  // not even a multiple of 32
}

TEST(Mixture, OverridesComeFirst) {
  Overrides o;
  Result<Overrides::Pattern> p = parse_tensor_type("attn_(q|k)\\.weight=q8_0");
  ASSERT_TRUE(p) << p.error();
  o.tensor_types.push_back(std::move(*p));
  o.output_type = DType::Q8_0;
  o.token_embedding_type = DType::F16;
  const Target t = target("q4_k_m");
  EXPECT_EQ(type_of(t, "blk.5.attn_q.weight", {4096, 4096}, o), DType::Q8_0);
  EXPECT_EQ(type_of(t, "blk.5.attn_k.weight", {4096, 1024}, o), DType::Q8_0);
  EXPECT_EQ(type_of(t, "blk.5.attn_output.weight", {4096, 4096}, o), DType::Q4_K);
  EXPECT_EQ(type_of(t, "output.weight", {4096, 128256}, o), DType::Q8_0);
  EXPECT_EQ(type_of(t, "token_embd.weight", {4096, 128256}, o), DType::F16);
  Overrides pure;
  pure.pure = true;
  EXPECT_EQ(type_of(t, "blk.0.attn_v.weight", {4096, 1024}, pure), DType::Q4_K);
  EXPECT_EQ(type_of(t, "output.weight", {4096, 128256}, pure), DType::Q4_K);
  EXPECT_FALSE(parse_tensor_type("attn_q"));
  EXPECT_FALSE(parse_tensor_type("attn_q=q9_9"));
  EXPECT_FALSE(parse_tensor_type("attn_(q=q8_0"));  // a bad regular expression
}

}  // namespace
}  // namespace cadenza::quantize
