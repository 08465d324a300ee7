// GIF via giflib, the first frame only: the record stream is read up to the first image
// descriptor (DGifSlurp would decode every frame, unbounded work for an animation). The frame is
// drawn on a canvas of the logical screen's size, filled with the background colour; transparent
// pixels (the graphics control extension before the frame) leave the canvas colour.
#include <algorithm>
#include <cstring>
#include <memory>

#include <gif_lib.h>

#include "vision/decoders.h"

namespace cadenza::vision::detail {
namespace {

struct MemoryReader {
  std::span<const uint8_t> data;
  size_t pos = 0;
};

int read_memory(GifFileType* gif, GifByteType* buf, int n) {
  auto* r = static_cast<MemoryReader*>(gif->UserData);
  size_t take = std::min(static_cast<size_t>(std::max(n, 0)), r->data.size() - r->pos);
  std::memcpy(buf, r->data.data() + r->pos, take);
  r->pos += take;
  return static_cast<int>(take);
}

struct GifCloser {
  void operator()(GifFileType* g) const {
    int err = 0;
    DGifCloseFile(g, &err);
  }
};

Error gif_error(const char* what, int code) {
  const char* s = GifErrorString(code);
  return make_error("GIF: {}: {}", what, s ? s : "unknown error");
}

}  // namespace

Result<Image> decode_gif(std::span<const uint8_t> data, const DecodeLimits& limits) {
  MemoryReader reader{data};
  int err = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&reader, read_memory, &err));
  if (!gif) return gif_error("corrupt header", err);
  int transparent = -1;  // from the graphics control extension that precedes the frame
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) {
      return gif_error("corrupt or truncated data", gif->Error);
    }
    if (type == TERMINATE_RECORD_TYPE) return Error("GIF: no image frame");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) {
        return gif_error("corrupt extension", gif->Error);
      }
      if (code == GRAPHICS_EXT_FUNC_CODE && ext != nullptr && ext[0] >= 4) {
        GraphicsControlBlock gcb;
        if (DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK) transparent = gcb.TransparentColor;
      }
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) {
          return gif_error("corrupt extension", gif->Error);
        }
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) return gif_error("corrupt frame header", gif->Error);
    const GifImageDesc& desc = gif->Image;
    // A zero logical screen (some encoders write one) means "the frame's own size".
    uint64_t cw = gif->SWidth > 0 ? gif->SWidth : desc.Width;
    uint64_t ch = gif->SHeight > 0 ? gif->SHeight : desc.Height;
    if (Status s = check_dimensions("GIF", cw, ch, limits); !s) return s.error_value();
    if (Status s = check_dimensions("GIF", desc.Width, desc.Height, limits); !s) return s.error_value();
    const ColorMapObject* cmap = desc.ColorMap ? desc.ColorMap : gif->SColorMap;
    if (cmap == nullptr) return Error("GIF: frame has no colour map");
    Image out;
    out.width = static_cast<int>(cw);
    out.height = static_cast<int>(ch);
    out.rgb.assign(cw * ch * 3, 0);
    if (gif->SColorMap != nullptr && gif->SBackGroundColor < gif->SColorMap->ColorCount) {
      const GifColorType& bg = gif->SColorMap->Colors[gif->SBackGroundColor];
      for (size_t i = 0; i < cw * ch; ++i) {
        out.rgb[i * 3] = bg.Red;
        out.rgb[i * 3 + 1] = bg.Green;
        out.rgb[i * 3 + 2] = bg.Blue;
      }
    }
    std::vector<GifPixelType> line(static_cast<size_t>(desc.Width));
    auto draw_row = [&](int row) {
      int y = desc.Top + row;
      if (y < 0 || y >= out.height) return;
      for (int i = 0; i < desc.Width; ++i) {
        int x = desc.Left + i;
        int index = line[static_cast<size_t>(i)];
        if (x < 0 || x >= out.width || index == transparent) continue;
        uint8_t* p = out.pixel(x, y);
        if (index >= cmap->ColorCount) {
          p[0] = p[1] = p[2] = 0;  // an index past the map: black, as browsers draw it
          continue;
        }
        p[0] = cmap->Colors[index].Red;
        p[1] = cmap->Colors[index].Green;
        p[2] = cmap->Colors[index].Blue;
      }
    };
    // Interlaced frames store rows in four passes: every 8th from 0, every 8th from 4, every
    // 4th from 2, every 2nd from 1.
    static constexpr int kStart[4] = {0, 4, 2, 1};
    static constexpr int kStep[4] = {8, 8, 4, 2};
    int passes = desc.Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; ++pass) {
      int start = desc.Interlace ? kStart[pass] : 0;
      int step = desc.Interlace ? kStep[pass] : 1;
      for (int row = start; row < desc.Height; row += step) {
        if (DGifGetLine(gif.get(), line.data(), desc.Width) == GIF_ERROR) {
          return gif_error("corrupt or truncated data", gif->Error);
        }
        draw_row(row);
      }
    }
    return out;
  }
}

}  // namespace cadenza::vision::detail
