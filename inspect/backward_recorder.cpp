#include "minigrad/inspect/backward_recorder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <nlohmann/json.hpp>

#include "minigrad/tensor/atomic_file.h"
#include "minigrad/tensor/ops.h"

namespace mg::inspect {
namespace {
using json = nlohmann::ordered_json;

// The logical row-major index `flat` of a tensor of `shape` as one index per dim.
std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return index;
}

// Where entry `flat` (row-major) of `t` sits in its storage, in elements from data<double>().
int64_t element_offset(const Tensor& t, int64_t flat) {
  const std::vector<int64_t> index = unravel(flat, t.shape());
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
  return offset;
}

// Whether writing one storage element of `t` changes one logical entry only (no stride-0 dim).
bool one_entry_per_element(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.shape()[d] > 1) return false;
  return true;
}

json shape_json(const Shape& s) { return json(std::vector<int64_t>(s.begin(), s.end())); }

// A number for the JSON: the shortest text that reads back as the same double; the
// non-finite ones, which JSON has no numbers for, as strings ("-inf" is a masked score).
json number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

json tensor_json(const TensorRecord& t) {
  json j = {{"shape", shape_json(t.shape)},
            {"norm", number(t.norm)},
            {"min", number(t.min)},
            {"max", number(t.max)},
            {"full", t.full}};
  if (t.full) {
    json v = json::array();
    for (double x : t.values) v.push_back(number(x));
    j["values"] = std::move(v);
    return j;
  }
  json cells = json::array();
  for (double x : t.heatmap) cells.push_back(number(x));
  j["heat"] = {{"rows", t.heat_rows}, {"cols", t.heat_cols}, {"cells", std::move(cells)}};
  json top = json::array();
  for (const auto& [index, value] : t.top) top.push_back({{"index", index}, {"value", number(value)}});
  j["top"] = std::move(top);
  return j;
}

// Moves one entry of the output of the forward's op number `target` by `delta` as the op is
// recorded, before anything reads it; counts the ops and checks they are the recorded ones.
class Perturbation : public GraphObserver {
 public:
  Perturbation(const std::vector<NodeRecord>& nodes, const std::vector<int64_t>& by_index)
      : nodes_(nodes), by_index_(by_index) {}
  void aim(int64_t target, int64_t flat, double delta) { target_ = target, flat_ = flat, delta_ = delta, count_ = 0; }
  int64_t count() const { return count_; }
  void recorded(Node& node, Tensor& out, const std::vector<Variable>&) override {
    const int64_t k = count_++;
    MG_CHECK(k < static_cast<int64_t>(by_index_.size()), ValueError,
             "BackwardRecorder::check_with_finite_differences: loss_fn recorded more ops than the recorded forward "
             "({}); it must rebuild the same forward",
             by_index_.size());
    const NodeRecord& want = nodes_[static_cast<size_t>(by_index_[static_cast<size_t>(k)])];
    MG_CHECK(node.name == want.op && out.shape() == want.out_shape, ValueError,
             "BackwardRecorder::check_with_finite_differences: loss_fn's op {} is '{}' {}, but the recorded forward's "
             "is '{}' {}; it must rebuild the same forward",
             k, node.name, shape_str(out.shape()), want.op, shape_str(want.out_shape));
    if (k != target_) return;
    MG_CHECK(out.dtype() == DType::Float64, DTypeError,
             "BackwardRecorder::check_with_finite_differences: op '{}' computed {}; finite differences need a float64 "
             "forward (build the model in float64)",
             node.name, dtype_name(out.dtype()));
    out.data<double>()[element_offset(out, flat_)] += delta_;
  }

 private:
  const std::vector<NodeRecord>& nodes_;
  const std::vector<int64_t>& by_index_;
  int64_t target_ = -1, flat_ = 0, count_ = 0;
  double delta_ = 0;
};

// Attach an observer for a scope, putting back the one before.
struct Attached {
  GraphObserver* before;
  explicit Attached(GraphObserver* o) : before(set_graph_observer(o)) {}
  ~Attached() { set_graph_observer(before); }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;
};
}  // namespace

