// Autocast's graph: the bfloat16 copies layer norm and GELU leave beside their outputs (and that
// a product reads them), the casts a product records before itself, its gradients as the kernels
// on the rounded operands bit for bit, and its second derivatives. The products' numbers against
// float64 and PyTorch: test_autocast.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "helpers.h"
#include "minigrad/minigrad.h"

using namespace mg;
using mgtest::max_abs_diff;
using mgtest::rnd;

namespace {
// Whether two bfloat16 tensors of one shape hold the same bits.
bool same_bf16_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != DType::BFloat16 || b.dtype() != DType::BFloat16) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data<bfloat16>(), y.data<bfloat16>(), static_cast<size_t>(x.numel()) * 2) == 0;
}
}  // namespace

TEST(Autocast, LayerNormAndGeluLeaveTheNextProductsOperandBeside) {
  // Under autocast, layer norm and linear_gelu round their output to bfloat16 while it is in cache
  // (Storage::bf16_copy); the next product reads that instead of converting: the same bits as
  // .to(BFloat16), for any view of the output, and never once the output has been written in place.
  Generator g(3);
  const Variable x(randn({6, 40}, g) * 3.0, true), w(randn({40}, g), true), b(randn({40}, g), true);
  const Variable fw(randn({24, 40}, g) * 0.2, true), fb(randn({24}, g), true);
  Variable y, h;
  {
    const AutocastGuard guard;
    y = layer_norm(x, {40}, w, b);
    h = linear_gelu(y, fw, fb, GeluApproximate::Tanh);
  }
  for (const Variable* v : {&y, &h}) {
    const Tensor copy = bf16_copy_of(v->data());
    ASSERT_TRUE(copy.defined());
    EXPECT_TRUE(same_bf16_bits(copy, v->data().to(DType::BFloat16)));
    const Tensor view = v->data().narrow(1, 3, 7).transpose(0, 1);  // a view reads the copy's same elements
    EXPECT_TRUE(same_bf16_bits(bf16_copy_of(view), view.to(DType::BFloat16)));
  }
  // the products that read them: the same outputs and gradients as from a fresh conversion
  Tensor with_copy;
  {
    const AutocastGuard guard;
    with_copy = linear(y, fw, fb).data();
  }
  // written in place: the copy is stale and is not used; autocast converts the new values
  y.data().narrow(0, 0, 1).fill_(2);
  EXPECT_FALSE(bf16_copy_of(y.data()).defined());
  {
    const AutocastGuard guard;
    EXPECT_TRUE(same_bf16_bits(autocast(y.data()), y.data().to(DType::BFloat16)));
    EXPECT_NE(max(abs(linear(y, fw, fb).data() - with_copy)).item(), 0.0);
  }
  // outside autocast, and in float64, nothing is made
  EXPECT_FALSE(bf16_copy_of(layer_norm(x, {40}, w, b).data()).defined());
  {
    const AutocastGuard guard;
    EXPECT_FALSE(bf16_copy_of(layer_norm(Variable(randn({2, 5}, g, DType::Float64)), {5}).data()).defined());
  }
}

