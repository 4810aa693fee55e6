#pragma once
// nn::summary: what torchinfo prints for a PyTorch model -- every layer, the shape of what it
// returned on one forward pass, its parameters, whether they train -- with the totals.
//
//   std::cout << nn::summary(model, {{2, 64}}, DType::Int64);   // one input of token ids (2, 64)
//   std::cout << nn::summary(model, [&] { model(x, mask); });  // any call
#include <concepts>
#include <functional>
#include <string>
#include <vector>

#include "minigrad/nn/module.h"

namespace mg::nn {

/// Run `forward` once (without recording gradients) with a forward hook on every module of
/// `model`, and return the table: one row per module in the order of the tree, indented by depth,
/// with the shape of its (first) output ("--" for a module the call did not reach), the
/// parameters registered on it (a tied one counted where it first appears) and whether they
/// train; then the total, trainable and frozen counts.
std::string summary(Module& model, const std::function<void()>& forward);

/// summary() with inputs made from shapes: zeros of `dtype` (int64 zeros are token ids, passed
/// as a Tensor to a model whose forward takes ids, as GPT's). One or two inputs.
template <class M>
std::string summary(M& model, const std::vector<Shape>& input_shapes, DType dtype = default_dtype()) {
  MG_CHECK(input_shapes.size() == 1 || input_shapes.size() == 2, ValueError,
           "summary: give one or two input shapes, got {} (for other calls pass a function)", input_shapes.size());
  std::vector<Tensor> in;
  for (const Shape& s : input_shapes) in.push_back(zeros(s, dtype));
  return summary(model, [&] {
    if (in.size() == 1) {
      if constexpr (requires { model.forward(Variable(in[0])); })
        model(Variable(in[0]));
      else if constexpr (requires { model.forward(in[0]); })
        model(in[0]);
      else
        throw ValueError(fmt::format("summary: a {} is not called with one input", model.type_name()));
    } else {
      if constexpr (requires { model.forward(Variable(in[0]), Variable(in[1])); })
        model(Variable(in[0]), Variable(in[1]));
      else
        throw ValueError(fmt::format("summary: a {} is not called with two inputs", model.type_name()));
    }
  });
}

}  // namespace mg::nn
