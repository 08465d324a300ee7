#include "quantize/quantize.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "quantize/imatrix.h"
#include "tensor/quant.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace cadenza::quantize {
namespace {

// Rows per task: about 1 MiB of f32 input, at least one row.
int64_t rows_per_task(int64_t row) { return std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(row, 1)); }

// The first error any thread met (tensor fills cannot return one).
struct FirstError {
  std::mutex mu;
  std::string message;
  void set(std::string m) {
    std::lock_guard lock(mu);
    if (message.empty()) message = std::move(m);
  }
  bool any() {
    std::lock_guard lock(mu);
    return !message.empty();
  }
};

// Converts `t`'s rows into `out` (row_bytes(to, row) per row) on the pool. importance: empty, or
// one vector per matrix of t (row r belongs to matrix r / shape[1]), each empty (that matrix is
// encoded plainly) or of the row length, for the scaled values when `scale` is given. scale:
// null, or the AWQ factors applied to each decoded row before it is encoded (quantize/awq.h).
void convert(ThreadPool& pool, const gguf::TensorInfo& t, DType to, std::span<uint8_t> out,
             const std::vector<std::vector<float>>& importance, const TensorScale* scale,
             FirstError& error) {
  const int64_t row = t.shape[0], rows = t.rows();
  const int64_t rows_per_matrix = t.shape.size() > 1 ? t.shape[1] : 1;
  const size_t in_row = static_cast<size_t>(*row_bytes(t.type, row));
  const size_t out_row = static_cast<size_t>(*row_bytes(to, row));
  const int64_t per_task = rows_per_task(row);
  const int64_t tasks = (rows + per_task - 1) / per_task;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  pool.parallel_for(tasks, [&](int64_t task, int thread) {
    std::vector<float>& f = scratch[static_cast<size_t>(thread)];
    f.resize(static_cast<size_t>(row));
    const int64_t r1 = std::min(rows, (task + 1) * per_task);
    for (int64_t r = task * per_task; r < r1; ++r) {
      dequantize_row(t.type, t.data + in_row * static_cast<size_t>(r), f.data(), row);
      for (int64_t i = 0; i < row; ++i) {
        if (!std::isfinite(f[static_cast<size_t>(i)])) {
          error.set(fmt::format("tensor '{}' has a non-finite value ({}) in row {} at column {}",
                                t.name, f[static_cast<size_t>(i)], r, i));
          return;
        }
      }
      if (scale) scale_row(*scale, r, f.data(), row);
      uint8_t* dst = out.data() + out_row * static_cast<size_t>(r);
      const std::vector<float>* imp =
          importance.empty() ? nullptr : &importance[static_cast<size_t>(r / rows_per_matrix)];
      if (imp && !imp->empty()) {
        quantize_row_weighted(to, f.data(), dst, row, imp->data());
      } else {
        quantize_row(to, f.data(), dst, row);
      }
    }
  });
}

}  // namespace

