#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "corun/core/check.h"

namespace corun {

/// @brief An expected failure: a message plus the chain of contexts it travelled through.
/// Errors are values; boundaries (CLI, HTTP) turn them into exit codes or statuses.
class Error {
 public:
  /// Kinds decide the exit code at the CLI boundary (kInvalidInput -> 2). kDamaged: a file
  /// corun wrote (a surrogate model, a dataset, serve's state) cannot be read back: truncated,
  /// altered, or of another schema version (exit code 3, like kIo).
  enum class Kind { kInvalidInput, kNotFound, kIo, kResource, kInternal, kDamaged };

  explicit Error(std::string message, Kind kind = Kind::kInvalidInput)
      : kind_(kind), message_(std::move(message)) {}

  /// @brief Returns a copy with an outer context ("while loading x") prepended to the chain.
  [[nodiscard]] Error wrap(std::string context) const {
    Error e = *this;
    e.contexts_.insert(e.contexts_.begin(), std::move(context));
    return e;
  }

  [[nodiscard]] Kind kind() const { return kind_; }
  /// @brief Returns a copy of another kind, with the same message and chain (a loader that
  /// knows where the bytes came from reclassifies what a parser reported).
  [[nodiscard]] Error as(Kind kind) const {
    Error e = *this;
    e.kind_ = kind;
    return e;
  }
  /// @brief The innermost message, without contexts.
  [[nodiscard]] const std::string& message() const { return message_; }
  [[nodiscard]] const std::vector<std::string>& contexts() const { return contexts_; }

  /// @brief "outer: inner: message".
  [[nodiscard]] std::string what() const {
    std::string out;
    for (const auto& c : contexts_) {
      out += c;
      out += ": ";
    }
    out += message_;
    return out;
  }

 private:
  Kind kind_;
  std::string message_;
  std::vector<std::string> contexts_;
};

/// @brief Either a value or an Error. g++ 12 has no std::expected; this is the small subset
/// corun needs. Accessing the wrong alternative is an invariant failure (CORUN_CHECK).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}    // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    CORUN_CHECK_MSG(ok(), std::get<1>(v_).what().c_str());
    return std::get<0>(v_);
  }
  const T& value() const& {
    CORUN_CHECK_MSG(ok(), std::get<1>(v_).what().c_str());
    return std::get<0>(v_);
  }
  T&& value() && {
    CORUN_CHECK_MSG(ok(), std::get<1>(v_).what().c_str());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  [[nodiscard]] const Error& error() const {
    CORUN_CHECK(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

/// @brief Result of an operation with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  [[nodiscard]] bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  [[nodiscard]] const Error& error() const {
    CORUN_CHECK(!ok_);
    return error_;
  }

 private:
  Error error_{""};
  bool ok_ = true;
};

}  // namespace corun
