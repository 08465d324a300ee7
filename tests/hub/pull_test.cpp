// `cadenza pull` (src/hub) against a local server that answers like the Hugging Face hub
// (hub_server.h): download with the hub's redirect and X-Linked-Etag, resume after a dropped
// connection, a server that ignores ranges, checksum mismatches, 401 with and without a token
// (and no token sent to other hosts), 404, an unreachable server, a file that is not GGUF, and the
// source parser. Never touches the network beyond 127.0.0.1.
#include "hub/pull.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "hub/sha256.h"
#include "hub/source.h"
#include "hub_server.h"
#include "synth/synth.h"
#include "test_models.h"

// ServedFile{.body = ..., .etag = ...}: the fields left out keep their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace cadenza::hub {
namespace {

namespace fs = std::filesystem;
using testing::HubServer;
using testing::ServedFile;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("pull-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A small valid GGUF model (the tiny test model), its bytes and SHA-256.
struct Model {
  std::string bytes;
  std::string sha;
};

const Model& model() {
  static const Model m = [] {
    TempDir d;
    const fs::path p = d.path / "m.gguf";
    auto w = synth::write_synthetic_model(test::tiny_model_options(3), p.string());
    EXPECT_TRUE(w.ok()) << w.error();
    Model m;
    m.bytes = read_file(p);
    auto sha = sha256_file(p.string());
    EXPECT_TRUE(sha.ok());
    m.sha = sha.ok() ? *sha : "";
    return m;
  }();
  return m;
}

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Tests talk to 127.0.0.1 only: no proxy from the environment may intercept them.
    for (const char* v :
         {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
      ::unsetenv(v);
    ASSERT_GT(model().bytes.size(), 1000u);
  }
  PullOptions options(const std::string& source) {
    PullOptions o;
    o.source = source;
    o.output_dir = dir_.path.string();
    o.endpoint = server_.endpoint();
    o.connect_timeout_s = 5;
    o.stall_timeout_s = 10;
    return o;
  }
  fs::path local(const std::string& name) { return dir_.path / name; }

  HubServer server_;
  TempDir dir_;
};

TEST_F(PullTest, DownloadsThroughTheHubRedirectAndVerifiesTheLinkedEtag) {
  server_.add(
      "/org/repo/resolve/main/model.gguf",
      ServedFile{.body = model().bytes, .etag = "cdn-etag-not-a-sha", .linked_etag = model().sha});
  int progress_calls = 0;
  int64_t last_done = -1, total = 0;
  PullOptions o = options("hf://org/repo/model.gguf");
  o.on_progress = [&](const DownloadProgress& p) {
    ++progress_calls;
    EXPECT_GE(p.done, last_done);
    last_done = p.done;
    total = p.total;
  };
  auto r = pull(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->path, local("model.gguf").string());
  EXPECT_TRUE(r->downloaded);
  EXPECT_EQ(r->resumed_from, 0);
  EXPECT_EQ(r->sha256, model().sha);
  EXPECT_EQ(read_file(r->path), model().bytes);
  EXPECT_FALSE(fs::exists(local("model.gguf.partial")));
  EXPECT_FALSE(fs::exists(local("model.gguf.lock")));
  EXPECT_GE(progress_calls, 1);
  EXPECT_EQ(last_done, static_cast<int64_t>(model().bytes.size()));
  EXPECT_EQ(total, static_cast<int64_t>(model().bytes.size()));

  // Again: the file is there, nothing is fetched.
  const size_t requests = server_.ranges().size();
  auto again = pull(o);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_FALSE(again->downloaded);
  EXPECT_EQ(server_.ranges().size(), requests);
}

TEST_F(PullTest, ResumesAfterTheConnectionDropsHalfWay) {
  server_.add("/org/repo/resolve/main/model.gguf",
              ServedFile{.body = model().bytes, .etag = model().sha, .drop_first = 1});
  PullOptions o = options("hf://org/repo/model.gguf");
  auto first = pull(o);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.error().find("interrupted"), std::string::npos) << first.error();
  EXPECT_NE(first.error().find("resume"), std::string::npos) << first.error();
  const fs::path partial = local("model.gguf.partial");
  ASSERT_TRUE(fs::exists(partial));
  const auto have = static_cast<int64_t>(fs::file_size(partial));
  EXPECT_GT(have, 0);
  EXPECT_LT(have, static_cast<int64_t>(model().bytes.size()));
  EXPECT_FALSE(fs::exists(local("model.gguf")));

  auto second = pull(o);
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_EQ(second->resumed_from, have);
  EXPECT_EQ(second->sha256, model().sha);
  EXPECT_EQ(read_file(second->path), model().bytes);
  const auto ranges = server_.ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=" + std::to_string(have) + "-");
}

TEST_F(PullTest, ServerIgnoringTheRangeRestartsFromZero) {
  server_.add(
      "/org/repo/resolve/main/model.gguf",
      ServedFile{
          .body = model().bytes, .etag = model().sha, .drop_first = 1, .ignore_range = true});
  PullOptions o = options("hf://org/repo/model.gguf");
  ASSERT_FALSE(pull(o).ok());
  auto r = pull(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->resumed_from, 0);
  EXPECT_EQ(read_file(r->path), model().bytes);
}

TEST_F(PullTest, CompletePartialFileIsFinishedWithout416Error) {
  // An earlier pull got every byte but stopped before the checks: the server answers 416.
  server_.add("/org/repo/resolve/main/model.gguf",
              ServedFile{.body = model().bytes, .etag = model().sha});
  write_file(local("model.gguf.partial"), model().bytes);
  auto r = pull(options("hf://org/repo/model.gguf"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->resumed_from, static_cast<int64_t>(model().bytes.size()));
  EXPECT_EQ(r->sha256, model().sha);
  // A partial file longer than the remote one is thrown away and the file fetched again.
  fs::remove(r->path);
  write_file(local("model.gguf.partial"), model().bytes + "extra bytes");
  r = pull(options("hf://org/repo/model.gguf"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(read_file(r->path), model().bytes);
}

TEST_F(PullTest, ChecksumMismatchIsAnErrorAndDeletesTheDownload) {
  std::string other = model().bytes;
  other[other.size() / 2] ^= 1;
  auto other_sha = [&] {
    write_file(local("tmp"), other);
    return *sha256_file(local("tmp").string());
  }();
  server_.add("/org/repo/resolve/main/model.gguf",
              ServedFile{.body = model().bytes, .linked_etag = other_sha});
  auto r = pull(options("hf://org/repo/model.gguf"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("checksum mismatch"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(other_sha), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(model().sha), std::string::npos) << r.error();
  EXPECT_FALSE(fs::exists(local("model.gguf")));
  EXPECT_FALSE(fs::exists(local("model.gguf.partial")));

  // --sha256 overrides the server's digest: a wrong one fails, the right one passes.
  server_.add("/org/repo/resolve/main/b.gguf", ServedFile{.body = model().bytes});
  PullOptions o = options("hf://org/repo/b.gguf");
  o.sha256 = other_sha;
  r = pull(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("checksum mismatch"), std::string::npos) << r.error();
  o.sha256 = model().sha;
  r = pull(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->sha256, model().sha);
  o.sha256 = "abc";
  r = pull(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("64 hex"), std::string::npos) << r.error();
}

TEST_F(PullTest, NoPublishedChecksumIsReported) {
  server_.add("/org/repo/resolve/main/model.gguf", ServedFile{.body = model().bytes});
  std::vector<std::string> infos;
  PullOptions o = options("hf://org/repo/model.gguf");
  o.on_info = [&](const std::string& s) { infos.push_back(s); };
  auto r = pull(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->sha256.empty());
  bool reported = false;
  for (const auto& s : infos) reported |= s.find("no SHA-256") != std::string::npos;
  EXPECT_TRUE(reported);
}

TEST_F(PullTest, TokenIsRequiredSentAndScopedToTheHub) {
  server_.add("/org/private/resolve/main/model.gguf",
              ServedFile{.body = model().bytes, .etag = model().sha, .token = "secret"});
  PullOptions o = options("hf://org/private/model.gguf");
  auto r = pull(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("HTTP 401"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("HF_TOKEN"), std::string::npos) << r.error();
  EXPECT_FALSE(fs::exists(local("model.gguf.partial")));

  o.token = "wrong";
  r = pull(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("refused"), std::string::npos) << r.error();

  o.token = "secret";
  r = pull(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(server_.authorizations().back(), "Bearer secret");

  // The same file by a URL on another host name than the endpoint: no token is sent.
  fs::remove(r->path);
  PullOptions u = options("http://localhost:" + std::to_string(server_.port()) +
                          "/org/private/resolve/main/model.gguf");
  u.token = "secret";
  r = pull(u);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(server_.authorizations().back(), "");
  // ... but a URL under the endpoint gets it.
  u.source = server_.endpoint() + "/org/private/resolve/main/model.gguf";
  r = pull(u);
  ASSERT_TRUE(r.ok()) << r.error();
}

TEST_F(PullTest, HfTokenAndEndpointComeFromTheEnvironment) {
  ::setenv("HF_TOKEN", "from-env", 1);
  ::setenv("HF_ENDPOINT", "http://mirror.invalid", 1);
  PullOptions o;
  apply_environment(o);
  EXPECT_EQ(o.token, "from-env");
  EXPECT_EQ(o.endpoint, "http://mirror.invalid");
  o.token = "explicit";
  o.endpoint = "http://other.invalid";
  apply_environment(o);
  EXPECT_EQ(o.token, "explicit");
  EXPECT_EQ(o.endpoint, "http://other.invalid");
  ::unsetenv("HF_TOKEN");
  ::unsetenv("HF_ENDPOINT");
}

TEST_F(PullTest, NotFoundIs404WithAHint) {
  auto r = pull(options("hf://org/repo/missing.gguf"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("HTTP 404"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("/org/repo/resolve/main/missing.gguf"), std::string::npos) << r.error();
  EXPECT_FALSE(fs::exists(local("missing.gguf")));
  EXPECT_FALSE(fs::exists(local("missing.gguf.partial")));
}

TEST_F(PullTest, UnreachableServerIsAClearError) {
  uint16_t dead_port;
  {
    HubServer gone;  // a port that was free a moment ago and is closed now
    dead_port = gone.port();
  }
  PullOptions o = options("hf://org/repo/model.gguf");
  o.endpoint = "http://127.0.0.1:" + std::to_string(dead_port);
  auto r = pull(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot download"), std::string::npos) << r.error();
}

TEST_F(PullTest, FileThatIsNotGgufIsRejected) {
  std::string junk(5000, '\0');
  std::mt19937 rng(1);
  for (char& c : junk) c = static_cast<char>(rng());
  server_.add("/org/repo/resolve/main/junk.gguf", ServedFile{.body = junk});
  auto r = pull(options("hf://org/repo/junk.gguf"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not a valid GGUF"), std::string::npos) << r.error();
  EXPECT_FALSE(fs::exists(local("junk.gguf")));
  EXPECT_FALSE(fs::exists(local("junk.gguf.partial")));
}

TEST_F(PullTest, CacheFolderLayout) {
  server_.add("/org/repo/resolve/v2/sub/model.gguf",
              ServedFile{.body = model().bytes, .etag = model().sha});
  ::setenv("CADENZA_CACHE_DIR", (dir_.path / "cache").c_str(), 1);
  PullOptions o = options("hf://org/repo@v2/sub/model.gguf");
  o.output_dir.clear();
  auto r = pull(o);
  ::unsetenv("CADENZA_CACHE_DIR");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->path, (dir_.path / "cache" / "hf" / "org" / "repo" / "v2" / "model.gguf").string());
}

// ModelScope's file list (GET /api/v1/models/ORG/REPO/repo/files?Revision=REV&Recursive=true)
// naming PATH with SHA, next to another file.
std::string modelscope_list(const std::string& path, const std::string& sha) {
  return R"({"Code":200,"Success":true,"Data":{"Files":[)"
         R"({"Name":"README.md","Path":"README.md","Sha256":")" +
         std::string(64, 'f') + R"(","Size":10,"Type":"blob"},)"
         R"({"Name":"x","Path":")" +
         path + R"(","Sha256":")" + sha + R"(","Size":1,"Type":"blob"}]}})";
}

constexpr const char* kMsList = "/api/v1/models/org/repo/repo/files?Revision=master&Recursive=true";

TEST_F(PullTest, ModelScopeDownloadIsVerifiedAgainstTheListedSha256) {
  server_.add("/models/org/repo/resolve/master/sub/model.gguf",
              ServedFile{.body = model().bytes, .etag = "not-a-sha"});
  server_.add(kMsList, ServedFile{.body = modelscope_list("sub/model.gguf", model().sha)});
  auto r = pull(options("ms://org/repo/sub/model.gguf"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->path, local("model.gguf").string());
  EXPECT_EQ(r->sha256, model().sha);
  EXPECT_EQ(read_file(r->path), model().bytes);
}

TEST_F(PullTest, ModelScopeChecksumMismatchDeletesTheDownload) {
  const std::string wrong(64, 'a');
  server_.add("/models/org/repo/resolve/master/model.gguf", ServedFile{.body = model().bytes});
  server_.add(kMsList, ServedFile{.body = modelscope_list("model.gguf", wrong)});
  auto r = pull(options("ms://org/repo/model.gguf"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("checksum mismatch"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(wrong), std::string::npos) << r.error();
  EXPECT_FALSE(fs::exists(local("model.gguf")));
  EXPECT_FALSE(fs::exists(local("model.gguf.partial")));
}

TEST_F(PullTest, ModelScopeWithoutAUsableListGoesOnUnverifiedAndSaysSo) {
  server_.add("/models/org/repo/resolve/master/model.gguf", ServedFile{.body = model().bytes});
  std::vector<std::string> infos;
  PullOptions o = options("ms://org/repo/model.gguf");
  o.on_info = [&](const std::string& s) { infos.push_back(s); };
  // No list at all (404), then a list in another shape, then one that does not name the file.
  for (const std::string& list :
       {std::string(), std::string(R"({"Data":{}})"), modelscope_list("other.gguf", model().sha)}) {
    if (!list.empty()) server_.add(kMsList, ServedFile{.body = list});
    infos.clear();
    o.force = true;
    auto r = pull(o);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_TRUE(r->sha256.empty());
    bool reported = false;
    for (const auto& s : infos) reported |= s.find("not verified") != std::string::npos;
    EXPECT_TRUE(reported) << list;
  }
}

TEST_F(PullTest, ModelScopeTokenAndMessagesNameItsVariable) {
  server_.add("/models/org/private/resolve/master/model.gguf",
              ServedFile{.body = model().bytes, .token = "ms-secret"});
  PullOptions o = options("ms://org/private/model.gguf");
  auto r = pull(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("HTTP 401"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("MODELSCOPE_API_TOKEN"), std::string::npos) << r.error();
  o.token = "ms-secret";
  r = pull(o);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(server_.authorizations().back(), "Bearer ms-secret");
}

TEST_F(PullTest, ModelScopeEnvironmentAndCacheFolder) {
  ::setenv("HF_TOKEN", "hf", 1);
  ::setenv("HF_ENDPOINT", "http://hf.invalid", 1);
  ::setenv("MODELSCOPE_API_TOKEN", "ms", 1);
  ::setenv("MODELSCOPE_DOMAIN", "www.modelscope.cn", 1);
  PullOptions o;
  o.source = "ms://org/repo/m.gguf";
  apply_environment(o);
  EXPECT_EQ(o.token, "ms");
  EXPECT_EQ(o.endpoint, "https://www.modelscope.cn");
  ::setenv("MODELSCOPE_ENDPOINT", "http://ms-mirror.invalid", 1);
  o.endpoint.clear();
  apply_environment(o);
  EXPECT_EQ(o.endpoint, "http://ms-mirror.invalid");
  PullOptions h;
  h.source = "hf://org/repo/m.gguf";
  apply_environment(h);
  EXPECT_EQ(h.token, "hf");
  EXPECT_EQ(h.endpoint, "http://hf.invalid");
  for (const char* v :
       {"HF_TOKEN", "HF_ENDPOINT", "MODELSCOPE_API_TOKEN", "MODELSCOPE_DOMAIN", "MODELSCOPE_ENDPOINT"})
    ::unsetenv(v);

  server_.add("/models/org/repo/resolve/v1.0/model.gguf", ServedFile{.body = model().bytes});
  ::setenv("CADENZA_CACHE_DIR", (dir_.path / "cache").c_str(), 1);
  PullOptions c = options("ms://org/repo@v1.0/model.gguf");
  c.output_dir.clear();
  auto r = pull(c);
  ::unsetenv("CADENZA_CACHE_DIR");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->path, (dir_.path / "cache" / "ms" / "org" / "repo" / "v1.0" / "model.gguf").string());
}

TEST(PullSource, ResolvesHubReferencesAndUrls) {
  auto s =
      resolve_source("hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q8_0.gguf", "");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->url,
            "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/"
            "qwen2.5-0.5b-instruct-q8_0.gguf");
  EXPECT_EQ(s->file_name, "qwen2.5-0.5b-instruct-q8_0.gguf");
  EXPECT_EQ(s->repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF");
  EXPECT_TRUE(s->is_hub);

  s = resolve_source("hf://a/b@abc123/dir/x y.GGUF", "http://mirror:8000/");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->url, "http://mirror:8000/a/b/resolve/abc123/dir/x%20y.GGUF");
  EXPECT_EQ(s->revision, "abc123");

  s = resolve_source("https://example.com/files/m.gguf?download=1", "");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->file_name, "m.gguf");
  EXPECT_FALSE(s->is_hub);
  EXPECT_FALSE(token_allowed(*s, ""));
  EXPECT_TRUE(token_allowed(*s, "https://example.com"));

  for (const char* bad :
       {"hf://org/model.gguf", "hf://org/repo/", "hf://org/repo/../x.gguf", "hf://o rg/repo/x.gguf",
        "hf://org/repo@/x.gguf", "hf://org/repo/x.bin", "ftp://h/x.gguf", "https://host",
        "https://host/", "model.gguf", "https://h/a b.gguf"}) {
    EXPECT_FALSE(resolve_source(bad, "").ok()) << bad;
  }
  EXPECT_FALSE(resolve_source("hf://a/b/c.gguf", "ftp://x").ok());

  s = resolve_source("ms://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q8_0.gguf", "");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->url,
            "https://modelscope.cn/models/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/master/"
            "qwen2.5-0.5b-instruct-q8_0.gguf");
  EXPECT_EQ(s->file_list_url,
            "https://modelscope.cn/api/v1/models/Qwen/Qwen2.5-0.5B-Instruct-GGUF/repo/files?"
            "Revision=master&Recursive=true");
  EXPECT_EQ(s->hub, Hub::kModelScope);
  EXPECT_TRUE(s->is_hub);
  EXPECT_TRUE(token_allowed(*s, ""));
  s = resolve_source("ms://a/b@v2/dir/m.gguf", "http://mirror/");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->url, "http://mirror/models/a/b/resolve/v2/dir/m.gguf");
  EXPECT_EQ(s->path, "dir/m.gguf");
  // A URL on ModelScope is a plain URL: no token unless it is under the endpoint given.
  s = resolve_source("https://modelscope.cn/models/a/b/resolve/master/m.gguf", "");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(token_allowed(*s, ""));
  for (const char* bad : {"ms://org/model.gguf", "ms://org/repo/../x.gguf", "ms://org/repo/x.bin",
                          "ms://org/re po/x.gguf"})
    EXPECT_FALSE(resolve_source(bad, "").ok()) << bad;
  EXPECT_TRUE(is_remote("ms://a/b/c.gguf"));
  EXPECT_TRUE(is_remote("hf://a/b/c.gguf"));
  EXPECT_FALSE(is_remote("/models/c.gguf"));
}

TEST(PullSource, Sha256FromEtags) {
  const std::string h(64, 'a');
  EXPECT_EQ(as_sha256("\"" + h + "\""), h);
  EXPECT_EQ(as_sha256("W/\"" + std::string(64, 'B') + "\""), std::string(64, 'b'));
  EXPECT_EQ(as_sha256("\"" + std::string(63, 'a') + "\""), "");
  EXPECT_EQ(as_sha256(std::string(63, 'a') + "g"), "");
  EXPECT_EQ(as_sha256("\"5d41402abc4b2a76b9719d911017c592\""), "");  // an MD5-style ETag
}

TEST(PullSource, ProgressLine) {
  DownloadProgress p{.done = 3 << 20, .total = 12 << 20, .seconds = 2, .resumed_from = 1 << 20};
  const std::string line = progress_line("m.gguf", p);
  EXPECT_NE(line.find("m.gguf"), std::string::npos) << line;
  EXPECT_NE(line.find("3.0 MiB / 12.0 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("25.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("1.0 MiB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 9s"), std::string::npos) << line;
}

}  // namespace
}  // namespace cadenza::hub
