// `cadenza pull` as a binary, against a local server that answers like the Hugging Face hub
// (tests/hub/hub_server.h; nothing beyond 127.0.0.1): the local path, and only it, on stdout; a
// usable model file; clear errors and a nonzero exit for an unknown file, a malformed reference
// and an unreachable server. The download logic itself is tested in tests/hub.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "cli_process.h"
#include "hub/hub_server.h"
#include "synth/synth.h"
#include "test_models.h"

// ServedFile{.body = ..., .etag = ...}: the fields left out keep their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace cadenza {
namespace {

namespace fs = std::filesystem;
using hub::testing::HubServer;
using hub::testing::ServedFile;
using test::run_cadenza;
using test::shell_quote;

class PullCommandTest : public testing::Test {
 protected:
  void SetUp() override {
    // The server is on 127.0.0.1: no proxy from the environment may intercept the child's calls.
    for (const char* v :
         {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
      ::unsetenv(v);
    const fs::path source = dir_.path() / "source.gguf";
    auto written = synth::write_synthetic_model(test::tiny_model_options(5), source.string());
    ASSERT_TRUE(written.ok()) << written.error();
    bytes_ = test::read_text_file(source);
    server_.add("/org/repo/resolve/main/tiny.gguf", ServedFile{.body = bytes_});
  }
  // `cadenza pull SOURCE` into out/ from the local server.
  test::CliRun pull(const std::string& source, const std::string& extra = "") {
    return run_cadenza("pull " + shell_quote(source) + " --endpoint " + server_.endpoint() +
                       " -o " + shell_quote(out().string()) + " " + extra);
  }
  fs::path out() const { return dir_.path() / "out"; }

  test::TempDir dir_{"cadenza-cli-pull"};
  HubServer server_;
  std::string bytes_;
};

TEST_F(PullCommandTest, PrintsTheLocalPathOnStdoutAndTheFileIsAModel) {
  const test::CliRun r = pull("hf://org/repo/tiny.gguf");
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path expected = out() / "tiny.gguf";
  EXPECT_EQ(r.out, expected.string() + "\n");  // for `cadenza run -m "$(cadenza pull ...)"`
  EXPECT_EQ(test::read_text_file(expected), bytes_);
  EXPECT_NE(r.err.find("tiny.gguf"), std::string::npos) << r.err;  // the report, on stderr
  const test::CliRun info = run_cadenza("info " + shell_quote(expected.string()));
  EXPECT_EQ(info.status, 0) << info.err;
  // Again: already there, nothing downloaded, the same single line.
  const test::CliRun again = pull("hf://org/repo/tiny.gguf", "-q");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.out, expected.string() + "\n");
}

TEST_F(PullCommandTest, UnknownFileIsAClearErrorAndANonzeroExit) {
  const test::CliRun r = pull("hf://org/repo/missing.gguf");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("HTTP 404"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/org/repo/resolve/main/missing.gguf"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out() / "missing.gguf"));
}

TEST_F(PullCommandTest, MalformedSourcesAreClearErrors) {
  const test::CliRun short_ref = pull("hf://org/tiny.gguf");
  EXPECT_EQ(short_ref.status, 1);
  EXPECT_EQ(short_ref.out, "");
  EXPECT_NE(short_ref.err.find("expected hf://ORG/REPO/FILE.gguf"), std::string::npos)
      << short_ref.err;
  const test::CliRun scheme = pull("ftp://example.com/tiny.gguf");
  EXPECT_EQ(scheme.status, 1);
  EXPECT_EQ(scheme.out, "");
  EXPECT_NE(scheme.err.find("cadenza pull: "), std::string::npos) << scheme.err;
  EXPECT_NE(scheme.err.find("ftp://example.com/tiny.gguf"), std::string::npos) << scheme.err;
  const test::CliRun no_source = run_cadenza("pull");
  EXPECT_NE(no_source.status, 0);
}

TEST_F(PullCommandTest, UnreachableServerIsAClearError) {
  uint16_t dead_port;
  {
    HubServer gone;  // a port that was free a moment ago and is closed now
    dead_port = gone.port();
  }
  const test::CliRun r =
      run_cadenza("pull hf://org/repo/tiny.gguf --endpoint http://127.0.0.1:" +
                  std::to_string(dead_port) + " -o " + shell_quote(out().string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("cannot download"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cadenza
