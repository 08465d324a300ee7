// libFuzzer target for the GGUF reader. Any input must either parse into a file whose tensors lie
// inside the input, or fail with an error that starts with the file name. Inputs that parse are
// written back with GgufWriter and must parse again to the same metadata and tensor table (a
// differential check of reader against writer).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace {

using cadenza::gguf::GgufFile;
using cadenza::gguf::GgufWriter;

void check(bool ok) {
  if (!ok) std::abort();
}

void round_trip(const GgufFile& f) {
  // Alignments up to 2^31 are valid, but rewriting in memory would hold that much padding.
  if (f.alignment() > 4096) return;
  GgufWriter w;  // general.alignment, if any, comes with the metadata and keeps its place
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  for (const auto& t : f.tensors()) {
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    if (!w.add_tensor(t.name, t.type, t.shape, std::move(bytes))) return;  // e.g. empty name
  }
  const std::vector<uint8_t> out = w.to_bytes();
  if (out.empty()) return;  // the writer refuses e.g. a non-u32 general.alignment
  auto again = GgufFile::parse(out, "rewritten.gguf");
  check(again.ok());
  const GgufFile& g = **again;
  check(g.metadata().size() == f.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    check(g.metadata()[i].first == f.metadata()[i].first);
    // Display, not ==, so that NaN payloads compare equal.
    check(g.metadata()[i].second.to_display(SIZE_MAX) == f.metadata()[i].second.to_display(SIZE_MAX));
  }
  check(g.tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = g.tensors()[i];
    check(a.name == b.name && a.type == b.type && a.shape == b.shape && a.nbytes == b.nbytes);
    check(a.nbytes == 0 || std::memcmp(a.data, b.data, a.nbytes) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz.gguf";
  auto r = GgufFile::parse(std::span<const uint8_t>(data, size), name);
  if (!r) {
    check(r.error().rfind(name + ": ", 0) == 0);
    return 0;
  }
  const GgufFile& f = **r;
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    check(t.offset % f.alignment() == 0);
    if (t.nbytes == 0) continue;
    check(t.data >= data + f.data_offset() && t.data + t.nbytes <= data + size);
    sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];  // ASan checks both ends
  }
  for (const auto& [k, v] : f.metadata()) {
    (void)v.to_display();
    (void)f.get_uint(k);
    (void)f.get_string_array(k);
    (void)f.get_int_array(k);
  }
  round_trip(f);
  return 0;
}
