#include "apishape/sse_reader.h"

#include <gtest/gtest.h>

namespace cadenza::apishape {
namespace {

TEST(SseReader, EventsAcrossAnySplit) {
  const std::string stream =
      ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata:line2\n\nid: 3\n\ndata: [DONE]\n\n";
  for (size_t split = 0; split <= stream.size(); ++split) {
    SseReader r;
    std::vector<std::string> got = r.feed(std::string_view(stream).substr(0, split));
    for (auto& s : r.feed(std::string_view(stream).substr(split))) got.push_back(s);
    ASSERT_EQ(got.size(), 3u) << split;
    EXPECT_EQ(got[0], "{\"a\":1}");
    EXPECT_EQ(got[1], "line1\nline2");
    EXPECT_EQ(got[2], "[DONE]");
  }
}

TEST(SseReader, OversizedEventStops) {
  SseReader r(16);
  EXPECT_TRUE(r.feed("data: 0123456789abcdefghij\n\n").empty());
  EXPECT_TRUE(r.overflowed());
  EXPECT_TRUE(r.feed("data: x\n\n").empty());
}

}  // namespace
}  // namespace cadenza::apishape
