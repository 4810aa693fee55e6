#pragma once
// Recurrent layers with PyTorch's gate order, parameter names and initialisation (every weight
// and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so a PyTorch state_dict loads.
//
// The cells (RNNCell, GRUCell, LSTMCell) run one step, written out of ordinary ops: read them to
// see what a GRU or an LSTM computes. The sequence layers (RNN, GRU, LSTM) run whole sequences,
// stacked and optionally bidirectional; each layer and direction is one `recurrence` op
// (autograd/ops/rnn.h), the same arithmetic as the cell in a loop, with a fused backward.
#include <optional>
#include <tuple>

#include "minigrad/nn/module.h"

namespace mg::nn {

/// An Elman RNN's activation (PyTorch's nonlinearity="tanh" or "relu").
enum class RNNNonlinearity { Tanh, ReLU };

/// RNNCell's optional settings (PyTorch's defaults).
struct RNNCellOptions {
  /// The biases b_ih and b_hh.
  bool bias = true;
  /// tanh, or ReLU.
  RNNNonlinearity nonlinearity = RNNNonlinearity::Tanh;
};
/// One step of an Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh).
class RNNCell : public Callable<RNNCell> {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options = {}, Generator& gen = default_generator());
  /// x (N, input_size) or (input_size); h (N, hidden_size) or (hidden_size), undefined for zeros -> h'.
  Variable forward(const Variable& x, const Variable& h = Variable()) const;
  std::string type_name() const override { return "RNNCell"; }
  std::string extra_repr() const override;
  const int64_t input_size, hidden_size;
  const RNNCellOptions options;
  Variable weight_ih, weight_hh;  // (hidden, input), (hidden, hidden)
  Variable bias_ih, bias_hh;      // (hidden) each; undefined without bias
};

/// GRUCell's optional settings (PyTorch's default).
struct GRUCellOptions {
  bool bias = true;
};
/// One step of a GRU (gates stacked [r, z, n] in the weights, as PyTorch):
///   r = s(x W_ir^T + b_ir + h W_hr^T + b_hr)     z = the same with the z rows
///   n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn))     h' = (1 - z) n + z h
class GRUCell : public Callable<GRUCell> {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, GRUCellOptions options = {}, Generator& gen = default_generator());
  /// x (N, input_size) or (input_size); h (N, hidden_size) or undefined for zeros -> h'.
  Variable forward(const Variable& x, const Variable& h = Variable()) const;
  std::string type_name() const override { return "GRUCell"; }
  std::string extra_repr() const override;
  const int64_t input_size, hidden_size;
  Variable weight_ih, weight_hh;  // (3 hidden, input), (3 hidden, hidden)
  Variable bias_ih, bias_hh;      // (3 hidden) each
};

/// LSTMCell's optional settings (PyTorch's default).
struct LSTMCellOptions {
  bool bias = true;
};
/// One step of an LSTM (gates stacked [i, f, g, o], as PyTorch), with a = x W_ih^T + b_ih + h W_hh^T + b_hh:
///   i = s(a_i)  f = s(a_f)  g = tanh(a_g)  o = s(a_o)     c' = f c + i g     h' = o tanh(c')
class LSTMCell : public Callable<LSTMCell> {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, LSTMCellOptions options = {}, Generator& gen = default_generator());
  /// x (N, input_size) or (input_size); state (h, c), each (N, hidden_size), or none for zeros -> (h', c').
  std::tuple<Variable, Variable> forward(
      const Variable& x, const std::optional<std::tuple<Variable, Variable>>& state = std::nullopt) const;
  std::string type_name() const override { return "LSTMCell"; }
  std::string extra_repr() const override;
  const int64_t input_size, hidden_size;
  Variable weight_ih, weight_hh;  // (4 hidden, input), (4 hidden, hidden)
  Variable bias_ih, bias_hh;      // (4 hidden) each
};

/// The settings of RNN, GRU and LSTM (PyTorch's defaults). `nonlinearity` is RNN's alone.
struct RNNOptions {
  int64_t num_layers = 1;
  /// RNN's activation (GRU and LSTM have their own gates).
  RNNNonlinearity nonlinearity = RNNNonlinearity::Tanh;
  bool bias = true;
  /// Input and output (N, L, features) instead of (L, N, features)
  bool batch_first = false;
  /// Dropout on each layer's output but the last, in training.
  double dropout = 0;
  bool bidirectional = false;
};
using GRUOptions = RNNOptions;
using LSTMOptions = RNNOptions;

/// What RNN, GRU and LSTM share: the stacked layers and directions, the parameters
/// weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} (and "_reverse" ones), the shapes.
class RNNBase : public Module {
 public:
  std::string extra_repr() const override;
  const int64_t input_size, hidden_size;
  const RNNOptions options;
  /// 2 when bidirectional, else 1.
  int64_t num_directions() const { return options.bidirectional ? 2 : 1; }

 protected:
  RNNBase(RNNKind kind, int64_t input_size, int64_t hidden_size, RNNOptions options, Generator& gen, const char* layer);
  /// output, h_n, c_n (c_n for an LSTM) for x and the initial states (undefined: zeros).
  std::tuple<Variable, Variable, Variable> run(const Variable& x, const Variable& h0, const Variable& c0) const;
  const RNNKind kind_;

 private:
  std::vector<Variable> w_ih_, w_hh_, b_ih_, b_hh_;  // [layer * directions + direction]
  Generator* gen_;
};

/// A stacked Elman RNN over a sequence.
class RNN : public Callable<RNN, RNNBase> {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions options = {}, Generator& gen = default_generator());
  /// x (L, N, input_size) ((N, L, input_size) if batch_first, or unbatched (L, input_size)) and
  /// h0 (num_layers * directions, N, hidden_size) or undefined -> (output (L, N, directions * hidden), h_n).
  std::tuple<Variable, Variable> forward(const Variable& x, const Variable& h0 = Variable()) const;
  std::string type_name() const override { return "RNN"; }
};

/// A stacked GRU over a sequence (GRUCell's step at each time).
class GRU : public Callable<GRU, RNNBase> {
 public:
  GRU(int64_t input_size, int64_t hidden_size, GRUOptions options = {}, Generator& gen = default_generator());
  /// As RNN::forward.
  std::tuple<Variable, Variable> forward(const Variable& x, const Variable& h0 = Variable()) const;
  std::string type_name() const override { return "GRU"; }
};

/// A stacked LSTM over a sequence (LSTMCell's step at each time).
class LSTM : public Callable<LSTM, RNNBase> {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, LSTMOptions options = {}, Generator& gen = default_generator());
  /// As RNN::forward, with the state (h0, c0) -> (output, (h_n, c_n)).
  std::tuple<Variable, std::tuple<Variable, Variable>> forward(
      const Variable& x, const std::optional<std::tuple<Variable, Variable>>& state = std::nullopt) const;
  std::string type_name() const override { return "LSTM"; }
};

}  // namespace mg::nn
