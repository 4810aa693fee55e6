// The functions neural nets are built from. Several are fused: one forward kernel, and a
// backward written out by hand instead of the chain of small ops the composition would record.
#include <cmath>

#include "autograd/ops.h"
#include "tensor/loops.h"

namespace mg {

// y = softmax(x) along dim
// dx = y * (dy - sum(dy * y, dim))       (the Jacobian diag(y) - y y^T applied to dy)
Variable softmax(const Variable& x, int64_t dim) {
  Tensor y = mg::softmax(x.data(), dim);
  return record("softmax", y, {x}, [y, dim](const Tensor& dy, const Node&) -> TensorList {
    const int64_t d = y.dim() == 0 ? 0 : wrap_dim(dim, y.dim(), "softmax");
    Tensor dot = y.dim() == 0 ? dy * y : mg::sum(dy * y, {d}, true);
    return {y * (dy - dot)};
  });
}

// y = x - logsumexp(x) along dim
// dx = dy - softmax(x) * sum(dy, dim) = dy - exp(y) * sum(dy, dim)
Variable log_softmax(const Variable& x, int64_t dim) {
  Tensor y = mg::log_softmax(x.data(), dim);
  return record("log_softmax", y, {x}, [y, dim](const Tensor& dy, const Node&) -> TensorList {
    const int64_t d = y.dim() == 0 ? 0 : wrap_dim(dim, y.dim(), "log_softmax");
    Tensor s = y.dim() == 0 ? dy : mg::sum(dy, {d}, true);
    return {dy - mg::exp(y) * s};
  });
}

// loss_i = -log softmax(x_i)[t_i]                x: (N, C)  t: (N) int64  loss: () or (N)
// dx_i = (softmax(x_i) - onehot(t_i)) * w_i      w_i = dy / count (mean), dy (sum), dy_i (none);
//                                                0 for rows whose target is ignore_index
Variable cross_entropy(const Variable& logits, const Tensor& targets, Reduction reduction, int64_t ignore_index) {
  MG_CHECK(targets.defined() && targets.dtype() == DType::Int64, DTypeError,
           "cross_entropy: targets must be an int64 tensor of class indices, got {}",
           targets.defined() ? dtype_name(targets.dtype()) : "undefined");
  if (logits.dim() == 1) {  // one sample: (C) logits, 0-dim target
    MG_CHECK(targets.dim() == 0, ShapeError,
             "cross_entropy: logits of shape {} need a 0-dim target, got shape {}",
             shape_str(logits.shape()), shape_str(targets.shape()));
    Variable l = cross_entropy(unsqueeze(logits, 0), targets.reshape({1}), reduction, ignore_index);
    return reduction == Reduction::None ? reshape(l, {}) : l;
  }
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
  const Tensor lp = mg::log_softmax(logits.data(), 1);  // (N, C), saved for the backward
  Tensor losses = zeros({N}, lp.dtype());
  visit_float(lp.dtype(), "cross_entropy", [&]<class T>() {
    const T* p = lp.data<T>();
    T* o = losses.data<T>();
    for (int64_t i = 0; i < N; ++i)
      if (pt[i] != ignore_index) o[i] = -p[i * C + pt[i]];
  });
  Tensor out = reduction == Reduction::None ? losses
             : reduction == Reduction::Sum  ? mg::sum(losses)
                                            : mg::sum(losses) / static_cast<double>(count);  // 0/0 = nan, as torch
  return record("cross_entropy", out, {logits}, [lp, t, reduction, ignore_index, count, C](const Tensor& dy, const Node&) -> TensorList {
    Tensor dx = mg::exp(lp);  // softmax
    const Tensor g = dy.contiguous();
    visit_float(dx.dtype(), "cross_entropy backward", [&]<class T>() {
      T* d = dx.data<T>();
      const T* pg = g.data<T>();
      const int64_t* pt = t.data<int64_t>();
      const int64_t N = t.numel();
      parallel_for(0, N, std::max<int64_t>(1, kGrain / C), [&](int64_t i0, int64_t i1) {
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
    return {dx};
  });
}

// loss = mean((x - t)^2), composed from differentiable ops: its gradient 2 (x - t) / n comes out
// of the chain rule through sub, pow and mean.
Variable mse_loss(const Variable& input, const Variable& target, Reduction reduction) {
  MG_CHECK(input.shape() == target.shape(), ShapeError,
           "mse_loss: input {} and target {} must have the same shape", shape_str(input.shape()),
           shape_str(target.shape()));
  Variable sq = pow(sub(input, target), 2.0);
  if (reduction == Reduction::None) return sq;
  return reduction == Reduction::Sum ? sum(sq) : mean(sq);
}

// Per row r (the normalized dims flattened to N):   xhat = (x - mean_r) * rstd_r
//   y = xhat * w + b                    x: (..., N)  w, b: (N)  mean, rstd: (...)
// With g = dy * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over the row)
//   dw = sum over rows of dy * xhat     db = sum over rows of dy
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                    const Variable& bias, double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  MG_CHECK(k >= 1 && k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
           ShapeError, "layer_norm: normalized_shape {} does not match the trailing dims of input {}",
           shape_str(normalized_shape), shape_str(x.shape()));
  Tensor mean_r, rstd_r;
  const Tensor w = weight.defined() ? weight.data() : Tensor(), b = bias.defined() ? bias.data() : Tensor();
  Tensor y = mg::layer_norm(x.data(), k, w, b, eps, &mean_r, &rstd_r);
  std::vector<Variable> inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  const bool has_w = weight.defined(), has_b = bias.defined();
  return record("layer_norm", y, inputs,
                [xd = x.data().contiguous(), w, mean_r, rstd_r, has_w, has_b, norm = normalized_shape](const Tensor& dy0, const Node& n) -> TensorList {
    const Tensor dy = dy0.contiguous();
    const int64_t M = mean_r.numel(), N = M == 0 ? 0 : xd.numel() / M;
    Tensor dx = empty(xd.shape(), xd.dtype()), xhat = empty(xd.shape(), xd.dtype());
    visit_float(xd.dtype(), "layer_norm backward", [&]<class T>() {
      const T *px = xd.data<T>(), *pg = dy.data<T>(), *pm = mean_r.data<T>(), *pr = rstd_r.data<T>();
      const T* pw = has_w ? w.contiguous().data<T>() : nullptr;
      T *pdx = dx.data<T>(), *ph = xhat.data<T>();
      parallel_for(0, M, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T *a = px + r * N, *g = pg + r * N;
          T *h = ph + r * N, *o = pdx + r * N;
          const T m = pm[r], rs = pr[r];
          // Two row sums, sum(g w) and sum(g w xhat), in eight independent lanes (vectorised, and
          // added in a fixed order so the bits do not depend on threads).
          T sg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sgh[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t i = 0;
          for (; i + 8 <= N; i += 8)
            for (int j = 0; j < 8; ++j) {
              h[i + j] = (a[i + j] - m) * rs;
              const T gi = pw ? g[i + j] * pw[i + j] : g[i + j];
              sg[j] += gi, sgh[j] += gi * h[i + j];
            }
          for (; i < N; ++i) {
            h[i] = (a[i] - m) * rs;
            const T gi = pw ? g[i] * pw[i] : g[i];
            sg[0] += gi, sgh[0] += gi * h[i];
          }
          const T mg_ = (((sg[0] + sg[1]) + (sg[2] + sg[3])) + ((sg[4] + sg[5]) + (sg[6] + sg[7]))) / static_cast<T>(N);
          const T mgh = (((sgh[0] + sgh[1]) + (sgh[2] + sgh[3])) + ((sgh[4] + sgh[5]) + (sgh[6] + sgh[7]))) / static_cast<T>(N);
          for (int64_t k = 0; k < N; ++k) {
            const T gi = pw ? g[k] * pw[k] : g[k];
            o[k] = rs * (gi - mg_ - h[k] * mgh);
          }
        }
      });
    });
    TensorList out{dx};
    const Shape rows{M, N};
    if (has_w) out.push_back(n.needs(1) ? mg::sum((dy * xhat).reshape(rows), {0}).reshape(norm) : Tensor());
    if (has_b) out.push_back(n.needs(out.size()) ? mg::sum(dy.reshape(rows), {0}).reshape(norm) : Tensor());
    return out;
  });
}

// y[..., :] = W[ids[...], :]       ids: (...) int64   W: (V, D)   y: (..., D)
// dW = zeros (V, D), with each dy row added into row ids[...] (scatter-add; repeated ids add up)
Variable embedding(const Tensor& ids, const Variable& weight) {
  MG_CHECK(weight.dim() == 2, ShapeError, "embedding: weight must be 2-D (num_embeddings, dim), got {}",
           shape_str(weight.shape()));
  MG_CHECK(ids.defined() && ids.dtype() == DType::Int64, DTypeError, "embedding: ids must be int64, got {}",
           ids.defined() ? dtype_name(ids.dtype()) : "undefined");
  const int64_t V = weight.size(0), D = weight.size(1);
  const Tensor flat = ids.reshape({-1});
  const Tensor c = flat.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) {
    const int64_t id = c.data<int64_t>()[i];
    MG_CHECK(id >= 0 && id < V, IndexError,
             "embedding: id {} at position {} is out of range for {} embeddings (expected 0 to {})", id, i, V, V - 1);
  }
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor y = index_select(weight.data(), 0, c).reshape(out_shape);
  return record("embedding", y, {weight}, [c, V, D](const Tensor& dy, const Node&) -> TensorList {
    return {index_add(zeros({V, D}, dy.dtype()), 0, c, dy.reshape({-1, D}))};
  });
}

// y = x * m / (1 - p), m ~ Bernoulli(1 - p)      dx = dy * m / (1 - p)
Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  MG_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got {}", p);
  if (!training || p == 0) return x;
  Tensor mask = p == 1 ? zeros(x.shape(), x.dtype()) : bernoulli(x.shape(), 1 - p, gen, x.dtype()) / (1 - p);
  return record("dropout", mg::mul(x.data(), mask), {x}, [mask](const Tensor& dy, const Node&) -> TensorList {
    return {dy * mask};
  });
}

// y = x gathered along dim by index        dx = zeros like x, with dy scatter-added at index
Variable gather(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("gather", mg::gather(x.data(), dim, index), {x}, [in, dim, index](const Tensor& dy, const Node&) -> TensorList {
    return {scatter_add(zeros(in, dy.dtype()), dim, index, dy)};
  });
}

// y = slices index[i] of x along dim       dx = zeros like x, with slice i of dy added at index[i]
Variable index_select(const Variable& x, int64_t dim, const Tensor& index) {
  const Shape in = x.shape();
  return record("index_select", mg::index_select(x.data(), dim, index), {x},
                [in, dim, index](const Tensor& dy, const Node&) -> TensorList {
                  return {index_add(zeros(in, dy.dtype()), dim, index, dy)};
                });
}

}  // namespace mg