TEST(Autocast, AStepReadsTheCopiesAndGivesTheConvertedOperandsBits) {
  // A bfloat16 GPT step reads layer norm's and GELU's copies; the same step with those copies gone
  // (each output written in place with its own values: the versions move, the numbers stay) converts
  // afresh. Every gradient is the same to the bit.
  Generator g(9);
  models::GPT model(20, 8, {.d_model = 16, .nhead = 2, .num_layers = 2}, g);
  const Tensor ids = randint(0, 20, {3, 8}, g), targets = randint(0, 20, {3 * 8}, g);
  auto step = [&](bool drop_copies) {
    model.zero_grad();
    std::vector<nn::HookHandle> hooks;
    if (drop_copies)  // a forward hook on every LayerNorm writes its output onto itself; one on each
      for (auto& [name, m] : model.named_modules())  // fc sends the MLP back to linear, then gelu
        if (m->type_name() == "LayerNorm" || name.ends_with(".fc"))
          hooks.push_back(
              m->register_forward_hook([](const nn::Module&, const std::vector<Variable>&, std::vector<Variable>& out) {
                out[0].data().copy_(out[0].data().clone());
              }));
    Variable loss;
    {
      const AutocastGuard guard;
      loss = cross_entropy(model(ids).reshape({3 * 8, 20}), targets);
    }
    loss.backward();
    for (nn::HookHandle& hk : hooks) hk.remove();
    std::vector<std::vector<float>> grads;
    for (const Variable& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
    return grads;
  };
  EXPECT_EQ(step(false), step(true));
}

// ---------------------------------------------------------------- one recording per product

TEST(Autocast, AProductRecordsTheCastsOfItsOperandsThenItselfOnce) {
  const Tensor x0 = rnd({3, 4}, 41).to(DType::Float32), w0 = rnd({2, 4}, 42).to(DType::Float32);
  const Variable x(x0, true), w(w0, true), b(zeros({2}), true);
  Variable y, z;
  {
    AutocastGuard guard;
    y = linear(x, w, b);
    z = matmul(x, w.transpose(0, 1));
  }
  // linear: x is cast (a node of its own, float32 in, bfloat16 out); the weight is read as it is
  ASSERT_EQ(y.grad_fn()->name, "linear");
  ASSERT_EQ(y.grad_fn()->next.size(), 3u);
  EXPECT_EQ(y.grad_fn()->next[0]->name, "autocast");
  EXPECT_EQ(y.grad_fn()->next[0]->next[0], x.gradient_edge());
  EXPECT_EQ(y.grad_fn()->next[1], w.gradient_edge());
  EXPECT_EQ(y.grad_fn()->next[2], b.gradient_edge());
  // the gradient of a bfloat16 copy is float32: that is what the node expects back for it
  EXPECT_EQ(y.grad_fn()->input_dtypes[0], DType::Float32);
  // matmul: both operands cast
  ASSERT_EQ(z.grad_fn()->name, "matmul");
  EXPECT_EQ(z.grad_fn()->next[0]->name, "autocast");
  EXPECT_EQ(z.grad_fn()->next[1]->name, "autocast");
  // outside the scope: no casts, and linear without a bias keeps the bias's slot, needing nothing
  const Variable u = linear(x, w, Variable());
  EXPECT_EQ(u.grad_fn()->next[0], x.gradient_edge());
  ASSERT_EQ(u.grad_fn()->next.size(), 3u);
  EXPECT_FALSE(u.grad_fn()->needs(2));
}

TEST(Autocast, GradientsAreTheKernelsOnTheRoundedOperandsBitForBit) {
  // The rule calls the same kernels as a hand-written Tensor backward would: dx = round(g) W,
  // dW = round(g)^T round(x), db = sum g, each bit for bit.
  const Tensor x0 = rnd({4, 3, 24}, 21).to(DType::Float32), w0 = rnd({10, 24}, 22).to(DType::Float32),
               b0 = rnd({10}, 23).to(DType::Float32), g0 = rnd({4, 3, 10}, 24).to(DType::Float32);
  Variable x(x0, true), w(w0, true), b(b0, true);
  {
    AutocastGuard guard;
    linear(x, w, b).backward(g0);
  }
  const Tensor g16 = g0.to(DType::BFloat16);
  EXPECT_EQ(max_abs_diff(x.grad(), matmul(g16, w0)), 0.0);
  EXPECT_EQ(
      max_abs_diff(w.grad(), matmul(g16.reshape({12, 10}).transpose(0, 1), x0.to(DType::BFloat16).reshape({12, 24}))),
      0.0);
  EXPECT_EQ(max_abs_diff(b.grad(), sum(g0.reshape({12, 10}), {0})), 0.0);
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
}

namespace {
// |a - b| / |b| over all elements (Frobenius norms)
double relative_diff(const Tensor& a, const Tensor& b) {
  const Tensor d = a.to(DType::Float64) - b.to(DType::Float64);
  return std::sqrt(sum(d * d).item()) / std::sqrt(sum(b.to(DType::Float64) * b.to(DType::Float64)).item());
}
}  // namespace

TEST(Autocast, ProductsAreDifferentiableTwice) {
  // f(x, W, q, k, v) through linear, matmul and fused attention; d/dW and d/dq of |df/dx|^2 and
  // |df/dq|^2 with autocast on equal those without it to bfloat16's precision (the casts are
  // recorded ops), and the first derivative under create_graph is the plain backward's (bit for bit
  // through linear and matmul, whose recorded rule is the same rule).
  const Tensor x0 = rnd({6, 8}, 51).to(DType::Float32), w0 = rnd({5, 8}, 52).to(DType::Float32);
  const Tensor q0 = rnd({1, 2, 5, 4}, 53).to(DType::Float32), k0 = rnd({1, 2, 5, 4}, 54).to(DType::Float32),
               v0 = rnd({1, 2, 5, 4}, 55).to(DType::Float32);
  struct Result {
    Tensor gx, gq, hw, hq, hv;
  };
  auto run = [&](bool bf16, bool create_graph) {
    Variable x(x0, true), w(w0, true), q(q0, true), k(k0, true), v(v0, true);
    Variable f;
    {
      AutocastGuard guard(bf16);
      const Variable h = linear(x, w, Variable());
      const Variable a = scaled_dot_product_attention(q, k, v, {.is_causal = true});
      f = sum(pow(matmul(h, h.transpose(0, 1)), 2)) + sum(pow(a, 2));
    }
    const VariableList g = grad({f}, {x, q}, {.create_graph = create_graph});
    Result r{g[0].data(), g[1].data(), {}, {}, {}};
    if (!create_graph) return r;
    const VariableList h = grad({sum(pow(g[0], 2)) + sum(pow(g[1], 2))}, {w, q, v});
    r.hw = h[0].data(), r.hq = h[1].data(), r.hv = h[2].data();
    return r;
  };
  const Result plain = run(true, false), bf16 = run(true, true), full = run(false, true);
  EXPECT_EQ(max_abs_diff(bf16.gx, plain.gx), 0.0);
  // attention's recorded backward is the composed form, rounding in other places than the kernel
  EXPECT_LT(relative_diff(bf16.gq, plain.gq), 1e-2);
  EXPECT_GT(max_abs_diff(bf16.gx, full.gx), 0.0);  // (the products were rounded)
  EXPECT_LT(relative_diff(bf16.hw, full.hw), 3e-2);
  EXPECT_LT(relative_diff(bf16.hq, full.hq), 3e-2);
  EXPECT_LT(relative_diff(bf16.hv, full.hv), 3e-2);
  EXPECT_GT(sum(abs(full.hw)).item(), 1.0);  // (a real second derivative, not zeros)
}
