// Loss kernels. Cross-entropy is fused with log_softmax: the forward keeps the log-probabilities,
// and the backward turns them into softmax - onehot in one pass over the rows.
#include "tensor/ops/loss.h"

#include "tensor/ops/elementwise.h"
#include "tensor/ops/nn_functional.h"
#include "tensor/ops/reduce.h"
#include "tensor/parallel.h"

namespace mg {

// loss_i = -log softmax(x_i)[t_i]         x: (N, C)   t: (N) int64   loss: () or (N)
// mean: sum_i loss_i / count, count = the rows whose target is not ignore_index (0/0 = nan, as torch)
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets, Reduction reduction,
                                          int64_t ignore_index) {
  MG_CHECK(logits.defined(), StateError, "cross_entropy: the logits are undefined");
  MG_CHECK(is_floating(logits.dtype()), DTypeError, "cross_entropy: logits must be floating (float32 or float64), got {}",
           dtype_name(logits.dtype()));
  MG_CHECK(targets.defined() && targets.dtype() == DType::Int64, DTypeError,
           "cross_entropy: targets must be an int64 tensor of class indices, got {}",
           targets.defined() ? dtype_name(targets.dtype()) : "undefined");
  MG_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), ShapeError,
           "cross_entropy: expected logits (N, C) and targets (N,), got logits {} and targets {} "
           "(hint: flatten a (B, T, C) batch with reshape({{-1, C}}))",
           shape_str(logits.shape()), shape_str(targets.shape()));
  const int64_t N = logits.size(0), C = logits.size(1);
  const Tensor t = targets.contiguous();
  const int64_t* pt = t.data<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (pt[i] == ignore_index) continue;
    MG_CHECK(pt[i] >= 0 && pt[i] < C, IndexError,
             "cross_entropy: target {} at position {} is out of range for {} classes (expected 0 to {}, "
             "or ignore_index {})", pt[i], i, C, C - 1, ignore_index);
    ++count;
  }
  const Tensor lp = log_softmax(logits, 1);  // (N, C)
  Tensor losses = zeros({N}, lp.dtype());
  visit_float(lp.dtype(), "cross_entropy", [&]<class T>() {
    const T* p = lp.data<T>();
    T* o = losses.data<T>();
    for (int64_t i = 0; i < N; ++i)
      if (pt[i] != ignore_index) o[i] = -p[i * C + pt[i]];
  });
  Tensor loss = reduction == Reduction::None ? losses
              : reduction == Reduction::Sum  ? sum(losses)
                                             : sum(losses) / static_cast<double>(count);
  return {loss, lp, count};
}

// dx_i = (softmax(x_i) - onehot(t_i)) * w_i      softmax(x_i) = exp(log_probs_i)
// w_i = dloss / count (mean), dloss (sum), dloss_i (none); 0 for rows whose target is ignore_index
// dloss: () or (N)   log_probs, dx: (N, C)   t: (N)
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& log_probs, const Tensor& targets, Reduction reduction,
                              int64_t ignore_index, int64_t count) {
  MG_CHECK(dloss.defined() && log_probs.defined() && targets.defined(), StateError,
           "cross_entropy_backward: an operand is undefined");
  MG_CHECK(log_probs.dim() == 2 && targets.dim() == 1 && targets.size(0) == log_probs.size(0), ShapeError,
           "cross_entropy_backward: expected log_probs (N, C) and targets (N,), got {} and {}",
           shape_str(log_probs.shape()), shape_str(targets.shape()));
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  const Shape want = reduction == Reduction::None ? Shape{N} : Shape{};
  MG_CHECK(dloss.shape() == want, ShapeError, "cross_entropy_backward: dloss has shape {} but this reduction needs {}",
           shape_str(dloss.shape()), shape_str(want));
  MG_CHECK(dloss.dtype() == log_probs.dtype() && is_floating(dloss.dtype()), DTypeError,
           "cross_entropy_backward: dloss is {} and log_probs {}; both must be the same floating dtype",
           dtype_name(dloss.dtype()), dtype_name(log_probs.dtype()));
  MG_CHECK(targets.dtype() == DType::Int64, DTypeError, "cross_entropy_backward: targets must be int64, got {}",
           dtype_name(targets.dtype()));
  {
    const Tensor t = targets.contiguous();
    const int64_t* pt = t.data<int64_t>();
    for (int64_t i = 0; i < N; ++i)
      MG_CHECK(pt[i] == ignore_index || (pt[i] >= 0 && pt[i] < C), IndexError,
               "cross_entropy_backward: target {} at position {} is out of range for {} classes", pt[i], i, C);
  }
  Tensor dx = exp(log_probs);  // softmax
  const Tensor g = dloss.contiguous(), t = targets.contiguous();
  visit_float(dx.dtype(), "cross_entropy_backward", [&]<class T>() {
    T* d = dx.data<T>();
    const T* pg = g.data<T>();
    const int64_t* pt = t.data<int64_t>();
    parallel_for(0, N, grain_for(C), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T* row = d + i * C;
        if (pt[i] == ignore_index) {
          for (int64_t c = 0; c < C; ++c) row[c] = 0;
          continue;
        }
        const T w = reduction == Reduction::None ? pg[i]
                  : reduction == Reduction::Sum  ? pg[0]
                                                 : pg[0] / static_cast<T>(count);
        row[pt[i]] -= 1;
        for (int64_t c = 0; c < C; ++c) row[c] *= w;
      }
    });
  });
  return dx;
}

}  // namespace mg
