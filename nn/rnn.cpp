#include "minigrad/nn/rnn.h"

#include <cmath>

#include "minigrad/autograd/autocast.h"
#include "minigrad/nn/init.h"

namespace mg::nn {
namespace {

// x[.., i, ..] along dim, the dim dropped
Variable pick(const Variable& x, int64_t dim, int64_t i) { return squeeze(narrow(x, dim, i, 1), dim); }

void check_sizes(int64_t input_size, int64_t hidden_size, const char* layer) {
  MG_CHECK(input_size > 0 && hidden_size > 0, ValueError,
           "{}: input_size and hidden_size must be positive, got {} and {}", layer, input_size, hidden_size);
}

// every parameter U(-1/sqrt(hidden), 1/sqrt(hidden)), in registration order
void reset_all(Module& m, int64_t hidden_size, Generator& gen) {
  const double b = 1 / std::sqrt(static_cast<double>(hidden_size));
  for (auto& [n, p] : m.named_parameters()) init::uniform_(p, -b, b, gen);
}

// A cell's input as a batch: x (N, I) or (I) and h (N, H) / (H) / undefined (zeros). Returns
// whether it was unbatched.
bool cell_batch(const Variable& x, const Variable& h, int64_t input_size, int64_t hidden_size, const char* cell,
                Variable& xb, Variable& hb) {
  MG_CHECK(x.defined() && (x.dim() == 1 || x.dim() == 2) && x.size(-1) == input_size, ShapeError,
           "{}: expected input (N, {}) or ({},), got {}", cell, input_size, input_size,
           x.defined() ? shape_str(x.shape()) : "an undefined variable");
  const bool unbatched = x.dim() == 1;
  xb = unbatched ? unsqueeze(x, 0) : x;
  const Shape want{xb.size(0), hidden_size};
  if (!h.defined()) {
    hb = Variable(zeros(want, x.dtype()));
  } else {
    hb = unbatched && h.dim() == 1 ? unsqueeze(h, 0) : h;
    MG_CHECK(hb.shape() == want, ShapeError, "{}: expected a hidden state {} for input {}, got {}", cell,
             shape_str(unbatched ? Shape{hidden_size} : want), shape_str(x.shape()), shape_str(h.shape()));
  }
  return unbatched;
}

}  // namespace

// ---------------------------------------------------------------- cells

RNNCell::RNNCell(int64_t in, int64_t hidden, RNNCellOptions o, Generator& gen)
    : input_size(in), hidden_size(hidden), options(std::move(o)) {
  check_sizes(in, hidden, "RNNCell");
  register_parameter("weight_ih", weight_ih, empty({hidden, in}));
  register_parameter("weight_hh", weight_hh, empty({hidden, hidden}));
  if (options.bias) {
    register_parameter("bias_ih", bias_ih, empty({hidden}));
    register_parameter("bias_hh", bias_hh, empty({hidden}));
  }
  reset_all(*this, hidden, gen);
}

// h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)
Variable RNNCell::forward(const Variable& x, const Variable& h) const {
  Variable xb, hb;
  const bool unbatched = cell_batch(x, h, input_size, hidden_size, "RNNCell", xb, hb);
  const Variable a = linear(xb, weight_ih, bias_ih) + linear(hb, weight_hh, bias_hh);
  const Variable out = options.nonlinearity == RNNNonlinearity::Tanh ? tanh(a) : relu(a);
  return unbatched ? squeeze(out, 0) : out;
}

std::string RNNCell::extra_repr() const {
  return fmt::format("{}, {}, bias={}, nonlinearity={}", input_size, hidden_size, options.bias,
                     options.nonlinearity == RNNNonlinearity::Tanh ? "tanh" : "relu");
}

GRUCell::GRUCell(int64_t in, int64_t hidden, GRUCellOptions o, Generator& gen) : input_size(in), hidden_size(hidden) {
  check_sizes(in, hidden, "GRUCell");
  register_parameter("weight_ih", weight_ih, empty({checked_mul(3, hidden, "GRUCell"), in}));
  register_parameter("weight_hh", weight_hh, empty({3 * hidden, hidden}));
  if (o.bias) {
    register_parameter("bias_ih", bias_ih, empty({3 * hidden}));
    register_parameter("bias_hh", bias_hh, empty({3 * hidden}));
  }
  reset_all(*this, hidden, gen);
}

// [r z n] rows of the two projections; the reset gate r scales the hidden part of n only
Variable GRUCell::forward(const Variable& x, const Variable& h) const {
  Variable xb, hb;
  const bool unbatched = cell_batch(x, h, input_size, hidden_size, "GRUCell", xb, hb);
  const std::vector<Variable> gi = chunk(linear(xb, weight_ih, bias_ih), 3, 1);  // input's part of r, z, n
  const std::vector<Variable> gh = chunk(linear(hb, weight_hh, bias_hh), 3, 1);  // the hidden state's
  const Variable r = sigmoid(gi[0] + gh[0]);
  const Variable z = sigmoid(gi[1] + gh[1]);
  const Variable n = tanh(gi[2] + r * gh[2]);
  const Variable out = (1.0 - z) * n + z * hb;
  return unbatched ? squeeze(out, 0) : out;
}

std::string GRUCell::extra_repr() const {
  return fmt::format("{}, {}, bias={}", input_size, hidden_size, bias_ih.defined());
}

LSTMCell::LSTMCell(int64_t in, int64_t hidden, LSTMCellOptions o, Generator& gen)
    : input_size(in), hidden_size(hidden) {
  check_sizes(in, hidden, "LSTMCell");
  register_parameter("weight_ih", weight_ih, empty({checked_mul(4, hidden, "LSTMCell"), in}));
  register_parameter("weight_hh", weight_hh, empty({4 * hidden, hidden}));
  if (o.bias) {
    register_parameter("bias_ih", bias_ih, empty({4 * hidden}));
    register_parameter("bias_hh", bias_hh, empty({4 * hidden}));
  }
  reset_all(*this, hidden, gen);
}

// [i f g o] rows of a = x W_ih^T + b_ih + h W_hh^T + b_hh; the cell state c carries the memory
std::tuple<Variable, Variable> LSTMCell::forward(const Variable& x,
                                                 const std::optional<std::tuple<Variable, Variable>>& state) const {
  Variable xb, hb, cb;
  const bool unbatched =
      cell_batch(x, state ? std::get<0>(*state) : Variable(), input_size, hidden_size, "LSTMCell", xb, hb);
  cell_batch(x, state ? std::get<1>(*state) : Variable(), input_size, hidden_size, "LSTMCell", xb, cb);
  const std::vector<Variable> a = chunk(linear(xb, weight_ih, bias_ih) + linear(hb, weight_hh, bias_hh), 4, 1);
  const Variable i = sigmoid(a[0]), f = sigmoid(a[1]), g = tanh(a[2]), o = sigmoid(a[3]);
  const Variable c = f * cb + i * g;
  const Variable h = o * tanh(c);
  if (unbatched) return std::tuple(squeeze(h, 0), squeeze(c, 0));
  return std::tuple(h, c);
}

std::string LSTMCell::extra_repr() const {
  return fmt::format("{}, {}, bias={}", input_size, hidden_size, bias_ih.defined());
}

// ---------------------------------------------------------------- sequence layers

RNNBase::RNNBase(RNNKind kind, int64_t in, int64_t hidden, RNNOptions o, Generator& gen, const char* layer)
    : input_size(in), hidden_size(hidden), options(std::move(o)), kind_(kind), gen_(&gen) {
  check_sizes(in, hidden, layer);
  MG_CHECK(options.num_layers >= 1, ValueError, "{}: num_layers must be >= 1, got {}", layer, options.num_layers);
  MG_CHECK(options.dropout >= 0 && options.dropout <= 1, ValueError, "{}: dropout must be in [0, 1], got {}", layer,
           options.dropout);
  const int64_t G = rnn_gates(kind);
  // The vectors get their final size first: the registry points at their elements.
  const size_t slots = static_cast<size_t>(checked_mul(options.num_layers, num_directions(), layer));
  w_ih_.resize(slots), w_hh_.resize(slots), b_ih_.resize(slots), b_hh_.resize(slots);
  for (int64_t l = 0; l < options.num_layers; ++l)
    for (int64_t d = 0; d < num_directions(); ++d) {
      const std::string sfx = fmt::format("_l{}{}", l, d == 1 ? "_reverse" : "");
      const int64_t layer_in = l == 0 ? in : num_directions() * hidden;
      const size_t i = static_cast<size_t>(l * num_directions() + d);
      register_parameter("weight_ih" + sfx, w_ih_[i], empty({checked_mul(G, hidden, layer), layer_in}));
      register_parameter("weight_hh" + sfx, w_hh_[i], empty({G * hidden, hidden}));
      if (options.bias) {
        register_parameter("bias_ih" + sfx, b_ih_[i], empty({G * hidden}));
        register_parameter("bias_hh" + sfx, b_hh_[i], empty({G * hidden}));
      }
    }
  reset_all(*this, hidden, gen);
}

// Layer by layer, each direction's `recurrence` over the whole sequence; the next layer reads
// the directions' outputs side by side.
std::tuple<Variable, Variable, Variable> RNNBase::run(const Variable& x16, const Variable& h0,
                                                      const Variable& c0) const {
  const std::string layer = type_name();
  // float32 under autocast: a bfloat16 input (a product's output with AutocastOptions::bfloat16_outputs)
  // is widened, and so is each input projection, the recurrence's operand beside float32 w_hh
  const Variable x = autocast_float32(x16);
  MG_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3) && x.size(-1) == input_size, ShapeError,
           "{}: expected input ({}, {}) ({}), or unbatched (L, {}), got {}", layer,
           options.batch_first ? "N, L" : "L, N", input_size, options.batch_first ? "batch_first" : "time first",
           input_size, x.defined() ? shape_str(x.shape()) : "an undefined variable");
  const bool batched = x.dim() == 3;
  Variable seq = !batched ? unsqueeze(x, 1) : options.batch_first ? transpose(x, 0, 1) : x;  // (L, N, I)
  const int64_t L = seq.size(0), N = seq.size(1), S = options.num_layers * num_directions();
  MG_CHECK(L >= 1, ShapeError, "{}: expected a sequence of length >= 1, got input {}", layer, shape_str(x.shape()));
  auto initial = [&](const Variable& s, const char* what) {
    if (!s.defined()) return Variable(zeros({S, N, hidden_size}, x.dtype()));
    const Shape want = batched ? Shape{S, N, hidden_size} : Shape{S, hidden_size};
    MG_CHECK(s.shape() == want, ShapeError,
             "{}: expected {} of shape {} (num_layers * directions, {}hidden_size), got {}", layer, what,
             shape_str(want), batched ? "N, " : "", shape_str(s.shape()));
    const Variable s32 = autocast_float32(s);  // (a bfloat16 state under autocast, widened as x is)
    return batched ? s32 : unsqueeze(s32, 1);
  };
  const bool lstm = kind_ == RNNKind::LSTM;
  const Variable hs0 = initial(h0, "h0"), cs0 = lstm ? initial(c0, "c0") : Variable();
  std::vector<Variable> h_n, c_n;
  for (int64_t l = 0; l < options.num_layers; ++l) {
    std::vector<Variable> outs;
    for (int64_t d = 0; d < num_directions(); ++d) {
      const int64_t k = l * num_directions() + d;
      const Variable xw = autocast_float32(linear(seq, w_ih_[k], b_ih_[k]));  // every step's input projection: one GEMM
      const Variable y =
          recurrence(kind_, xw, pick(hs0, 0, k), lstm ? pick(cs0, 0, k) : Variable(), w_hh_[k], b_hh_[k], d == 1);
      const Variable hs = lstm ? pick(y, 0, 0) : y;  // (L, N, H)
      const int64_t last = d == 0 ? L - 1 : 0;       // the reverse direction ends at t = 0
      h_n.push_back(pick(hs, 0, last));
      if (lstm) c_n.push_back(pick(pick(y, 0, 1), 0, last));
      outs.push_back(hs);
    }
    seq = outs.size() == 1 ? outs[0] : concat(outs, 2);
    if (options.dropout > 0 && l + 1 < options.num_layers) seq = dropout(seq, options.dropout, is_training(), *gen_);
  }
  Variable out = !batched ? squeeze(seq, 1) : options.batch_first ? transpose(seq, 0, 1) : seq;
  Variable hn = stack(h_n, 0), cn = lstm ? stack(c_n, 0) : Variable();
  if (!batched) hn = squeeze(hn, 1), cn = lstm ? squeeze(cn, 1) : cn;
  return {out, hn, cn};
}

