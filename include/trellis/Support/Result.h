//===- Result.h - Errors as values for LLVM-free code ---------------------===//
//
// The runtime and the file-format code are called from compiler code built
// without exceptions, so they report failure as values: Status (ok or an
// error message) and Result<T> (a value or an error message). Messages are
// complete sentences for the user: they name the file, the field or tensor,
// what was expected and what was found.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_SUPPORT_RESULT_H
#define TRELLIS_SUPPORT_RESULT_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace trellis {

/// An error message. Construct with Error{"..."}.
struct Error {
  std::string message;
};

/// Success or an Error.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error e) : error_(std::move(e.message)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return !error_; }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const {
    assert(error_ && "message() on an ok Status");
    return *error_;
  }

private:
  std::optional<std::string> error_;
};

/// A value of type T or an Error.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }

  T &value() & {
    assert(isOk());
    return std::get<0>(v_);
  }
  const T &value() const & {
    assert(isOk());
    return std::get<0>(v_);
  }
  T &&value() && {
    assert(isOk());
    return std::get<0>(std::move(v_));
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }

  const std::string &message() const {
    assert(!isOk());
    return std::get<1>(v_).message;
  }
  /// The error as a Status (for propagation).
  Status status() const { return isOk() ? Status() : Status(Error{message()}); }
  Error takeError() const { return Error{message()}; }

private:
  std::variant<T, Error> v_;
};

namespace detail {
inline Status asStatus(Status s) { return s; }
template <typename T> Status asStatus(const Result<T> &r) { return r.status(); }
} // namespace detail

} // namespace trellis

#define TRELLIS_CONCAT_IMPL(a, b) a##b
#define TRELLIS_CONCAT(a, b) TRELLIS_CONCAT_IMPL(a, b)

/// Returns the error of `expr` (a Status, or a Result whose value is unused)
/// from the enclosing function, which returns a Status or a Result.
#define TRELLIS_RETURN_IF_ERROR(expr)                                          \
  do {                                                                         \
    if (::trellis::Status trellisStatus_ = ::trellis::detail::asStatus(expr);  \
        !trellisStatus_)                                                       \
      return ::trellis::Error{trellisStatus_.message()};                       \
  } while (false)

/// Evaluates `expr` (a Result<T>) and returns its error from the enclosing
/// function, else declares `decl` from its value: `TRELLIS_ASSIGN_OR_RETURN(
/// auto &t, tensor(0));` (a reference into the kept Result) or `(T t, ...)`
/// (a copy).
#define TRELLIS_ASSIGN_OR_RETURN(decl, expr)                                   \
  TRELLIS_ASSIGN_OR_RETURN_IMPL(TRELLIS_CONCAT(trellisResult_, __LINE__),      \
                                decl, expr)
#define TRELLIS_ASSIGN_OR_RETURN_IMPL(result, decl, expr)                      \
  auto result = (expr);                                                        \
  if (!result)                                                                 \
    return result.takeError();                                                 \
  decl = *result

#endif // TRELLIS_SUPPORT_RESULT_H
