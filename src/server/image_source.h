// Where the bytes of an image content part come from: a data URL (base64, decoded here) or an
// http(s) URL fetched with libcurl, only from hosts the server allows (--allowed-media-domains;
// none by default), with a time limit and a byte limit. No redirects are followed (a redirect
// could leave the allowed hosts).
// Thread-safety: pure functions, except fetch_image, which blocks its calling thread for at
// most the policy's timeout (call it off the I/O and engine threads).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::server {

struct ImageSourcePolicy {
  size_t max_bytes = 20u << 20;  // encoded image bytes at most, data URLs and fetches alike
  // Hosts remote images may come from: a name matches itself and its subdomains; "*" matches
  // every host. Empty: http(s) image URLs are refused.
  std::vector<std::string> allowed_domains;
  double fetch_timeout_s = 10;  // the whole transfer, connection included
};

// RFC 4648 base64 (padding optional, no whitespace). Errors: a character outside the alphabet,
// a bad length or padding, more than max_bytes decoded.
Result<std::string> base64_decode(std::string_view text, size_t max_bytes);

// Whether `url` is a data URL ("data:" prefix).
bool is_data_url(std::string_view url);

// The data URL's form without decoding it: the media type, ";base64", a payload that is not
// empty nor (by its length) over max_bytes.
Status check_data_url(std::string_view url, size_t max_bytes);

// "data:image/<png|jpeg|jpg|webp|gif>;base64,<payload>" -> the payload's bytes. Errors (for a
// 400): another media type, no ;base64, bad base64, over max_bytes. The bytes are not checked
// against the declared type (the decoder sniffs the magic bytes).
Result<std::string> decode_data_url(std::string_view url, size_t max_bytes);

// Whether the policy lets the server fetch `url`: an http or https URL whose host is allowed.
// The error says why not (for a 400).
Status check_remote_url(std::string_view url, const ImageSourcePolicy& policy);

// GETs `url` (check_remote_url first): the body when the status is 2xx. Errors: the transfer's
// (timeout, refused connection, HTTP >= 300), or a body over max_bytes (stops reading there).
Result<std::string> fetch_image(const std::string& url, const ImageSourcePolicy& policy);

}  // namespace cadenza::server
