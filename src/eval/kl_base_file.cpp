#include "eval/kl_base_file.h"

#include <bit>
#include <cassert>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace cadenza::eval {
namespace {

static_assert(std::endian::native == std::endian::little, "the KL base file is little-endian");

constexpr char kMagic[8] = {'C', 'D', 'Z', 'K', 'L', 'B', 0, 0};
constexpr uint64_t kFixedHeaderBytes = 8 + 8 * 4;

template <typename T>
void put(std::vector<char>& buf, T v) {
  const size_t at = buf.size();
  buf.resize(at + sizeof(T));
  std::memcpy(buf.data() + at, &v, sizeof(T));
}
template <typename T>
T get(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

}  // namespace

uint64_t KlBaseHeader::file_bytes() const {
  return kFixedHeaderBytes + 4 * static_cast<uint64_t>(n_chunks) * ctx +
         static_cast<uint64_t>(n_chunks) * n_scored() * record_bytes();
}

Result<std::unique_ptr<KlBaseWriter>> KlBaseWriter::create(const std::string& path,
                                                           const KlBaseHeader& header) {
  assert(header.tokens.size() == static_cast<size_t>(header.n_chunks) * header.ctx);
  assert(header.top_k >= 1 && header.top_k <= header.n_vocab);
  assert(header.first + 1 < header.ctx);
  std::unique_ptr<KlBaseWriter> w(new KlBaseWriter(path, header));
  w->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!w->out_) return make_error("{}: cannot create the KL-divergence base file: {}", path,
                                  std::strerror(errno));
  std::vector<char> buf(kMagic, kMagic + 8);
  put<uint32_t>(buf, header.version);
  put<uint32_t>(buf, header.n_vocab);
  put<uint32_t>(buf, header.ctx);
  put<uint32_t>(buf, header.n_chunks);
  put<uint32_t>(buf, header.first);
  put<uint32_t>(buf, header.top_k);
  put<int32_t>(buf, header.bos_id);
  put<uint32_t>(buf, header.tail_samples);
  for (int32_t t : header.tokens) put<int32_t>(buf, t);
  w->out_.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (!w->out_) return make_error("{}: write failed", path);
  return w;
}

Status KlBaseWriter::append(const KlBaseRecord& record) {
  assert(record.top.size() == header_.top_k);
  assert(record.tail.size() == header_.tail_samples);
  buf_.clear();
  put<float>(buf_, record.target_logprob);
  put<float>(buf_, record.rest_logmass);
  for (const auto* list : {&record.top, &record.tail}) {
    for (const TopEntry& e : *list) {
      put<int32_t>(buf_, e.id);
      put<float>(buf_, e.logprob);
    }
  }
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  if (!out_) return make_error("{}: write failed", path_);
  ++records_;
  return {};
}

Status KlBaseWriter::finish() {
  const uint64_t expected = static_cast<uint64_t>(header_.n_chunks) * header_.n_scored();
  out_.close();
  if (!out_) return make_error("{}: write failed", path_);
  if (records_ != expected) {
    return make_error("{}: {} of {} records written", path_, records_, expected);
  }
  return {};
}

Result<std::unique_ptr<KlBaseReader>> KlBaseReader::open(const std::string& path) {
  std::unique_ptr<KlBaseReader> r(new KlBaseReader(path));
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return make_error("{}: cannot open the KL-divergence base file: {}", path, ec.message());
  r->in_.open(path, std::ios::binary);
  if (!r->in_) return make_error("{}: cannot open the KL-divergence base file", path);
  char fixed[kFixedHeaderBytes];
  if (size < kFixedHeaderBytes || !r->in_.read(fixed, sizeof fixed) ||
      std::memcmp(fixed, kMagic, 8) != 0) {
    return make_error("{}: not a KL-divergence base file (made by `cadenza perplexity "
                      "--kl-divergence-base`)", path);
  }
  const char* p = fixed + 8;
  KlBaseHeader& h = r->header_;
  h.version = get<uint32_t>(p);
  h.n_vocab = get<uint32_t>(p);
  h.ctx = get<uint32_t>(p);
  h.n_chunks = get<uint32_t>(p);
  h.first = get<uint32_t>(p);
  h.top_k = get<uint32_t>(p);
  h.bos_id = get<int32_t>(p);
  h.tail_samples = get<uint32_t>(p);
  if (h.version != 1) {
    return make_error("{}: KL-divergence base file version {}, this build reads version 1", path,
                      h.version);
  }
  if (h.n_vocab == 0 || h.ctx < 2 || h.n_chunks == 0 || h.first + 1 >= h.ctx || h.top_k == 0 ||
      h.top_k > h.n_vocab || h.ctx > (1u << 24) || h.n_chunks > (1u << 24) ||
      h.tail_samples > (1u << 16)) {
    return make_error("{}: damaged KL-divergence base file header (vocab {}, ctx {}, chunks {}, "
                      "first {}, top_k {}, tail samples {})", path, h.n_vocab, h.ctx, h.n_chunks,
                      h.first, h.top_k, h.tail_samples);
  }
  if (size != h.file_bytes()) {
    return make_error("{}: {} bytes, the header says {} (a truncated or damaged file)", path, size,
                      h.file_bytes());
  }
  h.tokens.resize(static_cast<size_t>(h.n_chunks) * h.ctx);
  if (!r->in_.read(reinterpret_cast<char*>(h.tokens.data()),
                   static_cast<std::streamsize>(h.tokens.size() * 4))) {
    return make_error("{}: read failed", path);
  }
  return r;
}

Result<KlBaseRecord> KlBaseReader::next() {
  const KlBaseHeader& h = header_;
  if (records_ >= static_cast<uint64_t>(h.n_chunks) * h.n_scored()) {
    return make_error("{}: read past the last record", path_);
  }
  buf_.resize(h.record_bytes());
  if (!in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()))) {
    return make_error("{}: read failed at record {}", path_, records_);
  }
  const char* p = buf_.data();
  KlBaseRecord rec;
  rec.target_logprob = get<float>(p);
  rec.rest_logmass = get<float>(p);
  rec.top.resize(h.top_k);
  rec.tail.resize(h.tail_samples);
  for (auto* list : {&rec.top, &rec.tail}) {
    for (TopEntry& e : *list) {
      e.id = get<int32_t>(p);
      e.logprob = get<float>(p);
      if (e.id < 0 || static_cast<uint32_t>(e.id) >= h.n_vocab) {
        return make_error("{}: record {} names token {} outside the vocabulary of {} (a damaged "
                          "file)", path_, records_, e.id, h.n_vocab);
      }
    }
  }
  ++records_;
  return rec;
}

}  // namespace cadenza::eval
