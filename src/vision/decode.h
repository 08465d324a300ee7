// Image decoding: JPEG (libjpeg-turbo), PNG (libpng), WebP (libwebp), GIF (giflib, first frame),
// to 8-bit RGB. The format comes from the data's magic bytes, never from a file name or a MIME
// type a client sent.
//
// Contract: every failure is a returned Error naming the format and the reason: an unknown
// format, dimensions over the limits (checked from the header before allocating), truncated or
// corrupt data (a decoder's warning about premature end of data counts as an error: a partly
// grey picture is not what the user sent). Thread-safe: no shared state; each call owns its
// decoder. Memory: at most the output image plus the decoder's own working state.
#pragma once

#include <cstdint>
#include <span>

#include "util/result.h"
#include "vision/image.h"

namespace cadenza::vision {

// The format named by the first bytes of `data`; kUnknown when none matches.
ImageFormat sniff_image_format(std::span<const uint8_t> data);

// Decodes `data` (one whole file) to RGB8.
Result<Image> decode_image(std::span<const uint8_t> data, const DecodeLimits& limits = {});

// Reads a file and decodes it; the error names the path. Files over 64 MiB are refused unread.
Result<Image> decode_image_file(const char* path, const DecodeLimits& limits = {});

}  // namespace cadenza::vision
