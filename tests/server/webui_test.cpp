// The web console as `cadenza serve` answers it (src/webui, docs/webui.md): / is index.html with
// the security headers, the assets with their content types and ETags (304 on If-None-Match),
// unknown files 404, no API key needed for the page (the API keeps its), --no-webui gives 404.
#include <gtest/gtest.h>

#include "running_server.h"
#include "test_client.h"
#include "webui/assets.h"

namespace cadenza::server {
namespace {

using testing::Client;
using testing::Options;

void expect_security_headers(const testing::Response& r) {
  const std::string csp = r.header("content-security-policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(r.header("x-frame-options"), "DENY");
  EXPECT_EQ(r.header("referrer-policy"), "no-referrer");
}

TEST(WebUi, RootServesIndexWithSecurityHeaders) {
  Options o;
  o.keys = {"secret"};  // the page itself needs no key; the API still does
  auto s = testing::start(o);
  ASSERT_NE(s, nullptr);
  Client c(s->port);
  auto r = c.get("/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<div id=\"app\">"), std::string::npos);
  EXPECT_NE(r.body.find("/webui/app.js"), std::string::npos);
  expect_security_headers(r);
  EXPECT_FALSE(r.header("etag").empty());
  EXPECT_EQ(c.get("/v1/models").status, 401);
  // The same file by name.
  auto named = c.get("/webui/index.html");
  EXPECT_EQ(named.status, 200);
  EXPECT_EQ(named.body, r.body);
  // HEAD: the headers without the body.
  auto head = c.request("HEAD", "/");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  // Not GET or HEAD.
  auto post = c.request("POST", "/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("allow"), "GET, HEAD");
}

TEST(WebUi, AssetsHaveTheirContentTypesAndEtags) {
  auto s = testing::start();
  ASSERT_NE(s, nullptr);
  Client c(s->port);
  const std::pair<const char*, const char*> expected[] = {
      {"/webui/app.js", "text/javascript; charset=utf-8"},
      {"/webui/app.css", "text/css; charset=utf-8"},
      {"/webui/icon.svg", "image/svg+xml"}};
  for (const auto& [path, type] : expected) {
    auto r = c.get(path);
    ASSERT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.header("content-type"), type) << path;
    expect_security_headers(r);
    EXPECT_FALSE(r.body.empty());
    const std::string etag = r.header("etag");
    ASSERT_FALSE(etag.empty());
    auto again = c.request("GET", path, "", {{"If-None-Match", etag}});
    EXPECT_EQ(again.status, 304) << path;
    EXPECT_TRUE(again.body.empty());
  }
  // Every embedded file is served, byte for byte.
  ASSERT_FALSE(webui::assets().empty());
  for (const webui::Asset& a : webui::assets()) {
    auto r = c.get("/webui/" + std::string(a.path));
    EXPECT_EQ(r.status, 200) << a.path;
    EXPECT_EQ(r.body, a.body) << a.path;
  }
}

TEST(WebUi, UnknownAssetIs404) {
  auto s = testing::start();
  ASSERT_NE(s, nullptr);
  Client c(s->port);
  for (const char* path : {"/webui/nope.js", "/webui/", "/webui/../index.html", "/webui/dist/app.js"}) {
    auto r = c.get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << path;
  }
  // Other paths keep the API's JSON 404.
  auto api = c.get("/index.html");
  EXPECT_EQ(api.status, 404);
  EXPECT_NE(api.body.find("\"error\""), std::string::npos);
}

TEST(WebUi, NoWebuiGives404) {
  Options o;
  o.webui = false;
  auto s = testing::start(o);
  ASSERT_NE(s, nullptr);
  Client c(s->port);
  for (const char* path : {"/", "/webui/app.js", "/webui/index.html"}) {
    auto r = c.get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(r.header("content-security-policy").empty()) << path;
  }
  EXPECT_EQ(c.get("/health").status, 200);
}

}  // namespace
}  // namespace cadenza::server
