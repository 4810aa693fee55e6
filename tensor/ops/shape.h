#pragma once
// Joining, splitting and triangular masks (tensor/ops/shape.cpp). The views themselves (reshape,
// transpose, narrow, ...) are methods of Tensor (tensor/tensor.h).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "minigrad/tensor/tensor.h"

namespace mg {

/// Join tensors along an existing dim; all other dims must match.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
/// Join tensors along a new dim.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
/// Views of consecutive pieces of `size` along `dim` (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);
/// Views of consecutive pieces with the given sizes (which must add up to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
/// `chunks` views of about equal size along `dim`: each ceil(size / chunks), the last smaller, and
/// fewer pieces when they run out (torch.chunk).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// x tiled: dim i repeated repeats[i] times (torch.Tensor.repeat). repeats has at least x.dim()
/// entries; extra leading ones add dims: a (2, 3) tensor repeated {2, 1, 2} is (2, 2, 6). A copy.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
/// x with the order of its elements reversed along each of `dims` (torch.flip). A copy.
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
/// Each slice along `dim` repeated `repeats` times in a row: [a, b] -> [a, a, b, b]
/// (torch.repeat_interleave); without a dim, x is flattened first.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
/// Slice i along `dim` repeated repeats[i] times (repeats: int64, one count per slice, or one
/// count for all).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
/// The index repeat_interleave(x, repeats, dim) picks along dim: i, repeats[i] times each.
Tensor repeat_interleave_index(const Tensor& repeats, int64_t size, std::string_view op = "repeat_interleave");
/// What pad puts in the border (PyTorch's mode="constant", "reflect", "replicate", "circular").
enum class PadMode {
  /// `value` (a negative size crops).
  Constant,
  /// The input mirrored without repeating the edge (sizes below the dim's size).
  Reflect,
  /// The edge repeated.
  Replicate,
  /// The input wrapped around (sizes at most the dim's size).
  Circular,
};
/// "constant", "reflect", "replicate" or "circular", as PyTorch spells the mode.
const char* pad_mode_name(PadMode mode);

/// x padded (torch.nn.functional.pad): `pad` holds (before, after) pairs for the last dim, then
/// the one before it, ...: {1, 2} adds 1 element before and 2 after along the last dim, filled as
/// `mode` says (PadMode). Any number of trailing dims.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, PadMode mode = PadMode::Constant, double value = 0);
/// The shape pad(x, pad, mode) has for an input of shape `in`; the checks of pad's arguments (a
/// ShapeError or ValueError naming pad).
Shape pad_shape(const Shape& in, const std::vector<int64_t>& pad, PadMode mode);
/// For the non-constant modes: the index into a dim of `size` that output position i of a dim
/// padded by (before, after) reads.
Tensor pad_index(int64_t size, int64_t before, int64_t after, PadMode mode);
/// Lower triangle of the last two dims (elements with col - row <= diagonal), the rest zero.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// Upper triangle of the last two dims (col - row >= diagonal), the rest zero.
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace mg
