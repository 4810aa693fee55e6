#pragma once
// Typed errors for every layer of minigrad.
//
// A user mistake (wrong shapes, an index out of range, a bad value, calling something in the wrong
// state) throws one of the classes below. The message always names the op and the offending shapes
// or values, e.g. "matmul: shapes (2, 3) and (4, 5) cannot be multiplied".
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace mg {

/// Where an error is being raised, as a prefix for its message ("in blocks.2.attn
/// (MultiheadAttention): "), or "". nn installs one that names the module whose forward is running
/// (nn::ForwardScope); the tensor layer knows nothing of modules.
using ErrorContext = std::string (*)();
/// Install the function that prefixes every Error's message (nn does, once).
void set_error_context(ErrorContext context);
/// The current prefix ("" when no function is installed).
std::string error_context();

/// While an OpScope lives, the errors raised on this thread name `op`, the op the user called.
/// A public op built from others opens one first (stack from concat, var from mean, mse_loss from
/// sub), so that "concat: expected tensors of one dtype ..." raised by its part reads
/// "stack: expected tensors of one dtype ... (raised by its concat)". Scopes nest; the outermost
/// names the op. A composite whose parts would describe other shapes than the user gave (conv1d's
/// 3-D weight seen as conv2d's 4-D one) checks its arguments itself before calling them.
class OpScope {
 public:
  /// `op` must outlive the scope (a string literal).
  explicit OpScope(const char* op) noexcept;
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
};

/// `what` as raised inside the current OpScope: relabelled to name the scope's op (see OpScope);
/// unchanged outside any scope or when it already names that op.
std::string relabel_for_scope(const std::string& what);

/// Base class of every error minigrad throws on bad input. The message is prefixed by where in a
/// model it happened, when inside a module's forward (see nn::ForwardScope), and names the public
/// op that was called (see OpScope).
struct Error : std::runtime_error {
  explicit Error(const std::string& what) : std::runtime_error(error_context() + relabel_for_scope(what)) {}
};
/// Shapes that do not fit together (matmul, broadcasting, reshape, concat, ...).
struct ShapeError : Error {
  using Error::Error;
};
/// An index out of range: a dimension, an embedding id, a class target, a slice bound.
struct IndexError : Error {
  using Error::Error;
};
/// A bad value: a probability outside [0, 1], a negative size, an unsupported option.
struct ValueError : Error {
  using Error::Error;
};
/// A dtype an op does not accept, or two operands whose dtypes differ.
struct DTypeError : Error {
  using Error::Error;
};
/// A file that cannot be read or written, or whose contents are not what its format promises
/// (a truncated or corrupted checkpoint, a tensor name the model does not have).
struct FileError : Error {
  using Error::Error;
};
/// A tensor too large to allocate.
struct MemoryError : Error {
  using Error::Error;
};
/// An operation called in the wrong state: backward through a freed graph, an undefined tensor.
struct StateError : Error {
  using Error::Error;
};
/// Something minigrad does not do: differentiating an op's backward that has no derivative rule of
/// its own (create_graph through an op that is not differentiable twice).
struct NotImplementedError : Error {
  using Error::Error;
};

}  // namespace mg

/// MG_CHECK(cond, ErrorType, "fmt text {}", args...): throw ErrorType with the formatted message
/// when `cond` is false. The message should start with the op name: "matmul: ...".
#define MG_CHECK(cond, ErrorType, ...)                            \
  do {                                                            \
    if (!(cond)) throw ::mg::ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)
