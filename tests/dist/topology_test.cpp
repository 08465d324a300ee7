// The job topology and the shard arithmetic (no MPI): rank placement, layer splits, the errors a
// wrong launch gets, and the head / column / expert ranges every rank loads.
#include <gtest/gtest.h>

#include "dist/expert_placement.h"
#include "dist/topology.h"
#include "model/shard.h"

namespace cadenza::dist {
namespace {

TEST(SplitEvenly, CoversTheRangeWithTheRemainderFirst) {
  // 10 over 4: 3, 3, 2, 2.
  const Range a = split_evenly(10, 4, 0), b = split_evenly(10, 4, 1), c = split_evenly(10, 4, 2),
              d = split_evenly(10, 4, 3);
  EXPECT_EQ(a.begin, 0);
  EXPECT_EQ(a.count, 3);
  EXPECT_EQ(b.begin, 3);
  EXPECT_EQ(b.count, 3);
  EXPECT_EQ(c.begin, 6);
  EXPECT_EQ(c.count, 2);
  EXPECT_EQ(d.begin, 8);
  EXPECT_EQ(d.end(), 10);
  for (int parts = 1; parts <= 9; ++parts) {
    int64_t next = 0;
    for (int i = 0; i < parts; ++i) {
      const Range r = split_evenly(151936, parts, i);
      EXPECT_EQ(r.begin, next);
      next = r.end();
    }
    EXPECT_EQ(next, 151936);
  }
}

TEST(Topology, PlacesTensorParallelRanksNextToEachOther) {
  ParallelConfig pc{.tensor = 2, .pipeline = 2};
  for (int rank = 0; rank < 4; ++rank) {
    auto t = Topology::create(pc, rank, 4, 6);
    ASSERT_TRUE(t) << t.error();
    EXPECT_EQ(t->stage, rank / 2);
    EXPECT_EQ(t->tp_rank, rank % 2);
    EXPECT_EQ(t->layer_begin(), rank < 2 ? 0 : 3);
    EXPECT_EQ(t->layer_end(), rank < 2 ? 3 : 6);
    EXPECT_EQ(t->driver(), rank == 0);
    EXPECT_EQ(t->first_stage(), rank < 2);
    EXPECT_EQ(t->last_stage(), rank >= 2);
  }
  auto t = Topology::create(pc, 3, 4, 6);
  EXPECT_EQ(t->describe(3), "rank 3 (stage 1, tp 1)");
  EXPECT_EQ(t->rank_of(1, 0), 2);
}

TEST(Topology, UnevenLayersGoToTheFirstStagesOrFollowPpLayers) {
  auto even = Topology::create({.tensor = 1, .pipeline = 3}, 0, 3, 7);
  ASSERT_TRUE(even);
  EXPECT_EQ(even->starts, (std::vector<int64_t>{0, 3, 5, 7}));
  auto chosen = Topology::create({.tensor = 1, .pipeline = 3, .stage_layers = {1, 2, 4}}, 2, 3, 7);
  ASSERT_TRUE(chosen) << chosen.error();
  EXPECT_EQ(chosen->layer_begin(), 3);
  EXPECT_EQ(chosen->layer_end(), 7);
}

TEST(Topology, AWrongLaunchIsAClearError) {
  auto size = Topology::create({.tensor = 2, .pipeline = 2}, 0, 2, 8);
  ASSERT_FALSE(size);
  EXPECT_NE(size.error().find("needs 4 processes, but this job has 2"), std::string::npos);
  EXPECT_NE(size.error().find("mpirun -np 4"), std::string::npos);
  auto stages = Topology::create({.tensor = 1, .pipeline = 4}, 0, 4, 2);
  ASSERT_FALSE(stages);
  EXPECT_NE(stages.error().find("more than the model's 2 layers"), std::string::npos);
  auto sum = Topology::create({.tensor = 1, .pipeline = 2, .stage_layers = {3, 3}}, 0, 2, 8);
  ASSERT_FALSE(sum);
  EXPECT_NE(sum.error().find("sums to 6 layers but the model has 8"), std::string::npos);
  auto count = Topology::create({.tensor = 1, .pipeline = 2, .stage_layers = {8}}, 0, 2, 8);
  ASSERT_FALSE(count);
  EXPECT_NE(count.error().find("lists 1 stages"), std::string::npos);
}

TEST(ParallelConfig, ParsesPpLayers) {
  auto ok = ParallelConfig::parse_stage_layers("12,12,8");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, (std::vector<int64_t>{12, 12, 8}));
  for (const char* bad : {"", "12,,8", "a,b", "12,-1", "0,4", "4,"}) {
    EXPECT_FALSE(ParallelConfig::parse_stage_layers(bad)) << bad;
  }
}

TEST(ModelShard, HeadsKvHeadsColumnsAndExperts) {
  model::ModelShard s;
  s.tp_size = 4;
  s.tp_rank = 3;
  EXPECT_EQ(s.query_heads(32).begin, 24);
  EXPECT_EQ(s.query_heads(32).count, 8);
  EXPECT_EQ(s.kv_heads(8).begin, 6);  // 8 KV heads over 4 ranks: two each
  EXPECT_EQ(s.kv_heads(8).count, 2);
  // 2 KV heads over 4 ranks: ranks 2 and 3 use KV head 1 (query heads 16..31 of 32).
  EXPECT_EQ(s.kv_heads(2).begin, 1);
  EXPECT_EQ(s.kv_heads(2).count, 1);
  s.tp_rank = 1;
  EXPECT_EQ(s.kv_heads(2).begin, 0);
  EXPECT_EQ(s.kv_heads(1).begin, 0);
  EXPECT_EQ(s.columns(14336).count, 3584);
  EXPECT_EQ(s.experts(64).count, 64);  // tensor parallel: every expert, a slice of each
  EXPECT_EQ(s.expert_columns(1408).count, 352);
  s.expert_parallel = true;
  EXPECT_EQ(s.experts(64).begin, 16);
  EXPECT_EQ(s.experts(64).count, 16);
  EXPECT_EQ(s.expert_columns(1408).count, 1408);
}

TEST(ExpertPlacement, ParsesRanksAndLayerOverrides) {
  auto p = ExpertPlacement::parse(R"({"ranks": [[0, 2], [1, 3]], "layers": {"1": [[3], [0, 1, 2]]}})",
                                  "p.json");
  ASSERT_TRUE(p) << p.error();
  EXPECT_TRUE(p->check(2, 4, 2));
  EXPECT_EQ(p->held(0, 1), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(p->held(1, 0), (std::vector<int32_t>{3}));
  EXPECT_EQ(p->held(1, 1), (std::vector<int32_t>{0, 1, 2}));
  auto same = ExpertPlacement::parse(R"({"ranks": [[0, 2], [1, 3]], "layers": {"1": [[3], [0, 1, 2]]}})",
                                     "q.json");
  EXPECT_EQ(p->checksum(), same->checksum());
  auto other = ExpertPlacement::parse(R"({"ranks": [[0, 1], [2, 3]]})", "r.json");
  EXPECT_NE(p->checksum(), other->checksum());
}

TEST(ExpertPlacement, BadFilesAndBadPlacementsAreClearErrors) {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not a JSON object"},
           {R"({"layers": {}})", "missing \"ranks\""},
           {R"({"ranks": [[0], ["x"]]})", "is not a non-negative integer"},
           {R"({"ranks": [[0], [1]], "layers": {"a": [[0], [1]]}})", "is not a layer number"},
           {R"({"ranks": [[0], [1]], "extra": 1})", "unknown key \"extra\""},
       }) {
    auto p = ExpertPlacement::parse(text, "p.json");
    ASSERT_FALSE(p) << text;
    EXPECT_NE(p.error().find(message), std::string::npos) << p.error();
  }
  auto check = [](const std::string& text, int ranks, const std::string& message) {
    auto p = ExpertPlacement::parse(text, "p.json");
    ASSERT_TRUE(p) << p.error();
    Status st = p->check(ranks, 4, 2);
    ASSERT_FALSE(st) << text;
    EXPECT_NE(st.error().find(message), std::string::npos) << st.error();
  };
  check(R"({"ranks": [[0, 1, 2, 3]]})", 2, "lists experts for 1 ranks, but the tensor-parallel group has 2");
  check(R"({"ranks": [[0, 1], [1, 2, 3]]})", 2, "expert 1 is placed on rank 0 and rank 1");
  check(R"({"ranks": [[0, 1], [2]]})", 2, "expert 3 is on no rank");
  check(R"({"ranks": [[0, 1], [2, 7]]})", 2, "expert 7 does not exist (the model has 4)");
  check(R"({"ranks": [[0, 1, 2, 3], []]})", 2, "rank 1 holds no expert");
  check(R"({"ranks": [[0, 1], [2, 3]], "layers": {"5": [[0, 1], [2, 3]]}})", 2,
        "layer 5 does not exist");
}

}  // namespace
}  // namespace cadenza::dist