BackwardRecorder::BackwardRecorder(RecorderOptions options) : options_(std::move(options)) {
  const RecorderOptions& o = options_;
  MG_CHECK(o.max_nodes >= 1 && o.max_numbers >= 1 && o.full_values >= 0 && o.heatmap_size >= 1 && o.top_entries >= 0,
           ValueError,
           "BackwardRecorder: max_nodes, max_numbers and heatmap_size must be >= 1 and full_values, top_entries >= 0, "
           "got {}, {}, {}, {}, {}",
           o.max_nodes, o.max_numbers, o.heatmap_size, o.full_values, o.top_entries);
  for (const auto& [name, v] : o.names)
    MG_CHECK(v.defined(), StateError, "BackwardRecorder: the variable named '{}' is undefined", name);
  MG_CHECK(graph_observer() == nullptr, StateError,
           "BackwardRecorder: another observer is already attached to this thread (one recorder at a time); "
           "detach it first");
  set_graph_observer(this);
  attached_ = true;
}

BackwardRecorder::~BackwardRecorder() { detach(); }

void BackwardRecorder::detach() {
  if (!attached_) return;
  if (graph_observer() == this) set_graph_observer(nullptr);
  attached_ = false;
}

TensorRecord BackwardRecorder::keep(const Tensor& t) {
  TensorRecord r;
  if (!t.defined()) return r;
  r.shape = t.shape();
  const Tensor c = t.to(DType::Float64).contiguous();
  const int64_t n = c.numel();
  const double* p = c.data<double>();
  double sq = 0;  // a NaN makes the norm NaN; min and max are over the other entries
  r.min = INFINITY, r.max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    sq += p[i] * p[i];
    if (!std::isnan(p[i])) r.min = std::min(r.min, p[i]), r.max = std::max(r.max, p[i]);
  }
  if (r.min > r.max) r.min = r.max = 0;  // empty, or every entry NaN
  r.norm = std::sqrt(sq);
  int64_t kept = 0;
  if (n <= options_.full_values) {
    r.full = true;
    r.values.assign(p, p + n);
    kept = n;
  } else {
    const int64_t cols = c.dim() == 0 ? 1 : c.shape().back(), rows = n / std::max<int64_t>(cols, 1);
    r.heat_rows = std::min(rows, options_.heatmap_size), r.heat_cols = std::min(cols, options_.heatmap_size);
    r.heatmap.assign(static_cast<size_t>(r.heat_rows * r.heat_cols), 0.0);
    for (int64_t hr = 0; hr < r.heat_rows; ++hr)
      for (int64_t hc = 0; hc < r.heat_cols; ++hc) {
        const int64_t r0 = hr * rows / r.heat_rows, r1 = (hr + 1) * rows / r.heat_rows;
        const int64_t c0 = hc * cols / r.heat_cols, c1 = (hc + 1) * cols / r.heat_cols;
        double s = 0;
        for (int64_t i = r0; i < r1; ++i)
          for (int64_t j = c0; j < c1; ++j) s += p[i * cols + j];
        r.heatmap[static_cast<size_t>(hr * r.heat_cols + hc)] = s / static_cast<double>((r1 - r0) * (c1 - c0));
      }
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min(n, options_.top_entries);
    auto magnitude = [&](int64_t i) { return std::isnan(p[i]) ? INFINITY : std::abs(p[i]); };  // NaN first
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      const double x = magnitude(a), y = magnitude(b);
      return x > y || (x == y && a < b);  // ties by position, so the choice is stable
    });
    for (int64_t i = 0; i < k; ++i) r.top.emplace_back(unravel(order[i], r.shape), p[order[i]]);
    kept = static_cast<int64_t>(r.heatmap.size()) + k * (static_cast<int64_t>(r.shape.size()) + 1);
  }
  numbers_ += kept;
  if (numbers_ > options_.max_numbers)
    past_bound(fmt::format(
        "the recording would hold {} numbers, past its bound of {} (RecorderOptions::max_numbers; a {} tensor was the "
        "last); record a smaller model or raise the bound",
        numbers_, options_.max_numbers, shape_str(r.shape)));
  return r;
}

