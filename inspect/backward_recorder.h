#pragma once
// The backward pass as the engine runs it, node by node, kept for a learner to step through
// (viz/backward_page.h draws it in a browser):
//
//   inspect::BackwardRecorder rec({.names = model.named_parameters()});
//   Variable loss = model(x, y);   // every op recorded now: its inputs and output values
//   loss.backward();               // every step of the walk: what arrived, what each rule sent
//   rec.detach();
//   rec.check_with_finite_differences([&] { return model(x, y); });   // float64 models
//   rec.save("runs/walk/backward.json", {{"example", "micrograd's neuron"}});
//
// While attached (from construction to detach() or destruction) the recorder is this thread's
// GraphObserver (autograd/observer.h); the engine is unchanged and, with no recorder attached,
// pays one test of a thread-local pointer per op and per walk. What it keeps, per walk:
//   - each node in the order the engine ran it: its op and label (Node::label), the derivative rule
//     docs/03-writing-an-op.md's table points at (derivative_rule below), its inputs' and output's
//     values, the gradient that arrived (the sum of every consumer's contribution, each kept on
//     the sender's step) and after the hooks on its output, and what its rule returned for each
//     input, before and after fit_gradient summed away a broadcast;
//   - for a leaf (its AccumulateGrad node): its name and its .grad() after the sum.
// A tensor of at most `full_values` entries is kept whole; a larger one as its shape, norm, min,
// max, a heatmap of block means and its largest entries with their indices. The recording's size
// is bounded (RecorderOptions) and json() states it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "minigrad/autograd/observer.h"
#include "minigrad/autograd/variable.h"

namespace mg::inspect {

/// What a recording keeps, and its bounds.
struct RecorderOptions {
  /// Ops recorded while attached (a forward, and the ops a create_graph walk records) and nodes
  /// run by one walk, at most. Past it an op of the forward is a ValueError; a walk runs on
  /// unrecorded (stopping the engine half way would leave some .grad() summed and some not), and
  /// json(), save() and check_with_finite_differences() are then the ValueError.
  int64_t max_nodes = 2000;
  /// Numbers the recording may hold (values, heatmaps, entries): about 8 bytes each in memory,
  /// 10-20 characters each in the JSON. Past it, as for max_nodes.
  int64_t max_numbers = 4'000'000;
  /// Tensors with at most this many entries are kept whole.
  int64_t full_values = 1024;
  /// A larger tensor's heatmap has at most this many rows and columns (block means).
  int64_t heatmap_size = 24;
  /// A larger tensor keeps this many of its largest entries (by magnitude), with their indices.
  int64_t top_entries = 6;
  /// Names for leaves (model.named_parameters(), or your own): shown instead of "leaf".
  std::vector<std::pair<std::string, Variable>> names;
};

/// One tensor as a recording keeps it.
struct TensorRecord {
  Shape shape;
  double norm = 0, min = 0, max = 0;  // over every entry (0 for an empty tensor)
  bool full = false;                  // values holds every entry, row-major
  std::vector<double> values;
  int64_t heat_rows = 0, heat_cols = 0;                      // when not full: the tensor as (rows, last dim), in blocks
  std::vector<double> heatmap;                               // heat_rows x heat_cols block means
  std::vector<std::pair<std::vector<int64_t>, double>> top;  // when not full: the largest |entries|
};

/// One node of the graph: an op the forward recorded, or a leaf's AccumulateGrad.
struct NodeRecord {
  int64_t id = 0;
  std::string op;     // the op's name ("matmul"); "leaf" for a leaf's accumulator
  std::string label;  // a leaf's name (RecorderOptions::names, Variable::name); json() reads an op's Node::label
  std::string rule;   // the derivative rule (derivative_rule below), "" where the table has none
  std::string where;  // where that rule is written: "autograd/ops/matmul.cpp:matmul"
  Shape out_shape;
  std::optional<TensorRecord> value;  // the op's output, or the leaf's value
  struct Input {
    Shape shape;
    int64_t from = -1;  // the node its gradient goes to (-1: it needs none)
    std::optional<TensorRecord> value;
  };
  std::vector<Input> inputs;   // recorded ops only
  int64_t forward_index = -1;  // its place among the ops recorded while attached (-1: a leaf, or before)
  bool view = false;           // its output shares storage with an input (reshape, transpose, expand...)
};

/// A gradient a node's rule returned for one input, on its way to the node below.
struct SendRecord {
  int64_t input = 0;
  int64_t to = 0;
  TensorRecord returned;          // as the rule returned it
  TensorRecord fitted;            // summed down to the input's shape (fit_gradient)
  bool broadcast_undone = false;  // returned and fitted differ in shape
};

/// Finite differences for one entry of the gradient that arrived at a node.
struct FdCheck {
  std::vector<int64_t> index;
  double engine = 0;   // that entry of the arrived gradient (before hooks: what the loss sees)
  double numeric = 0;  // (L(v + eps) - L(v - eps)) / 2 eps, with the entry moved in the forward itself
  double eps = 0;
};

/// One node the walk came to, in the order the engine ran it.
struct StepRecord {
  int64_t node = 0;
  TensorRecord arrived;                     // the sum of the contributions (seed included)
  std::optional<TensorRecord> after_hooks;  // when hooks on the output replaced it
  int64_t hooks = 0;                        // hooks registered on the output (retain_grad's included)
  std::optional<TensorRecord> seed;         // a root's gradient (ones, or the one passed to backward)
  bool ran = false;                         // its rule ran (mg::grad skips nodes that lead to no input)
  std::vector<SendRecord> sends;
  std::optional<TensorRecord> leaf_grad;  // a leaf's .grad() after the sum
  std::optional<FdCheck> fd;              // check_with_finite_differences
  /// The entry of the arrived gradient (before hooks) with the largest magnitude, flat, and its value.
  int64_t probe = -1;
  double probe_value = 0;
};

/// One backward walk.
struct WalkRecord {
  bool create_graph = false;
  bool completed = false;  // false when a rule threw part way
  std::vector<StepRecord> steps;
};

/// Records the forward's ops and every backward walk on this thread while attached (see the file
/// comment). One thread: an op or a walk on another thread is not recorded.
class BackwardRecorder : public GraphObserver {
 public:
  /// Attach to this thread. A StateError if another observer is attached (two recorders at once).
  explicit BackwardRecorder(RecorderOptions options = {});
  /// Detaches if still attached.
  ~BackwardRecorder() override;
  BackwardRecorder(const BackwardRecorder&) = delete;
  BackwardRecorder& operator=(const BackwardRecorder&) = delete;

