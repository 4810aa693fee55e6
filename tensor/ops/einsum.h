#pragma once
// einsum (torch.einsum): a sum of products named by index letters, computed with the ops there
// already are. "ij,jk->ik" is a matrix product, "bij,bjk->bik" a batched one, "ii->" a trace,
// "i,j->ij" an outer product, "...ij->...ji" a transpose of the last two dims.
//
// How it is computed (einsum_plan, from the equation and the shapes alone):
//   1. each operand on its own: a letter repeated in one operand ("ii") is its diagonal; a letter
//      no other operand and not the output has is summed out; a size-1 dim whose letter has a
//      larger size elsewhere is dropped (it broadcasts: the same value for every index);
//   2. the operands are multiplied in, left to right, each product one batched matmul: the
//      letters both sides share and the output (or a later operand) still needs are the batch,
//      the ones both share and nothing later needs are summed by the product (the K of the matmul),
//      the ones only one side has are its rows (M) or columns (N); permutes and reshapes line them up;
//   3. a last permute puts the letters in the output's order.
// Every step is a differentiable op, so Variable's einsum (autograd/ops/matmul.h) is the same
// plan run on Variables: its gradient, and the gradient's gradient, come from those ops.
#include <array>
#include <string_view>
#include <vector>

#include "minigrad/tensor/ops/matmul.h"
#include "minigrad/tensor/tensor.h"

namespace mg {

/// What einsum does to operands of given shapes: made by einsum_plan, carried out by run_einsum.
struct EinsumPlan {
  /// One operand's own steps, before any product.
  struct Prepare {
    std::vector<std::array<int64_t, 2>> diagonals;  ///< (dim1, dim2): taken in order, each adds a last dim
    std::vector<int64_t> sum_dims;                  ///< then these dims summed out (letters only it has)
    Shape shape;                                    ///< then reshaped to this (broadcast size-1 dims dropped)
  };
  /// The result so far (left) times the next prepared operand (right), as one batched matmul.
  struct Product {
    std::vector<int64_t> left_perm, right_perm;  ///< to (batch, rows, summed) and (batch, summed, columns)
    Shape left_shape, right_shape;               ///< (B, M, K) and (B, K, N)
    Shape out_shape;                             ///< the (B, M, N) product as (batch..., rows..., columns...)
  };
  std::vector<Prepare> prepare;   ///< one per operand
  std::vector<Product> products;  ///< one per operand after the first
  std::vector<int64_t> out_perm;  ///< the last result's dims in the output's order
};

/// The plan for `equation` on operands of these shapes: ValueError naming einsum if the equation
/// does not parse or names an output letter no operand has, ShapeError if it does not match the
/// shapes (subscript count, a letter's sizes that do not broadcast, a repeated letter of two sizes).
EinsumPlan einsum_plan(std::string_view equation, const std::vector<Shape>& shapes);

/// The operands' shapes, after checking they are all defined and of one dtype (Tensors or
/// Variables): a StateError or DTypeError naming einsum otherwise.
template <class T>
std::vector<Shape> einsum_shapes(const std::vector<T>& operands) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < operands.size(); ++i) {
    MG_CHECK(operands[i].defined(), StateError, "einsum: operand {} is undefined", i);
    MG_CHECK(operands[i].dtype() == operands[0].dtype(), DTypeError,
             "einsum: operand {} is {} but operand 0 is {}; all operands must have one dtype", i,
             dtype_name(operands[i].dtype()), dtype_name(operands[0].dtype()));
    MG_CHECK(is_floating_point(operands[i].dtype()), DTypeError,
             "einsum: the operands must be floating (its products are matmuls), got {}",
             dtype_name(operands[i].dtype()));
    shapes.push_back(operands[i].shape());
  }
  return shapes;
}

/// The plan carried out on Tensors or Variables (anything with diagonal, sum, reshape, permute
/// methods and a matmul): the one definition of einsum's arithmetic.
template <class T>
T run_einsum(const EinsumPlan& plan, const std::vector<T>& operands) {
  auto prepared = [&](size_t i) {
    const EinsumPlan::Prepare& p = plan.prepare[i];
    T x = operands[i];
    for (const auto& [d1, d2] : p.diagonals) x = x.diagonal(0, d1, d2);
    if (!p.sum_dims.empty()) x = x.sum(p.sum_dims);
    return x.reshape(p.shape);
  };
  T result = prepared(0);
  for (size_t k = 0; k < plan.products.size(); ++k) {
    const EinsumPlan::Product& p = plan.products[k];
    const T left = result.permute(p.left_perm).reshape(p.left_shape);
    const T right = prepared(k + 1).permute(p.right_perm).reshape(p.right_shape);
    result = matmul(left, right).reshape(p.out_shape);
  }
  return result.permute(plan.out_perm);
}

/// torch.einsum(equation, *operands): letters a-z, A-Z name dims, "..." the broadcast leading (or
/// any) dims, "->" the output (without it: the letters used once, in alphabetical order, uppercase
/// first, after the "..." dims); spaces are ignored. A letter's sizes must match across operands or
/// be 1 (broadcast). Shapes: the output's dims are the sizes of its letters.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

}  // namespace mg
