// Tensor's method forms: t.sum({1}) is sum(t, {1}), and so on. One line each; the kernels live in
// tensor/ops/.
#include "minigrad/tensor/ops.h"

namespace mg {

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return mg::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return mg::mean(*this, dims, keepdim); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return mg::max(*this, dim, keepdim); }
Tensor Tensor::max() const { return mg::max(*this); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return mg::min(*this, dim, keepdim); }
Tensor Tensor::min() const { return mg::min(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return mg::argmax(*this, dim, keepdim); }
Tensor Tensor::argmax() const { return mg::argmax(*this); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return mg::argmin(*this, dim, keepdim); }
Tensor Tensor::argmin() const { return mg::argmin(*this); }
Tensor Tensor::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return mg::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return mg::std(*this, dims, correction, keepdim);
}
Tensor Tensor::prod(std::optional<int64_t> dim, bool keepdim) const { return mg::prod(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return mg::cumsum(*this, dim); }
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return mg::logsumexp(*this, dims, keepdim);
}
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return mg::topk(*this, k, dim, largest, sorted);
}
std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const { return mg::sort(*this, dim, descending); }
Tensor Tensor::argsort(int64_t dim, bool descending) const { return mg::argsort(*this, dim, descending); }
Tensor Tensor::matmul(const Tensor& other) const { return mg::matmul(*this, other); }
Tensor Tensor::pow(double exponent) const { return mg::pow(*this, exponent); }
Tensor Tensor::exp() const { return mg::exp(*this); }
Tensor Tensor::log() const { return mg::log(*this); }
Tensor Tensor::sqrt() const { return mg::sqrt(*this); }
Tensor Tensor::abs() const { return mg::abs(*this); }
Tensor Tensor::neg() const { return mg::neg(*this); }
Tensor Tensor::sign() const { return mg::sign(*this); }
Tensor Tensor::tanh() const { return mg::tanh(*this); }
Tensor Tensor::sigmoid() const { return mg::sigmoid(*this); }
Tensor Tensor::relu() const { return mg::relu(*this); }
Tensor Tensor::sin() const { return mg::sin(*this); }
Tensor Tensor::cos() const { return mg::cos(*this); }
Tensor Tensor::log1p() const { return mg::log1p(*this); }
Tensor Tensor::expm1() const { return mg::expm1(*this); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const { return mg::clamp(*this, min, max); }
Tensor Tensor::softmax(int64_t dim) const { return mg::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return mg::log_softmax(*this, dim); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return mg::masked_fill(*this, mask, value); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return mg::chunk(*this, chunks, dim); }
std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const { return mg::split(*this, size, dim); }
Tensor Tensor::eq(const Tensor& other) const { return mg::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return mg::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return mg::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return mg::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return mg::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return mg::ge(*this, other); }

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return mg::gather(*this, dim, index); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return mg::index_select(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return mg::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, double value) const {
  return mg::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return mg::scatter_add(*this, dim, index, src);
}
Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                              bool include_self) const {
  return mg::scatter_reduce(*this, dim, index, src, reduce, include_self);
}
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) const {
  return mg::index_put(*this, indices, values, accumulate);
}
Tensor Tensor::masked_select(const Tensor& mask) const { return mg::masked_select(*this, mask); }
Tensor Tensor::repeat(const std::vector<int64_t>& repeats) const { return mg::repeat(*this, repeats); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return mg::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::flip(const std::vector<int64_t>& dims) const { return mg::flip(*this, dims); }

}  // namespace mg