std::string RNNBase::extra_repr() const {
  std::string s = fmt::format("{}, {}", input_size, hidden_size);
  if (options.num_layers != 1) s += fmt::format(", num_layers={}", options.num_layers);
  if (kind_ == RNNKind::ReLU) s += ", nonlinearity=relu";
  if (!options.bias) s += ", bias=false";
  if (options.batch_first) s += ", batch_first=true";
  if (options.dropout != 0) s += fmt::format(", dropout={}", options.dropout);
  if (options.bidirectional) s += ", bidirectional=true";
  return s;
}

namespace {
RNNKind elman_kind(const RNNOptions& o) {
  return o.nonlinearity == RNNNonlinearity::Tanh ? RNNKind::Tanh : RNNKind::ReLU;
}
}  // namespace

RNN::RNN(int64_t in, int64_t hidden, RNNOptions o, Generator& gen)
    : Callable(elman_kind(o), in, hidden, o, gen, "RNN") {}

std::tuple<Variable, Variable> RNN::forward(const Variable& x, const Variable& h0) const {
  auto [out, hn, cn] = run(x, h0, Variable());
  return std::tuple(out, hn);
}

GRU::GRU(int64_t in, int64_t hidden, GRUOptions o, Generator& gen)
    : Callable(RNNKind::GRU, in, hidden, o, gen, "GRU") {}

std::tuple<Variable, Variable> GRU::forward(const Variable& x, const Variable& h0) const {
  auto [out, hn, cn] = run(x, h0, Variable());
  return std::tuple(out, hn);
}

LSTM::LSTM(int64_t in, int64_t hidden, LSTMOptions o, Generator& gen)
    : Callable(RNNKind::LSTM, in, hidden, o, gen, "LSTM") {}

std::tuple<Variable, std::tuple<Variable, Variable>> LSTM::forward(
    const Variable& x, const std::optional<std::tuple<Variable, Variable>>& state) const {
  auto [out, hn, cn] = run(x, state ? std::get<0>(*state) : Variable(), state ? std::get<1>(*state) : Variable());
  return std::tuple(out, std::tuple(hn, cn));
}

}  // namespace mg::nn