int64_t BackwardRecorder::node_id(const Node& n) {
  if (const auto it = ids_.find(&n); it != ids_.end()) return it->second;
  const int64_t id = static_cast<int64_t>(nodes_.size());
  NodeRecord r;
  r.id = id, r.op = n.name, r.out_shape = n.out_shape;
  std::shared_ptr<VariableImpl> leaf;
  if (const auto* acc = dynamic_cast<const AccumulateGrad*>(&n)) leaf = acc->leaf.lock();
  if (leaf) {
    r.op = "leaf";
    r.label = leaf->name.empty() ? "leaf" : leaf->name;
    for (const auto& [name, v] : options_.names)
      if (v.impl() == leaf) r.label = name;
    r.out_shape = leaf->data.shape();
    r.value = keep(leaf->data);
  } else {
    const auto [rule, where] = derivative_rule(n.name);
    r.rule = rule, r.where = where;
  }
  nodes_.push_back(std::move(r));
  alive_.push_back(const_cast<Node&>(n).shared_from_this());  // the graph may drop it; its address stays ours
  leaves_.push_back(std::move(leaf));
  ids_[&n] = id;  // last: keep() above may throw, and then no id may point past the records
  return id;
}

void BackwardRecorder::recorded(Node& node, Tensor& out, const std::vector<Variable>& inputs) {
  if (!truncated_.empty()) return;
  if (forward_ops_ >= options_.max_nodes)
    return past_bound(
        fmt::format("more than {} ops were recorded (RecorderOptions::max_nodes), the last '{}' {}; "
                    "record a smaller model or raise the bound",
                    options_.max_nodes, node.name, shape_str(out.shape())));
  const int64_t id = node_id(node);
  std::vector<NodeRecord::Input> ins;
  bool view = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    NodeRecord::Input in;
    if (inputs[i].defined()) {
      in.shape = inputs[i].shape();
      view = view || inputs[i].data().storage() == out.storage();
    }
    in.from = i < node.next.size() && node.next[i] ? node_id(*node.next[i]) : -1;
    // a constant (a mask, the data) keeps its value here; a recorded input's is on its node
    if (inputs[i].defined() && (in.from < 0 || !nodes_[static_cast<size_t>(in.from)].value))
      in.value = keep(inputs[i].data());
    ins.push_back(std::move(in));
  }
  NodeRecord& r = nodes_[static_cast<size_t>(id)];
  r.inputs = std::move(ins);
  r.view = view || !one_entry_per_element(out);
  r.value = keep(out);
  r.forward_index = forward_ops_++;
}

// Inside a walk a bound does not throw (the engine would stop half way, some .grad() summed and
// some not): the recording stops there, and json(), save() and check_with_finite_differences say
// why. Outside one (a forward op) it throws, before anyone has used the op's output.
void BackwardRecorder::past_bound(const std::string& why) {
  if (active_.empty()) throw ValueError("BackwardRecorder: " + why);
  if (truncated_.empty()) truncated_ = why;
}

void BackwardRecorder::check_complete(const char* op) const {
  MG_CHECK(truncated_.empty(), ValueError, "BackwardRecorder::{}: the recording was cut short: {}", op, truncated_);
}

void BackwardRecorder::walk_started(bool create_graph) {
  if (!truncated_.empty()) return;
  active_.push_back(walks_.size());
  walks_.push_back({create_graph, false, {}});
}

void BackwardRecorder::seeded(const Node& node, const Tensor& grad) {
  if (truncated_.empty() && !active_.empty()) seeds_.emplace_back(active_.back(), node_id(node), keep(grad));
}

// The step of `n` in the innermost walk: the node that runs is that walk's last step (a walk a hook
// starts inside it has steps of its own). Null once the recording stopped.
StepRecord* BackwardRecorder::step_of(const Node& n) {
  if (!truncated_.empty() || active_.empty()) return nullptr;
  std::vector<StepRecord>& steps = walks_[active_.back()].steps;
  const auto it = ids_.find(&n);
  if (steps.empty() || it == ids_.end() || steps.back().node != it->second) return nullptr;
  return &steps.back();
}

