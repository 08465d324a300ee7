#include "server/image_source.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>

#include <curl/curl.h>
#include <fmt/format.h>

namespace cadenza::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

// The host of an http(s) URL, lower case, through libcurl's own URL parser (the one the fetch
// uses, so the check and the transfer cannot read the URL differently).
Result<std::string> url_host(const std::string& url) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), curl_url_cleanup);
  if (!u) return Error("out of memory");
  if (curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
    return Error("the image URL does not parse");
  char* scheme = nullptr;
  if (curl_url_get(u.get(), CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
    return Error("the image URL has no scheme");
  const std::string s = lower(scheme);
  curl_free(scheme);
  if (s != "http" && s != "https")
    return make_error("image URLs must be data:, http: or https: (got '{}:')", s);
  char* host = nullptr;
  if (curl_url_get(u.get(), CURLUPART_HOST, &host, 0) != CURLUE_OK || host == nullptr)
    return Error("the image URL has no host");
  std::string h = lower(host);
  curl_free(host);
  return h;
}

}  // namespace

Result<std::string> base64_decode(std::string_view text, size_t max_bytes) {
  static const std::array<int8_t, 256> table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  size_t n = text.size();
  size_t pad = 0;
  while (n > 0 && text[n - 1] == '=' && pad < 2) {
    --n;
    ++pad;
  }
  if (pad > 0 && text.size() % 4 != 0) return Error("bad base64 padding");
  if (n % 4 == 1) return Error("bad base64 length");
  const size_t out_size = n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1);
  if (out_size > max_bytes)
    return make_error("the image is {} bytes, over the limit of {}", out_size, max_bytes);
  std::string out;
  out.reserve(out_size);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int8_t v = table[static_cast<unsigned char>(text[i])];
    if (v < 0) return make_error("bad base64 character at offset {}", i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool is_data_url(std::string_view url) { return starts_with_ci(url, "data:"); }

Status check_data_url(std::string_view url, size_t max_bytes) {
  if (!is_data_url(url)) return Error("not a data URL");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return Error("the data URL has no ',' before its data");
  const std::string header = lower(url.substr(5, comma - 5));
  const size_t semi = header.find(';');
  const std::string type = header.substr(0, semi);
  static constexpr std::array<std::string_view, 5> kTypes = {"image/png", "image/jpeg", "image/jpg",
                                                             "image/webp", "image/gif"};
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end())
    return make_error("unsupported image media type '{}' (image/png, image/jpeg, image/webp or "
                      "image/gif)", type);
  if (semi == std::string::npos || header.substr(header.rfind(';') + 1) != "base64")
    return Error("the data URL must be base64 (data:image/...;base64,...)");
  const size_t approx = (url.size() - comma - 1) / 4 * 3;
  if (approx > max_bytes + 2)
    return make_error("the image is about {} bytes, over the limit of {}", approx, max_bytes);
  if (comma + 1 == url.size()) return Error("the data URL holds no data");
  return {};
}

Result<std::string> decode_data_url(std::string_view url, size_t max_bytes) {
  if (Status ok = check_data_url(url, max_bytes); !ok) return ok.error_value();
  auto bytes = base64_decode(url.substr(url.find(',') + 1), max_bytes);
  if (!bytes) return make_error("the data URL's data: {}", bytes.error());
  return bytes;
}

Status check_remote_url(std::string_view url, const ImageSourcePolicy& policy) {
  auto host = url_host(std::string(url));
  if (!host) return host.error_value();
  if (policy.allowed_domains.empty())
    return Error("image URLs are not enabled on this server (send the image as a data URL, or "
                 "start the server with --allowed-media-domains)");
  for (const std::string& d : policy.allowed_domains) {
    const std::string dom = lower(d);
    if (dom == "*" || *host == dom ||
        (host->size() > dom.size() && host->ends_with(dom) &&
         (*host)[host->size() - dom.size() - 1] == '.'))
      return {};
  }
  return make_error("images from host '{}' are not allowed on this server", *host);
}

namespace {

struct Transfer {
  std::string body;
  size_t max_bytes = 0;
  bool too_large = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (t->body.size() + len > t->max_bytes) {
    t->too_large = true;
    return 0;  // aborts the transfer
  }
  t->body.append(data, len);
  return len;
}

}  // namespace

Result<std::string> fetch_image(const std::string& url, const ImageSourcePolicy& policy) {
  if (Status ok = check_remote_url(url, policy); !ok) return ok.error_value();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> c(curl_easy_init(), curl_easy_cleanup);
  if (!c) return Error("fetching the image: libcurl did not start");
  Transfer t;
  t.max_bytes = policy.max_bytes;
  char errbuf[CURL_ERROR_SIZE] = {};
  const auto timeout_ms = static_cast<long>(std::max(1.0, policy.fetch_timeout_s * 1000));
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c.get(), CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.get(), CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c.get(), CURLOPT_USERAGENT, "cadenza-serve");
  curl_easy_setopt(c.get(), CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c.get(), CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(policy.max_bytes));
  const CURLcode rc = curl_easy_perform(c.get());
  if (t.too_large || rc == CURLE_FILESIZE_EXCEEDED)
    return make_error("the image at {} is over the limit of {} bytes", url, policy.max_bytes);
  if (rc != CURLE_OK)
    return make_error("fetching {}: {}", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300)
    return make_error("fetching {}: HTTP status {}", url, status);
  if (t.body.empty()) return make_error("fetching {}: an empty body", url);
  return std::move(t.body);
}

}  // namespace cadenza::server
