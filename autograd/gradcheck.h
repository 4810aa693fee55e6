#pragma once
// Gradient checking: compare the gradients backward() computes with central differences.
#include <functional>
#include <string>
#include <vector>

#include "minigrad/autograd/variable.h"

namespace mg {

/// Tolerances for gradcheck: an element passes when |analytic - numeric| <= atol + rtol*|numeric|.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  /// For the random output weights.
  uint64_t seed = 0;
};

/// What gradcheck found, with the worst element.
struct GradcheckResult {
  bool ok = true;
  int64_t input = -1;          // which input had the worst element
  std::vector<int64_t> index;  // its position in that input
  double analytic = 0, numeric = 0, error = 0;
  std::string message;  // a readable report ("ok" or the worst mismatch)
};

/// Check fn's gradients with respect to every floating input.
///
/// The inputs are used in float64 (float32 ones are converted; float64 ones are used as they are,
/// so non-contiguous views stay non-contiguous). With a fixed random weighting v of the output
/// (same shape), the analytic gradient of sum(fn(x) * v) from one backward is compared element by
/// element with (f(x + eps e_i) - f(x - eps e_i)) / 2eps. Int64 inputs (targets, ids) are passed
/// through and not checked. fn must return a float64 Variable.
GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

/// The same check with respect to existing float64 leaf Variables, e.g. a module's parameters
/// after module.to(DType::Float64):  gradcheck([&] { return net(x); }, net.parameters());
/// Their data is perturbed in place and restored exactly; their .grad() is cleared.
GradcheckResult gradcheck(const std::function<Variable()>& fn, const std::vector<Variable>& leaves,
                          const GradcheckOptions& options = {});

/// Check fn's second derivatives (PyTorch's gradgradcheck): the first derivative, computed with
/// create_graph as g(x, v) = J(x)^T v for a fixed random v, is itself a function of the inputs and
/// of v, and gradcheck compares its backward with central differences of it. It fails where an
/// op's rule under create_graph is wrong, and throws the NotImplementedError of an op that is not
/// differentiable twice. Tolerances and inputs as for gradcheck.
GradcheckResult gradgradcheck(const std::function<Variable(const std::vector<Variable>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace mg
