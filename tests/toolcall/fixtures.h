// The fixture files of tests/toolcall/fixtures/<format name>/<case>.json:
//   {"text": model output, "options": {"reasoning": "think", "starts_in_reasoning": true}?,
//    "expected": {"content", "reasoning_content", "tool_calls": [{"name", "arguments": {..}, "id"?}]}}
// The folder name is the --tool-call-parser name of the format.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall::test {

struct Fixture {
  std::string family, name;
  ToolCallFormat format = ToolCallFormat::kNone;
  ParseOptions options;
  std::string text;
  nlohmann::json expected;
};

// gtest prints a parameter with this (instead of its bytes).
inline void PrintTo(const Fixture& f, std::ostream* os) { *os << f.family << "/" << f.name; }

inline std::vector<Fixture> load_fixtures() {
  std::vector<Fixture> out;
  const std::filesystem::path root = CADENZA_TOOLCALL_FIXTURES;
  for (const auto& dir : std::filesystem::directory_iterator(root)) {
    if (!dir.is_directory()) continue;
    for (const auto& file : std::filesystem::directory_iterator(dir.path())) {
      if (file.path().extension() != ".json") continue;
      std::ifstream in(file.path());
      std::stringstream ss;
      ss << in.rdbuf();
      auto j = nlohmann::json::parse(ss.str());
      Fixture f;
      f.family = dir.path().filename().string();
      f.name = file.path().stem().string();
      f.format = parse_tool_call_format(f.family).value();
      f.text = j.at("text").get<std::string>();
      if (j.contains("options")) {
        const auto& o = j["options"];
        if (o.contains("reasoning")) f.options.reasoning = parse_reasoning_format(o["reasoning"].get<std::string>()).value();
        f.options.starts_in_reasoning = o.value("starts_in_reasoning", false);
      }
      f.options.id_seed = 1234;
      f.expected = j.at("expected");
      out.push_back(std::move(f));
    }
  }
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) {
    return a.family + "/" + a.name < b.family + "/" + b.name;
  });
  return out;
}

inline std::string fixture_name(const testing::TestParamInfo<Fixture>& info) {
  return info.param.family + "_" + info.param.name;
}

// `actual` against the fixture's expectation; arguments compare as JSON values and must parse.
inline void expect_matches(const ParsedOutput& actual, const nlohmann::json& expected) {
  EXPECT_EQ(actual.content, expected.at("content").get<std::string>());
  EXPECT_EQ(actual.reasoning_content, expected.at("reasoning_content").get<std::string>());
  const auto& calls = expected.at("tool_calls");
  ASSERT_EQ(actual.tool_calls.size(), calls.size());
  std::set<std::string> ids;
  for (size_t i = 0; i < calls.size(); ++i) {
    const ToolCall& c = actual.tool_calls[i];
    EXPECT_EQ(c.name, calls[i].at("name").get<std::string>());
    auto args = nlohmann::json::parse(c.arguments, nullptr, false);
    ASSERT_FALSE(args.is_discarded()) << c.arguments;
    EXPECT_TRUE(args.is_object());
    EXPECT_EQ(args, calls[i].at("arguments")) << c.arguments;
    if (calls[i].contains("id")) {
      EXPECT_EQ(c.id, calls[i]["id"].get<std::string>());
    }
    EXPECT_FALSE(c.id.empty());
    EXPECT_TRUE(ids.insert(c.id).second) << "duplicate id " << c.id;
  }
}

}  // namespace cadenza::toolcall::test