void BackwardRecorder::arrived(const Node& node, const Tensor& summed, const Tensor& after_hooks) {
  if (!truncated_.empty() || active_.empty()) return;
  WalkRecord& w = walks_[active_.back()];
  if (static_cast<int64_t>(w.steps.size()) >= options_.max_nodes)
    return past_bound(fmt::format(
        "walk {} ran more than {} nodes (RecorderOptions::max_nodes); record a smaller model or raise the bound",
        active_.back() + 1, options_.max_nodes));
  StepRecord s;
  s.node = node_id(node);
  for (const auto& [walk, id, g] : seeds_)
    if (walk == active_.back() && id == s.node) s.seed = g;
  s.arrived = keep(summed);
  const bool replaced = after_hooks.storage() != summed.storage() || after_hooks.offset() != summed.offset() ||
                        after_hooks.strides() != summed.strides();
  if (replaced) s.after_hooks = keep(after_hooks);
  const std::shared_ptr<VariableImpl>& leaf = leaves_[static_cast<size_t>(s.node)];
  s.hooks = static_cast<int64_t>(node.grad_hooks.size() + (leaf ? leaf->grad_hooks.size() : 0));
  const Tensor g = summed.to(DType::Float64).contiguous();  // before hooks: what finite differences measure
  const double* p = g.data<double>();
  for (int64_t i = 0; i < g.numel(); ++i)
    if (s.probe < 0 || std::abs(p[i]) > std::abs(s.probe_value)) s.probe = i, s.probe_value = p[i];
  if (truncated_.empty()) w.steps.push_back(std::move(s));
}

void BackwardRecorder::sent(const Node& from, size_t input, const Tensor& returned, const Tensor& fitted,
                            const Node& to) {
  StepRecord* s = step_of(from);
  if (!s) return;
  SendRecord r;
  r.input = static_cast<int64_t>(input);
  r.to = node_id(to);
  r.returned = keep(returned);
  r.fitted = keep(fitted);
  r.broadcast_undone = returned.shape() != fitted.shape();
  if (truncated_.empty()) s->sends.push_back(std::move(r));
}

void BackwardRecorder::ran(const Node& node) {
  StepRecord* s = step_of(node);
  if (!s) return;
  s->ran = true;
  if (const std::shared_ptr<VariableImpl>& leaf = leaves_[static_cast<size_t>(s->node)]; leaf && leaf->grad.defined())
    s->leaf_grad = keep(leaf->grad);
}

void BackwardRecorder::walk_finished(bool completed) noexcept {
  if (active_.empty()) return;  // it started after the recording stopped
  walks_[active_.back()].completed = completed && truncated_.empty();
  std::erase_if(seeds_, [&](const auto& seed) { return std::get<0>(seed) == active_.back(); });
  active_.pop_back();
}

int64_t BackwardRecorder::id_of(const Variable& v) const {
  MG_CHECK(v.defined(), StateError, "BackwardRecorder::id_of: the variable is undefined");
  const Node* n = v.impl()->grad_fn ? v.impl()->grad_fn.get() : v.impl()->accumulator.lock().get();
  const auto it = n ? ids_.find(n) : ids_.end();
  MG_CHECK(it != ids_.end(), ValueError,
           "BackwardRecorder::id_of: this {} variable {} was not recorded (made before the recorder was attached, "
           "or no backward reached it)",
           v.is_leaf() ? "leaf" : "non-leaf", shape_str(v.shape()));
  return it->second;
}

