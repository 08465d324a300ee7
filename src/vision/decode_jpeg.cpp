// JPEG via libjpeg-turbo. libjpeg reports errors through a callback that must not return; it
// longjmps back here. Only the C decompressor state lives between setjmp and longjmp, so no C++
// destructor is skipped (the output Image belongs to the caller's frame).
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>

#include "vision/decoders.h"

namespace cadenza::vision::detail {
namespace {

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (level -1) include "premature end of data" and corrupt-entropy-data recoveries, after
// which libjpeg fills the rest with grey: treated as errors. Trace messages (level >= 0) ignored.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_error(cinfo);
}

// Out of line: a function that calls setjmp must hold no locals that live across a longjmp (the
// Status's string would, once inlined into run_decoder; GCC's -Wclobbered says so at -O1).
[[gnu::noinline]] bool dimensions_ok(const jpeg_decompress_struct* cinfo, const DecodeLimits& limits,
                                     Status* limit_status) {
  *limit_status = check_dimensions("JPEG", cinfo->image_width, cinfo->image_height, limits);
  return limit_status->ok();
}

// Returns false with err->message set on failure. `out` is sized here once the header is checked.
bool run_decoder(jpeg_decompress_struct* cinfo, JpegError* err, std::span<const uint8_t> data,
                 const DecodeLimits& limits, Image* out, Status* limit_status) {
  if (setjmp(err->jump)) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(cinfo, TRUE);
  if (!dimensions_ok(cinfo, limits, limit_status)) return true;
  // Progressive files buffer their coefficients: bound the decoder's own memory too.
  cinfo->mem->max_memory_to_use = 512L << 20;
  cinfo->out_color_space = JCS_RGB;
  jpeg_start_decompress(cinfo);
  if (cinfo->output_components != 3) {
    std::snprintf(err->message, sizeof(err->message), "unexpected %d output components",
                  cinfo->output_components);
    return false;
  }
  out->width = static_cast<int>(cinfo->output_width);
  out->height = static_cast<int>(cinfo->output_height);
  out->rgb.resize(static_cast<size_t>(out->width) * out->height * 3);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out->pixel(0, static_cast<int>(cinfo->output_scanline));
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

Result<Image> decode_jpeg(std::span<const uint8_t> data, const DecodeLimits& limits) {
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error;
  err.mgr.emit_message = on_message;
  Image out;
  Status limit_status;
  bool ok = run_decoder(&cinfo, &err, data, limits, &out, &limit_status);
  jpeg_destroy_decompress(&cinfo);
  if (!ok) return make_error("JPEG: corrupt or truncated data: {}", err.message);
  if (!limit_status.ok()) return limit_status.error_value();
  return out;
}

}  // namespace cadenza::vision::detail
