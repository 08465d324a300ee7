// Result<T>: the return value of every operation that can fail for reasons outside the program's
// control (bad files, bad input, exhausted resources). Exceptions and asserts are for bugs only.
//
// Usage:
//   Result<int> parse(...) { if (bad) return Error("x.gguf: tensor 'a' offset past end"); return 42; }
//   auto r = parse(...); if (!r) { log(r.error()); return r.error_value(); } use(*r);
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace cadenza {

// A failure with a message for humans. The message names what failed (file, key, request) and why.
struct Error {
  std::string message;
  Error() = default;
  explicit Error(std::string msg) : message(std::move(msg)) {}
};

// Builds an Error from a fmt format string.
template <typename... Args>
Error make_error(fmt::format_string<Args...> format, Args&&... args) {
  return Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}   // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const std::string& error() const { assert(!ok()); return std::get<1>(v_).message; }
  const Error& error_value() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { assert(!ok_); return err_.message; }
  const Error& error_value() const { assert(!ok_); return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace cadenza