void BackwardRecorder::check_with_finite_differences(const std::function<Variable()>& loss_fn, double eps,
                                                     size_t walk) {
  MG_CHECK(!attached_, StateError,
           "BackwardRecorder::check_with_finite_differences: detach() the recorder first (its forward runs would be "
           "recorded too)");
  MG_CHECK(loss_fn != nullptr, ValueError, "BackwardRecorder::check_with_finite_differences: no loss function");
  MG_CHECK(eps > 0 && std::isfinite(eps), ValueError,
           "BackwardRecorder::check_with_finite_differences: eps must be finite and > 0, got {}", eps);
  MG_CHECK(walk < walks_.size(), ValueError,
           "BackwardRecorder::check_with_finite_differences: walk {} does not exist ({} recorded)", walk,
           walks_.size());
  check_complete("check_with_finite_differences");
  // The forward: the ops recorded before the walk's root was, in order.
  WalkRecord& w = walks_[walk];
  int64_t root = -1;
  for (const StepRecord& s : w.steps)
    if (s.seed) root = s.node;
  MG_CHECK(root >= 0 && nodes_[static_cast<size_t>(root)].forward_index >= 0 &&
               nodes_[static_cast<size_t>(root)].out_shape.empty(),
           ValueError,
           "BackwardRecorder::check_with_finite_differences: walk {} did not start from a recorded 0-dim loss", walk);
  std::vector<int64_t> by_index;
  for (const NodeRecord& n : nodes_)
    if (n.forward_index >= 0 && n.forward_index <= nodes_[static_cast<size_t>(root)].forward_index) {
      if (static_cast<int64_t>(by_index.size()) <= n.forward_index) by_index.resize(n.forward_index + 1, -1);
      by_index[static_cast<size_t>(n.forward_index)] = n.id;
    }
  Perturbation perturb(nodes_, by_index);
  const NodeRecord& root_node = nodes_[static_cast<size_t>(root)];
  MG_CHECK(
      root_node.value && root_node.value->full, ValueError,
      "BackwardRecorder::check_with_finite_differences: the loss's value was not kept (RecorderOptions::full_values "
      "is 0)");
  const double recorded_loss = root_node.value->values.at(0);
  auto run = [&](int64_t target, int64_t flat, double delta) {
    const Attached attached(&perturb);
    perturb.aim(target, flat, delta);
    const Variable loss = loss_fn();
    MG_CHECK(loss.defined() && loss.numel() == 1 && loss.dtype() == DType::Float64, ValueError,
             "BackwardRecorder::check_with_finite_differences: loss_fn must return a one-element float64 loss, got {}",
             loss.defined() ? std::string(dtype_name(loss.dtype())) + " " + shape_str(loss.shape())
                            : std::string("undefined"));
    MG_CHECK(perturb.count() == static_cast<int64_t>(by_index.size()), ValueError,
             "BackwardRecorder::check_with_finite_differences: loss_fn recorded {} ops, the recorded forward {}; it "
             "must rebuild the same forward",
             perturb.count(), by_index.size());
    return loss.item();
  };
  const double again = run(-1, 0, 0);
  MG_CHECK(std::memcmp(&again, &recorded_loss, sizeof(double)) == 0, ValueError,
           "BackwardRecorder::check_with_finite_differences: loss_fn gives {:.17g}, the recorded forward gave {:.17g}; "
           "it must rebuild the same forward, deterministically (no dropout, the same data)",
           again, recorded_loss);
  for (StepRecord& s : w.steps) {
    const NodeRecord& n = nodes_[static_cast<size_t>(s.node)];
    if (s.probe < 0) continue;
    const double engine = s.probe_value;  // after the hooks: what the rule used
    double up = 0, down = 0;
    if (const std::shared_ptr<VariableImpl>& leaf = leaves_[static_cast<size_t>(s.node)]) {
      Tensor& data = leaf->data;
      if (!one_entry_per_element(data)) continue;  // an expanded leaf: one number stands for many entries
      MG_CHECK(data.dtype() == DType::Float64, DTypeError,
               "BackwardRecorder::check_with_finite_differences: leaf '{}' is {}; finite differences need float64",
               n.label, dtype_name(data.dtype()));
      double* at = data.data<double>() + element_offset(data, s.probe);
      const double keep_value = *at;
      *at = keep_value + eps;
      try {
        up = run(-1, 0, 0);
        *at = keep_value - eps;
        down = run(-1, 0, 0);
      } catch (...) {
        *at = keep_value;
        throw;
      }
      *at = keep_value;
    } else {
      if (n.forward_index < 0 || n.forward_index >= static_cast<int64_t>(by_index.size()) || n.view) continue;
      up = run(n.forward_index, s.probe, eps);
      down = run(n.forward_index, s.probe, -eps);
    }
    s.fd = FdCheck{unravel(s.probe, s.arrived.shape), engine, (up - down) / (2 * eps), eps};
  }
}

