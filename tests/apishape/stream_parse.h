// Test helper: splits translator output ("event: NAME\ndata: JSON\n\n"...) into (name, JSON).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace cadenza::apishape::testing {

using Event = std::pair<std::string, nlohmann::ordered_json>;

inline std::vector<Event> parse_events(const std::string& sse) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event in: " << sse.substr(pos);
    if (end == std::string::npos) break;
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_NE(nl, std::string::npos) << block;
    if (nl == std::string::npos) break;
    const std::string name = block.substr(7, nl - 7);
    const std::string data = block.substr(nl + 1);
    EXPECT_EQ(data.rfind("data: ", 0), 0u) << block;
    out.emplace_back(name, nlohmann::ordered_json::parse(data.substr(6)));
  }
  return out;
}

inline std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> n;
  for (const auto& e : events) n.push_back(e.first);
  return n;
}

// A chat.completion.chunk for choice 0.
inline nlohmann::ordered_json chunk(nlohmann::ordered_json delta, nlohmann::ordered_json finish = nullptr) {
  return {{"id", "chatcmpl-1"},
          {"object", "chat.completion.chunk"},
          {"model", "m"},
          {"choices", nlohmann::ordered_json::array(
                          {{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}}})}};
}

inline nlohmann::ordered_json usage_chunk(int prompt, int completion) {
  return {{"id", "chatcmpl-1"},
          {"object", "chat.completion.chunk"},
          {"model", "m"},
          {"choices", nlohmann::ordered_json::array()},
          {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}}};
}

}  // namespace cadenza::apishape::testing
