// `cadenza serve --config FILE`: options from a TOML file, the command line winning, and clear
// errors for unknown names, bad values, missing files and foreign sections. The server never gets
// as far as listening: each case stops at a check that shows which value was used.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "synth/synth.h"
#include "test_models.h"

namespace cadenza {
namespace {

namespace fs = std::filesystem;

struct ServeRun {
  int status = -1;
  std::string log;
};

ServeRun serve(const std::string& config_text, const std::string& extra) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("cadenza-serve-config-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path config = dir / "serve.toml";
  const fs::path log = dir / "log.txt";
  std::ofstream(config) << config_text;
  const std::string cmd =
      fmt::format("'{}' serve --config '{}' {} 2> '{}'", CADENZA_BIN, config.string(), extra,
                  log.string());
  ServeRun r;
  const int status = std::system(cmd.c_str());
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.log = ss.str();
  fs::remove_all(dir);
  return r;
}

TEST(ServeConfig, ValuesComeFromTheFileAndTheCommandLineWins) {
  const std::string file =
      "# comments are fine\n"
      "model = \"/nonexistent/from-config.gguf\"\n"
      "port = 70000\n"
      "kv-cache-type = \"q8\"\n"
      "api-key = [\"k1\", \"k2\"]\n"
      "no-warmup = true\n";
  // The port check runs before the model loads: the file's port was used.
  ServeRun a = serve(file, "");
  EXPECT_EQ(a.status, 1);
  EXPECT_NE(a.log.find("--port must be in 0..65535"), std::string::npos) << a.log;
  // --port on the command line wins; the model path still comes from the file.
  ServeRun b = serve(file, "--port 0");
  EXPECT_EQ(b.status, 1);
  EXPECT_EQ(b.log.find("--port must be"), std::string::npos) << b.log;
  EXPECT_NE(b.log.find("/nonexistent/from-config.gguf"), std::string::npos) << b.log;
  // And -m wins over the file's model.
  ServeRun c = serve(file, "--port 0 -m /nonexistent/from-cli.gguf");
  EXPECT_NE(c.log.find("/nonexistent/from-cli.gguf"), std::string::npos) << c.log;
}

TEST(ServeConfig, BadFilesAreClearErrors) {
  ServeRun unknown = serve("modle = \"x.gguf\"\n", "");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.log.find("'modle' is not an option of 'serve'"), std::string::npos)
      << unknown.log;
  ServeRun bad_value = serve("kv-cache-type = \"q4\"\n", "-m x.gguf");
  EXPECT_EQ(bad_value.status, 1);
  EXPECT_NE(bad_value.log.find("'q4' is not a KV cache type"), std::string::npos) << bad_value.log;
  ServeRun bad_number = serve("port = \"abc\"\n", "-m x.gguf");
  EXPECT_EQ(bad_number.status, 1);
  EXPECT_NE(bad_number.log.find("'port'"), std::string::npos) << bad_number.log;
  ServeRun section = serve("[gateway]\nport = 1\n", "-m x.gguf");
  EXPECT_EQ(section.status, 1);
  EXPECT_NE(section.log.find("section [gateway]"), std::string::npos) << section.log;
  ServeRun no_model = serve("port = 0\n", "");
  EXPECT_EQ(no_model.status, 1);
  EXPECT_NE(no_model.log.find("--model is required"), std::string::npos) << no_model.log;

  const std::string missing = "/nonexistent/serve.toml";
  const std::string cmd = fmt::format("'{}' serve --config {} -m x.gguf 2>&1", CADENZA_BIN, missing);
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(out.find("not readable"), std::string::npos) << out;
}

// The speculative options by their names, --draft-model included: the engine's start-up error
// shows that the file's draft model was the one used, and the command line wins over it.
TEST(ServeConfig, DraftModelOptionComesFromTheFile) {
  const fs::path model = fs::temp_directory_path() / fmt::format("cadenza-serve-draft-{}.gguf", ::getpid());
  auto written = synth::write_synthetic_model(test::tiny_model_options(2), model.string());
  ASSERT_TRUE(written.ok()) << written.error();
  const std::string file = fmt::format(
      "model = \"{}\"\nport = 0\nno-warmup = true\nspeculative-method = \"draft\"\n"
      "num-speculative-tokens = 3\ndraft-model = \"/nonexistent/from-config-draft.gguf\"\n",
      model.string());
  ServeRun a = serve(file, "");
  EXPECT_EQ(a.status, 1);
  EXPECT_NE(a.log.find("engine: speculative: draft model: /nonexistent/from-config-draft.gguf"),
            std::string::npos) << a.log;
  ServeRun b = serve(file, "--draft-model /nonexistent/from-cli-draft.gguf");
  EXPECT_EQ(b.status, 1);
  EXPECT_NE(b.log.find("/nonexistent/from-cli-draft.gguf"), std::string::npos) << b.log;
  ServeRun c = serve("model = \"x.gguf\"\nspeculative-method = \"eagle\"\n", "");
  EXPECT_EQ(c.status, 1);
  EXPECT_NE(c.log.find("expected none, ngram or draft"), std::string::npos) << c.log;
  fs::remove(model);
}

}  // namespace
}  // namespace cadenza