  /// Stop recording (idempotent): the forward and walks so far stay.
  void detach();
  /// Every node seen, by id (ids are dense from 0).
  const std::vector<NodeRecord>& nodes() const { return nodes_; }
  /// The walks, in the order they ran.
  const std::vector<WalkRecord>& walks() const { return walks_; }
  /// The numbers kept so far (bounded by RecorderOptions::max_numbers).
  int64_t numbers() const { return numbers_; }
  /// The id of the node behind `v` (its op, or its leaf's accumulator); a ValueError if it was not recorded.
  int64_t id_of(const Variable& v) const;

  /// For every step of walk `walk` whose node was recorded here (and is not a view, whose
  /// gradient is its input's), and for every leaf: run `loss_fn` (which must rebuild the same
  /// forward, float64, deterministically) twice with that step's probe entry moved by +-eps
  /// inside the forward, and keep the central difference beside the engine's value (StepRecord::fd):
  /// the gradient that arrived, before any hook on the output changed it. For a walk after the
  /// first, "the forward" is every op recorded before its root, the earlier walks' recorded ops
  /// included (a second derivative: loss_fn recomputes the gradient with create_graph). The
  /// recorder must be detached (a StateError). A ValueError if loss_fn's loss is not one float64
  /// number, if it records other ops or another loss than the recording, if the walk does not
  /// exist or the recording was cut short; a DTypeError if an op or leaf it moves is not float64.
  void check_with_finite_differences(const std::function<Variable()>& loss_fn, double eps = 1e-6, size_t walk = 0);

  /// The recording as JSON text (format "minigrad-backward-1", described in docs/02-autograd.md);
  /// `meta` is copied into it. Numbers are written as the shortest text that reads back as the
  /// same double, the non-finite ones as the strings "inf", "-inf" and "nan". A ValueError if a
  /// bound cut the recording short during a walk (the message says which).
  std::string json(const std::map<std::string, std::string>& meta = {}) const;
  /// Write json(meta) to `path` atomically.
  void save(const std::string& path, const std::map<std::string, std::string>& meta = {}) const;

  /// GraphObserver: keeps the op's inputs and output (outside a walk, past a bound: a ValueError).
  void recorded(Node& node, Tensor& out, const std::vector<Variable>& inputs) override;
  /// GraphObserver: a new WalkRecord (walks nest when a hook or a rule calls backward).
  void walk_started(bool create_graph) override;
  /// GraphObserver: a root's gradient, kept for its step.
  void seeded(const Node& node, const Tensor& grad) override;
  /// GraphObserver: a SendRecord on the sender's step.
  void sent(const Node& from, size_t input, const Tensor& returned, const Tensor& fitted, const Node& to) override;
  /// GraphObserver: a new StepRecord (past a bound the recording stops here instead of throwing).
  void arrived(const Node& node, const Tensor& summed, const Tensor& after_hooks) override;
  /// GraphObserver: the step ran; a leaf's .grad() after the sum.
  void ran(const Node& node) override;
  /// GraphObserver: the walk's end (called from a destructor: never throws).
  void walk_finished(bool completed) noexcept override;

 private:
  TensorRecord keep(const Tensor& t);
  int64_t node_id(const Node& n);
  StepRecord* step_of(const Node& n);
  void past_bound(const std::string& why);
  void check_complete(const char* op) const;

  RecorderOptions options_;
  bool attached_ = false;
  std::vector<NodeRecord> nodes_;
  std::unordered_map<const Node*, int64_t> ids_;
  std::vector<std::shared_ptr<Node>> alive_;           // the recorded nodes, kept so their addresses stay theirs
  std::vector<std::shared_ptr<VariableImpl>> leaves_;  // per node id: the leaf of an accumulator
  std::vector<WalkRecord> walks_;
  std::vector<std::tuple<size_t, int64_t, TensorRecord>> seeds_;  // (walk, node, seed) until its step
  std::vector<size_t> active_;                                    // the walks running now, innermost last
  std::string truncated_;  // why the recording stopped inside a walk ("" while it has not)
  int64_t forward_ops_ = 0;
  int64_t numbers_ = 0;
};

/// The derivative rule docs/03-writing-an-op.md's table points at for `op`, and where it is written
/// (the comment above the function that table row names, compiled in from cmake/op_rules_gen.cpp):
/// {rule, where}, both "" for an op the table does not list.
std::pair<std::string, std::string> derivative_rule(const std::string& op);
/// Every op in that table, in its order.
std::vector<std::string> ops_with_rules();

}  // namespace mg::inspect