std::string BackwardRecorder::json(const std::map<std::string, std::string>& meta) const {
  check_complete("json");
  nlohmann::ordered_json j;
  j["format"] = "minigrad-backward-1";
  j["meta"] = meta;
  j["bounds"] = {{"max_nodes", options_.max_nodes},
                 {"max_numbers", options_.max_numbers},
                 {"full_values", options_.full_values},
                 {"heatmap_size", options_.heatmap_size},
                 {"top_entries", options_.top_entries}};
  j["numbers"] = numbers_;
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const NodeRecord& n : nodes_) {
    // labels are read now: Variable::set_name may have named an op after it ran
    const std::string label =
        n.op == "leaf" ? n.label : (alive_[static_cast<size_t>(n.id)] ? alive_[static_cast<size_t>(n.id)]->label : "");
    nlohmann::ordered_json o = {{"id", n.id},
                                {"op", n.op},
                                {"label", label},
                                {"rule", n.rule},
                                {"where", n.where},
                                {"out_shape", shape_json(n.out_shape)},
                                {"forward_index", n.forward_index},
                                {"view", n.view}};
    o["value"] = n.value ? tensor_json(*n.value) : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json ins = nlohmann::ordered_json::array();
    for (const NodeRecord::Input& in : n.inputs)
      ins.push_back({{"shape", shape_json(in.shape)},
                     {"from", in.from},
                     {"value", in.value ? tensor_json(*in.value) : nlohmann::ordered_json(nullptr)}});
    o["inputs"] = std::move(ins);
    nodes.push_back(std::move(o));
  }
  j["nodes"] = std::move(nodes);
  nlohmann::ordered_json walks = nlohmann::ordered_json::array();
  for (const WalkRecord& w : walks_) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const StepRecord& s : w.steps) {
      nlohmann::ordered_json o = {
          {"node", s.node}, {"arrived", tensor_json(s.arrived)}, {"hooks", s.hooks}, {"ran", s.ran}};
      if (s.after_hooks) o["after_hooks"] = tensor_json(*s.after_hooks);
      if (s.seed) o["seed"] = tensor_json(*s.seed);
      nlohmann::ordered_json sends = nlohmann::ordered_json::array();
      for (const SendRecord& r : s.sends)
        sends.push_back({{"input", r.input},
                         {"to", r.to},
                         {"returned", tensor_json(r.returned)},
                         {"fitted", tensor_json(r.fitted)},
                         {"broadcast_undone", r.broadcast_undone}});
      o["sends"] = std::move(sends);
      if (s.leaf_grad) o["leaf_grad"] = tensor_json(*s.leaf_grad);
      if (s.probe >= 0) o["probe"] = {{"index", unravel(s.probe, s.arrived.shape)}, {"value", number(s.probe_value)}};
      if (s.fd)
        o["fd"] = {{"index", s.fd->index},
                   {"engine", number(s.fd->engine)},
                   {"numeric", number(s.fd->numeric)},
                   {"eps", s.fd->eps}};
      steps.push_back(std::move(o));
    }
    walks.push_back({{"create_graph", w.create_graph}, {"completed", w.completed}, {"steps", std::move(steps)}});
  }
  j["walks"] = std::move(walks);
  return j.dump();
}

void BackwardRecorder::save(const std::string& path, const std::map<std::string, std::string>& meta) const {
  write_text_file(path, json(meta), "BackwardRecorder::save");
}

}  // namespace mg::inspect
