// StopStringFilter: text that could start a stop string is held back, a stop string split over
// any number of pushes is cut and never released, and finish() releases the rest.
#include "engine/stop_strings.h"

#include <random>

#include <gtest/gtest.h>

namespace cadenza::engine {
namespace {

TEST(StopStringFilter, NoStopsReleasesEverything) {
  StopStringFilter f;
  EXPECT_EQ(f.push("abc").text, "abc");
  EXPECT_EQ(f.finish("d").text, "d");
}

TEST(StopStringFilter, HoldsBackPossibleStarts) {
  StopStringFilter f({"END", "\n\n"});
  auto o = f.push("hello E");
  EXPECT_EQ(o.text, "hello ");
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(f.held(), "E");
  o = f.push("N");
  EXPECT_EQ(o.text, "");
  o = f.push("X\n");  // "ENX" cannot be "END"; "\n" might start "\n\n"
  EXPECT_EQ(o.text, "ENX");
  o = f.push("\nmore");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "");
}

TEST(StopStringFilter, CutsAtTheEarliestStop) {
  StopStringFilter f({"cd", "bcd-long"});
  auto o = f.push("abcdef");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "ab");
}

TEST(StopStringFilter, FinishReleasesHeldText) {
  StopStringFilter f({"STOP"});
  EXPECT_EQ(f.push("abcST").text, "abc");
  auto o = f.finish("O");
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(o.text, "STO");
  StopStringFilter g({"STOP"});
  EXPECT_EQ(g.push("xST").text, "x");
  o = g.finish("OPy");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "");
}

// Random texts cut at random places: the released text is always the text before the first
// stop string (or all of it), whatever the cuts.
TEST(StopStringFilter, RandomSplitsNeverLeak) {
  std::mt19937 rng(7);
  const std::vector<std::string> stops = {"aba", "bb", "abcab"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) text.push_back(static_cast<char>('a' + rng() % 3));
    size_t first = std::string::npos;
    for (const auto& s : stops) first = std::min(first, text.find(s));
    const std::string expected = first == std::string::npos ? text : text.substr(0, first);
    StopStringFilter f(stops);
    std::string released;
    bool stopped = false;
    size_t pos = 0;
    while (pos < text.size() && !stopped) {
      const size_t len = std::min(text.size() - pos, size_t{1} + rng() % 4);
      auto o = f.push(std::string_view(text).substr(pos, len));
      released += o.text;
      stopped = o.stopped;
      pos += len;
      ASSERT_EQ(expected.compare(0, released.size(), released), 0) << text;
    }
    if (!stopped) {
      auto o = f.finish();
      released += o.text;
      stopped = o.stopped;
    }
    EXPECT_EQ(released, expected) << text;
    EXPECT_EQ(stopped, first != std::string::npos) << text;
  }
}

}  // namespace
}  // namespace cadenza::engine
