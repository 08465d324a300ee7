// Scratch<View>: backend memory for one activation (or index array) of a forward step, shaped and
// reserved once (Model::reserve) for the largest step, then viewed per step without allocating.
// Internal to src/model.
//
//   ScratchMatrix q;                                    // [tokens][H*dk] f32
//   q.reserve(backend, capacity.max_tokens, H * dk);    // at reserve time
//   kernels::Matrix view = q.rows(n);                   // in the pass: the first n rows
//
// Ownership: owns its buffer; must not outlive the backend. Not thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "kernels/backend.h"
#include "util/result.h"

namespace cadenza::model {

template <typename View>  // kernels::Matrix (f32) or kernels::IndexMatrix (int32)
class Scratch {
 public:
  using Element = std::remove_pointer_t<decltype(View::data)>;

  // Makes room for [max_rows][cols]. Keeps the buffer when it is already large enough (the
  // reservation never shrinks); otherwise allocates the new one before freeing the old, so a
  // failure leaves the previous reservation intact. Errors: out of backend memory.
  Status reserve(kernels::Backend& backend, int64_t max_rows, int64_t cols) {
    assert(max_rows >= 0 && cols >= 0);
    const size_t bytes = static_cast<size_t>(max_rows * cols) * sizeof(Element);
    if (!buffer_ || buffer_->size_bytes() < bytes) {
      Result<std::unique_ptr<kernels::Buffer>> b = backend.allocate(std::max<size_t>(bytes, 64));
      if (!b) return b.error_value();
      buffer_ = std::move(*b);
    }
    max_rows_ = max_rows;
    cols_ = cols;
    return {};
  }

  // The first n rows. Requires n <= max_rows() (Model::forward checks every batch against the
  // reservation before the pass).
  View rows(int64_t n) const {
    assert(n >= 0 && n <= max_rows_);
    return View::of(buffer_->data(), n, cols_);
  }
  // The reserved elements seen as [rows][cols] with another column count (per-step widths, such
  // as block tables). Requires rows * cols <= max_rows() * the reserved cols.
  View shaped(int64_t rows, int64_t cols) const {
    assert(rows >= 0 && cols >= 0 && rows * cols <= max_rows_ * cols_);
    return View::of(buffer_->data(), rows, cols);
  }

  int64_t max_rows() const { return max_rows_; }
  kernels::Buffer& buffer() const { return *buffer_; }

 private:
  std::unique_ptr<kernels::Buffer> buffer_;
  int64_t max_rows_ = 0;
  int64_t cols_ = 0;
};

using ScratchMatrix = Scratch<kernels::Matrix>;
using ScratchIndices = Scratch<kernels::IndexMatrix>;

}  // namespace cadenza::model
