// Variable's method forms: x.transpose(-2, -1) is transpose(x, -2, -1), and so on. One line each;
// the ops themselves live in autograd/ops/.
#include "minigrad/autograd/ops.h"

namespace mg {

Variable Variable::reshape(const Shape& shape) const { return mg::reshape(*this, shape); }
Variable Variable::view(const Shape& shape) const { return mg::view(*this, shape); }
Variable Variable::flatten(int64_t start_dim, int64_t end_dim) const { return mg::flatten(*this, start_dim, end_dim); }
Variable Variable::unflatten(int64_t dim, const Shape& sizes) const { return mg::unflatten(*this, dim, sizes); }
std::vector<Variable> Variable::chunk(int64_t chunks, int64_t dim) const { return mg::chunk(*this, chunks, dim); }
Variable Variable::transpose(int64_t d0, int64_t d1) const { return mg::transpose(*this, d0, d1); }
Variable Variable::permute(const std::vector<int64_t>& dims) const { return mg::permute(*this, dims); }
Variable Variable::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  return mg::diagonal(*this, offset, dim1, dim2);
}
Variable Variable::gather(int64_t dim, const Tensor& index) const { return mg::gather(*this, dim, index); }
Variable Variable::index_select(int64_t dim, const Tensor& index) const { return mg::index_select(*this, dim, index); }
Variable Variable::scatter(int64_t dim, const Tensor& index, const Variable& src) const {
  return mg::scatter(*this, dim, index, src);
}
Variable Variable::scatter(int64_t dim, const Tensor& index, double value) const {
  return mg::scatter(*this, dim, index, value);
}
Variable Variable::scatter_add(int64_t dim, const Tensor& index, const Variable& src) const {
  return mg::scatter_add(*this, dim, index, src);
}
Variable Variable::scatter_reduce(int64_t dim, const Tensor& index, const Variable& src, const std::string& reduce,
                                  bool include_self) const {
  return mg::scatter_reduce(*this, dim, index, src, reduce, include_self);
}
Variable Variable::index_put(const std::vector<Tensor>& indices, const Variable& values, bool accumulate) const {
  return mg::index_put(*this, indices, values, accumulate);
}
Variable Variable::masked_select(const Tensor& mask) const { return mg::masked_select(*this, mask); }
Variable Variable::repeat(const std::vector<int64_t>& repeats) const { return mg::repeat(*this, repeats); }
Variable Variable::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return mg::repeat_interleave(*this, repeats, dim);
}
Variable Variable::lerp(const Variable& end, const Variable& weight) const { return mg::lerp(*this, end, weight); }
Variable Variable::lerp(const Variable& end, double weight) const { return mg::lerp(*this, end, weight); }
Variable Variable::addmm(const Variable& mat1, const Variable& mat2, double beta, double alpha) const {
  return mg::addmm(*this, mat1, mat2, beta, alpha);
}
Variable Variable::flip(const std::vector<int64_t>& dims) const { return mg::flip(*this, dims); }
Variable Variable::narrow(int64_t dim, int64_t start, int64_t length) const {
  return mg::narrow(*this, dim, start, length);
}
Variable Variable::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return mg::slice(*this, dim, start, end, step);
}
Variable Variable::expand(const Shape& shape) const { return mg::expand(*this, shape); }
Variable Variable::squeeze() const { return mg::squeeze(*this); }
Variable Variable::squeeze(int64_t dim) const { return mg::squeeze(*this, dim); }
Variable Variable::unsqueeze(int64_t dim) const { return mg::unsqueeze(*this, dim); }
Variable Variable::sum(const std::vector<int64_t>& dims, bool keepdim) const { return mg::sum(*this, dims, keepdim); }
Variable Variable::mean(const std::vector<int64_t>& dims, bool keepdim) const { return mg::mean(*this, dims, keepdim); }
std::pair<Variable, Tensor> Variable::max(int64_t dim, bool keepdim) const { return mg::max(*this, dim, keepdim); }
Variable Variable::max() const { return mg::max(*this); }
std::pair<Variable, Tensor> Variable::min(int64_t dim, bool keepdim) const { return mg::min(*this, dim, keepdim); }
Variable Variable::min() const { return mg::min(*this); }
Variable Variable::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return mg::var(*this, dims, correction, keepdim);
}
Variable Variable::std(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return mg::std(*this, dims, correction, keepdim);
}
Variable Variable::prod(std::optional<int64_t> dim, bool keepdim) const { return mg::prod(*this, dim, keepdim); }
Variable Variable::cumsum(int64_t dim) const { return mg::cumsum(*this, dim); }
Variable Variable::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return mg::logsumexp(*this, dims, keepdim);
}
std::pair<Variable, Tensor> Variable::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return mg::topk(*this, k, dim, largest, sorted);
}
std::pair<Variable, Tensor> Variable::sort(int64_t dim, bool descending) const {
  return mg::sort(*this, dim, descending);
}
Variable Variable::matmul(const Variable& other) const { return mg::matmul(*this, other); }
Variable Variable::pow(double exponent) const { return mg::pow(*this, exponent); }
Variable Variable::exp() const { return mg::exp(*this); }
Variable Variable::log() const { return mg::log(*this); }
Variable Variable::sqrt() const { return mg::sqrt(*this); }
Variable Variable::abs() const { return mg::abs(*this); }
Variable Variable::neg() const { return mg::neg(*this); }
Variable Variable::tanh() const { return mg::tanh(*this); }
Variable Variable::sigmoid() const { return mg::sigmoid(*this); }
Variable Variable::relu() const { return mg::relu(*this); }
Variable Variable::sin() const { return mg::sin(*this); }
Variable Variable::cos() const { return mg::cos(*this); }
Variable Variable::log1p() const { return mg::log1p(*this); }
Variable Variable::expm1() const { return mg::expm1(*this); }
Variable Variable::clamp(std::optional<double> min, std::optional<double> max) const {
  return mg::clamp(*this, min, max);
}
Variable Variable::softmax(int64_t dim) const { return mg::softmax(*this, dim); }
Variable Variable::log_softmax(int64_t dim) const { return mg::log_softmax(*this, dim); }
Variable Variable::masked_fill(const Tensor& mask, double value) const { return mg::masked_fill(*this, mask, value); }

}  // namespace mg
