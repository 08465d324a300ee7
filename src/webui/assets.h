// The web console's files (webui/dist), embedded in the binary at build time by embed.cmake.
// Ownership: static storage, never freed. Thread-safety: immutable.
#pragma once

#include <span>
#include <string_view>

namespace cadenza::webui {

struct Asset {
  std::string_view path;          // relative to webui/dist: "index.html", "app.js", ...
  std::string_view content_type;  // the Content-Type to answer with
  std::string_view body;          // the file's bytes
  std::string_view etag;          // quoted, from the file's SHA-256: "\"0123456789abcdef\""
};

// Every embedded file, sorted by path (the generated webui_assets.cpp).
std::span<const Asset> assets();

}  // namespace cadenza::webui
