// Every case of ../shared/chat_templates/cases.json: real models' chat templates rendered with a
// conversation; the output must equal what Hugging Face transformers produced, or the render must
// fail with the template's raise_exception message. One test per model template.
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared_data.h"
#include "template/template.h"

namespace cadenza::tmpl {
namespace {

const char* const kTemplates[] = {
    "HuggingFaceTB-SmolLM3-3B.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "Qwen-QwQ-32B.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "Qwen-Qwen3-0.6B.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "google-gemma-2-2b-it.jinja",
    "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "microsoft-Phi-3.5-mini-instruct.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "openai-gpt-oss-120b.jinja",
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::filesystem::path cases_dir() { return cadenza::test::shared_dir() / "chat_templates"; }

nlohmann::ordered_json load_cases() {
  return nlohmann::ordered_json::parse(read_file(cases_dir() / "cases.json"));
}

TEST(ChatTemplateCases, CoverEveryTemplate) {
  CADENZA_REQUIRE_SHARED();
  const auto cases = load_cases();
  ASSERT_TRUE(cases.is_array());
  EXPECT_EQ(cases.size(), 104u);
  const std::set<std::string> known(std::begin(kTemplates), std::end(kTemplates));
  for (const auto& c : cases) EXPECT_TRUE(known.count(c["template"].get<std::string>())) << c["template"];
}

class ModelTemplate : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelTemplate, RendersLikeTransformers) {
  CADENZA_REQUIRE_SHARED();
  const std::string name = GetParam();
  const std::string source = read_file(cases_dir() / name);
  ASSERT_FALSE(source.empty()) << name;
  auto parsed = Template::parse(source);
  ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.error();

  RenderOptions opts;
  opts.strftime_now = fixed_clock(2026, 11, 29);  // the date the expected outputs were made with
  size_t ran = 0;
  for (const auto& c : load_cases()) {
    if (c["template"] != name) continue;
    ++ran;
    const auto out = parsed->render(c["context"], opts);
    const std::string where = name + " / " + c["conversation"].get<std::string>() +
                              " / add_generation_prompt=" +
                              (c["context"].value("add_generation_prompt", false) ? "true" : "false") +
                              "\ncontext: " + c["context"].dump();
    if (c.contains("expected_error")) {
      const std::string want = c["expected_error"].get<std::string>();
      if (!out.ok())
        EXPECT_NE(out.error().find(want), std::string::npos) << where << "\ngot error: " << out.error();
      else
        ADD_FAILURE() << where << "\nexpected error '" << want << "' but rendered:\n" << *out;
      continue;
    }
    ASSERT_TRUE(out.ok()) << where << "\nrender failed: " << out.error();
    EXPECT_EQ(*out, c["expected"].get<std::string>()) << where;
  }
  EXPECT_EQ(ran, 8u) << name;
}

INSTANTIATE_TEST_SUITE_P(SharedCases, ModelTemplate, ::testing::ValuesIn(kTemplates),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n;
                           for (const char* p = info.param; *p && std::string_view(p) != ".jinja"; ++p)
                             n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
                           return n;
                         });

}  // namespace
}  // namespace cadenza::tmpl
