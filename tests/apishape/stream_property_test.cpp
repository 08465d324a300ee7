// Random chunk sequences (well-formed, odd and malformed) through both stream translators: the
// output is always a well-formed event sequence of the API (blocks and items open and close in
// order, sequence numbers count up, one closing event), whatever the upstream sent.
#include <random>

#include <gtest/gtest.h>

#include "apishape/anthropic.h"
#include "apishape/responses.h"
#include "stream_parse.h"

namespace cadenza::apishape {
namespace {

using ojson = nlohmann::ordered_json;
using testing::chunk;
using testing::parse_events;
using testing::usage_chunk;

ojson random_chunk(std::mt19937& rng) {
  switch (rng() % 10) {
    case 0:
    case 1:
    case 2: return chunk({{"content", std::string(1 + rng() % 3, static_cast<char>('a' + rng() % 26))}});
    case 3:
      return chunk({{"tool_calls", ojson::array({{{"index", rng() % 3},
                                                   {"id", "call_" + std::to_string(rng() % 100)},
                                                   {"type", "function"},
                                                   {"function", {{"name", "f"}, {"arguments", ""}}}}})}});
    case 4:
      return chunk({{"tool_calls", ojson::array({{{"index", rng() % 4}, {"function", {{"arguments", "{\"x\":1}"}}}}})}});
    case 5: return chunk({{"content", ""}}, rng() % 2 ? ojson("stop") : ojson("length"));
    case 6: return usage_chunk(static_cast<int>(rng() % 50), static_cast<int>(rng() % 50));
    case 7: return ojson::parse(R"({"choices":"nope"})");
    case 8: return ojson::parse(R"({"choices":[{"index":0,"delta":[1,2]}]})");
    default: return ojson::parse(R"({"choices":[{"index":1,"delta":{"content":"other choice"}}]})");
  }
}

TEST(StreamProperty, MessagesEventsAreWellFormed) {
  std::mt19937 rng(1);
  for (int round = 0; round < 300; ++round) {
    MessagesStream s;
    std::string sse;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) sse += s.on_chunk(random_chunk(rng));
    sse += rng() % 5 == 0 ? s.fail(invalid("boom")) : s.finish();
    const auto ev = parse_events(sse);
    ASSERT_GE(ev.size(), 1u);
    int open = -1, next = 0;
    bool ended = false;
    for (const auto& [name, data] : ev) {
      ASSERT_FALSE(ended) << name << " after the end";
      if (name == "content_block_start") {
        ASSERT_EQ(open, -1);
        ASSERT_EQ(data["index"], next);
        open = next++;
      } else if (name == "content_block_delta") {
        ASSERT_EQ(data["index"], open);
      } else if (name == "content_block_stop") {
        ASSERT_EQ(data["index"], open);
        open = -1;
      } else if (name == "message_stop" || name == "error") {
        ended = true;
      }
    }
    ASSERT_TRUE(ended);
    if (ev.back().first == "message_stop") {
      EXPECT_EQ(open, -1);
      EXPECT_EQ(ev[ev.size() - 2].first, "message_delta");
    }
  }
}

TEST(StreamProperty, ResponsesEventsAreWellFormed) {
  std::mt19937 rng(2);
  for (int round = 0; round < 300; ++round) {
    ResponseInfo info = new_response_info(ojson::object());
    ResponsesStream s(info);
    std::string sse;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) sse += s.on_chunk(random_chunk(rng));
    sse += rng() % 5 == 0 ? s.fail(invalid("boom")) : s.finish();
    const auto ev = parse_events(sse);
    ASSERT_GE(ev.size(), 3u);
    int open = -1, items = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      const auto& [name, data] = ev[i];
      ASSERT_EQ(data["sequence_number"], i);
      if (name == "response.output_item.added") {
        ASSERT_EQ(open, -1);
        ASSERT_EQ(data["output_index"], items);
        open = items++;
      } else if (name == "response.output_item.done") {
        ASSERT_EQ(data["output_index"], open);
        open = -1;
      } else if (name.find("delta") != std::string::npos) {
        ASSERT_EQ(data["output_index"], open);
      }
    }
    const std::string last = ev.back().first;
    ASSERT_TRUE(last == "response.completed" || last == "response.incomplete" || last == "response.failed") << last;
    if (last != "response.failed") {
      EXPECT_EQ(open, -1);
      const ojson& r = ev.back().second["response"];
      EXPECT_GE(r["output"].size(), 1u);
      EXPECT_EQ(r["id"], info.id);
    }
  }
}

}  // namespace
}  // namespace cadenza::apishape