Result<Summary> quantize_model(const Options& o) {
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<gguf::GgufFile>> opened = gguf::GgufFile::open(o.input);
  if (!opened) return opened.error_value();
  std::shared_ptr<const gguf::GgufFile> in(std::move(*opened));
  if (std::filesystem::exists(o.output) && std::filesystem::equivalent(o.input, o.output))
    return make_error("{}: the output would overwrite the input", o.output);

  ModelFacts facts;
  facts.has_output = in->find_tensor("output.weight") != nullptr;
  if (Result<std::string> arch = in->get_string("general.architecture"); arch) {
    if (const gguf::Value* n = in->find(*arch + ".block_count")) facts.n_layers = n->as_int().value_or(0);
  }

  if (o.awq.enabled && o.imatrix.empty())
    return make_error("--awq needs --imatrix: the scales come from the activation statistics");
  std::optional<Imatrix> imatrix;
  if (!o.imatrix.empty()) {
    Result<Imatrix> read = read_imatrix(o.imatrix);
    if (!read) return read.error_value();
    imatrix = std::move(*read);
  }

  gguf::GgufWriter writer;
  for (const auto& [key, value] : in->metadata()) writer.set(key, value);
  writer.set("general.file_type", gguf::Value::u32(o.target.file_type));
  writer.set("general.quantization_version", gguf::Value::u32(2));
  if (imatrix) {
    writer.set("quantize.imatrix.file", gguf::Value::string(o.imatrix));
    if (!imatrix->datasets.empty())
      writer.set("quantize.imatrix.dataset", gguf::Value::string(imatrix->datasets.front()));
    writer.set("quantize.imatrix.entries_count",
               gguf::Value::i32(static_cast<int32_t>(imatrix->entries.size())));
    writer.set("quantize.imatrix.chunks_count", gguf::Value::i32(static_cast<int32_t>(imatrix->chunk_count)));
  }

  Summary summary;
  std::map<std::pair<DType, DType>, std::pair<int, std::string>> fallbacks;  // (wanted, used) -> count, first
  uint64_t total_in = 0;
  int matched = 0;  // matrices the imatrix holds (weighted or not: an f16 target weighs none)
  int missing = 0;  // quantized tensors the imatrix lacks
  std::string first_missing;
  for (const gguf::TensorInfo& t : in->tensors()) total_in += t.nbytes;
  for (const gguf::TensorInfo& t : in->tensors()) {
    const std::optional<DTypeTraits> tr = dtype_traits(static_cast<uint32_t>(t.type));
    if (!tr || !tr->compute_supported)
      return make_error("{}: tensor '{}' has type {}, which cannot be decoded", in->name(), t.name,
                        tr ? tr->name : "unknown");
    const Choice c = choose(o.target, o.overrides, facts, t.name, t.shape, t.type);
    TensorReport r{t.name, t.type, c.type, c.fallback, c.wanted, t.nbytes, 0};
    r.bytes_out = *row_bytes(c.type, t.shape[0]) * static_cast<uint64_t>(t.rows());
    if (c.quantized && is_block_quantized(t.type) && t.type != c.type) ++summary.requantized;
    if (c.fallback) {
      auto& [count, first] = fallbacks[{c.wanted, c.type}];
      if (count++ == 0) first = t.name;
    }
    if (imatrix && c.quantized) {
      const bool weighs = c.type != t.type && has_weighted_quantizer(c.type);
      const auto it = imatrix->entries.find(t.name);
      if (it == imatrix->entries.end()) {
        if (weighs && missing++ == 0) first_missing = t.name;
      } else {
        const int64_t matrices = t.shape.size() > 2 ? t.shape[2] : 1;
        if (it->second.cols != t.shape[0] || it->second.matrices != matrices) {
          return make_error("{}: tensor '{}' has {} columns x {} matrices there but {} x {} in {}: "
                            "the imatrix was made for another model", o.imatrix, t.name,
                            it->second.cols, it->second.matrices, t.shape[0], matrices, in->name());
        }
        ++matched;
        if (weighs) {
          r.weighted = true;
          ++summary.weighted;
        }
      }
    }
    summary.bytes_in += r.bytes_in;
    summary.bytes_out += r.bytes_out;
    summary.n_elements += t.num_elements();
    summary.tensors.push_back(r);
  }
  for (const auto& [types, seen] : fallbacks) {
    spdlog::warn("quantize: {} tensors (the first: '{}') have rows that {} blocks of {} do not "
                 "divide: they are {}", seen.first, seen.second, dtype_name(types.first),
                 traits(types.first).block_size, dtype_name(types.second));
  }
  if (imatrix && matched == 0) {
    return make_error("{}: none of the quantized tensors of {} is in it: the imatrix was made for "
                      "another model", o.imatrix, in->name());
  }
  if (missing > 0) {
    spdlog::warn("quantize: {} quantized tensors (the first: '{}') are not in the imatrix: they "
                 "are encoded without it", missing, first_missing);
  }
  if (summary.requantized > 0) {
    spdlog::warn("quantize: {} tensors are decoded from a quantized type and quantized again: the "
                 "result loses more than quantizing the original floats", summary.requantized);
  }

  if (o.awq.enabled) {
    const Result<std::string> arch = in->get_string("general.architecture");
    if (!arch || !awq_supports(*arch)) {
      return make_error("--awq: the fold points of architecture '{}' are not known (supported: "
                        "llama, qwen2, qwen3); quantize without --awq", arch ? *arch : "(none)");
    }
  }
  if (o.plan_only) {
    summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return summary;
  }
  ThreadPool pool(std::max(1, o.threads));
  AwqPlan awq;
  if (o.awq.enabled) {
    std::map<std::string, DType> type_of;
    for (const TensorReport& r : summary.tensors) type_of[r.name] = r.to;
    Result<AwqPlan> planned = plan_awq(*in, *imatrix, o.awq, type_of, pool);
    if (!planned) return planned.error_value();
    awq = std::move(*planned);
    summary.awq_groups = awq.groups;
    summary.awq_skipped = awq.skipped;
    int scaled = 0;
    for (const AwqGroup& g : awq.groups) scaled += g.alpha > 0 ? 1 : 0;
    writer.set("quantize.awq.groups", gguf::Value::i32(scaled));
    if (!awq.skipped.empty()) {
      spdlog::warn("quantize: --awq left {} fold points unscaled (the first: {})", awq.skipped.size(),
                   awq.skipped.front());
    }
  }
  FirstError error;
  uint64_t done = 0;
  for (size_t i = 0; i < in->tensors().size(); ++i) {
    const gguf::TensorInfo& t = in->tensors()[i];
    const DType to = summary.tensors[i].to;
    const bool weighted = summary.tensors[i].weighted;
    const auto scaled = awq.tensors.find(t.name);
    const TensorScale* scale = scaled == awq.tensors.end() ? nullptr : &scaled->second;
    auto fill = [&, i, to, weighted, scale](std::span<uint8_t> out) {
      const gguf::TensorInfo& src = in->tensors()[i];
      if (!error.any()) {
        if (src.type == to && !scale) {
          std::memcpy(out.data(), src.data, out.size());
        } else {
          std::vector<std::vector<float>> importance;
          if (weighted) {
            const int64_t matrices = src.shape.size() > 2 ? src.shape[2] : 1;
            importance.resize(static_cast<size_t>(matrices));
            for (int64_t m = 0; m < matrices; ++m) {
              // An expert that saw no calibration token keeps an empty vector: encoded plainly.
              imatrix->importance(src.name, m, importance[static_cast<size_t>(m)]);
              if (scale) scale_importance(*scale, importance[static_cast<size_t>(m)]);
            }
          }
          convert(pool, src, to, out, importance, scale, error);
        }
      }
      // Read once: the input's pages of this tensor need not stay resident.
      if (in->mapped() && src.nbytes > 0) MappedFile::release_pages(src.data, src.nbytes);
      done += src.nbytes;
      if (o.progress) o.progress(done, total_in);
    };
    if (Status st = writer.add_tensor(t.name, to, t.shape, fill); !st) return st.error_value();
  }
  if (Status st = writer.write(o.output); !st) return st.error_value();
  if (error.any()) {
    std::error_code ignored;
    std::filesystem::remove(o.output, ignored);
    return make_error("{}: {}", in->name(), error.message);
  }
  std::error_code ec;
  summary.file_bytes = std::filesystem::file_size(o.output, ec);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace cadenza::quantize
