#pragma once
// nn::Module: the base of every layer and model. A module owns named parameters (ordinary leaf
// Variables with requires_grad) and named submodules, so a whole model can be walked as a tree:
//
//   struct Net : nn::Callable<Net> {
//     nn::Linear fc1{2, 64}, fc2{64, 2};
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     Variable forward(const Variable& x) const { return fc2(relu(fc1(x))); }
//     std::string type_name() const override { return "Net"; }
//   };
//   Variable y = net(x);                                  // forward, with hooks (see nn::call)
//   for (auto& [name, p] : net.named_parameters()) ...   // "fc1.weight", "fc1.bias", ...
//
// Parameters, buffers and submodules are plain members registered by reference: the registry
// points at the members, so the member and the registry are one object. Assigning to a member
// (tying a head to an embedding: `head.weight = tok.weight`), Module::to(), loading and apply()
// all change what both see. That is why a Module is neither copied nor moved: it stays where it
// was made, so every pointer into it stays true. Ownership is said in the code instead: a module
// is a member of its model, an element of a container that owns it (Sequential, ModuleList,
// ModuleDict, through shared_ptr), or held by a std::unique_ptr. Making one is still one line,
// `auto m = nn::Linear(2, 3);` or a factory returning `nn::Linear(...)`: C++17 constructs the
// result where it goes, with no move. docs/04 ("Why modules do not move") says what was measured.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "minigrad/autograd/ops.h"
#include "minigrad/autograd/variable.h"

namespace mg::nn {

class Module;

/// A forward-pre hook: called before a module's forward with its inputs, which it may replace
/// (same count). PyTorch's register_forward_pre_hook.
using ForwardPreHook = std::function<void(const Module& module, std::vector<Variable>& inputs)>;
/// A forward hook: called after a module's forward with its inputs and outputs, which it may
/// replace (same count). PyTorch's register_forward_hook.
using ForwardHook =
    std::function<void(const Module& module, const std::vector<Variable>& inputs, std::vector<Variable>& outputs)>;

/// What register_forward_hook returns: remove() takes the hook off again (PyTorch's
/// RemovableHandle). Removing twice, or after the module is gone, does nothing; dropping the
/// handle leaves the hook in place.
class HookHandle {
 public:
  HookHandle() = default;
  /// Take the hook off its module.
  void remove();

 private:
  friend class Module;
  HookHandle(std::weak_ptr<Module*> module, int64_t id) : module_(std::move(module)), id_(id) {}
  std::weak_ptr<Module*> module_;  // the module's box (Module::self_), expired once it is gone
  int64_t id_ = -1;
};

class Module {
 public:
  Module();
  virtual ~Module();
  /// Not copyable, not movable: the registry points at this object's members (see above).
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  /// Add the parameter held by the member `slot`: the slot becomes a leaf Variable holding `data`
  /// (requires_grad by default), and the registry reads the slot from then on, so assigning
  /// another Variable to it (weight tying) is seen by parameters(), optimizers and save/load.
  Variable& register_parameter(const std::string& name, Variable& slot, Tensor data, bool requires_grad = true);
  /// Add a parameter that is not a member: the module keeps it; read it with parameter(name).
  void register_parameter(const std::string& name, Tensor data, bool requires_grad = true);
  /// Add the buffer held by the member `slot` (state saved with the model but not trained, e.g.
  /// running statistics): the slot takes `data`, and to() and load() change the slot itself.
  Tensor& register_buffer(const std::string& name, Tensor& slot, Tensor data);
  /// Add a buffer that is not a member: the module keeps it; read it with buffer(name).
  void register_buffer(const std::string& name, Tensor data);
  /// Add a submodule under `name`; returns it. The module must outlive this one (a member).
  template <class M>
  M& register_module(const std::string& name, M& module) {
    add_child(name, &module);
    return module;
  }

  /// Every parameter with its dotted path ("blocks.0.attn.w_q.weight"), in registration order.
  /// A parameter reached under two names (tied weights, a module registered twice) is listed
  /// once, under the first, unless remove_duplicate is false (as in PyTorch). A slot set to an
  /// undefined Variable (`bias = Variable()`) is skipped.
  std::vector<std::pair<std::string, Variable>> named_parameters(bool recurse = true,
                                                                 bool remove_duplicate = true) const;
  /// The parameters without names.
  std::vector<Variable> parameters(bool recurse = true) const;
  /// Buffers with dotted paths (undefined slots skipped).
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  /// Direct submodules with their names.
  std::vector<std::pair<std::string, Module*>> named_children() const { return children_; }
  /// Direct submodules.
  std::vector<Module*> children() const;
  /// This module and every descendant, with dotted paths ("" for this one).
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The parameter or submodule path `name` ("blocks.0.attn.w_q.weight"); a ValueError if absent.
  Variable parameter(const std::string& name) const;
  /// The buffer at path `name` ("bn.running_mean"), as the registry holds it now (after to() or a
  /// load too); a ValueError if absent.
  Tensor buffer(const std::string& name) const;

  /// Training mode (dropout active) for this module and its descendants.
  virtual void train(bool on = true);
  /// Evaluation mode: train(false).
  void eval() { train(false); }
  /// Whether in training mode.
  bool is_training() const { return training_; }
  /// Clear the gradient of every parameter.
  void zero_grad();
  /// Total number of parameter elements.
  int64_t num_parameters() const;
  /// Call fn on this module and every descendant (children first, like torch's apply).
  void apply(const std::function<void(Module&)>& fn);
  /// Convert every parameter and buffer to `dtype` in place (float64 for gradcheck).
  void to(DType dtype);

  /// Call `hook` before every forward of this module (see ForwardPreHook).
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  /// Call `hook` after every forward of this module (see ForwardHook). A MultiheadAttention with
  /// a forward hook computes its weights and scores (the hook's outputs 1 and 2).
  HookHandle register_forward_hook(ForwardHook hook);
  /// Whether any forward or forward-pre hook is registered on this module.
  bool has_forward_hooks() const { return !pre_hooks_.empty() || !forward_hooks_.empty(); }
  /// Whether calling this module runs its hooks: true for an nn::Callable; a module derived from
  /// Module alone has no call that could, so registering a hook on it is an error, not a hook
  /// that never fires.
  virtual bool runs_hooks() const { return false; }
  /// Run the forward-pre hooks on `inputs` (nn::call does): each may replace inputs, not add,
  /// drop or undefine them.
  void run_forward_pre_hooks(std::vector<Variable>& inputs) const;
  /// Run the forward hooks on `outputs`, given the `inputs` (nn::call does): each may replace
  /// outputs, not add, drop or undefine them.
  void run_forward_hooks(const std::vector<Variable>& inputs, std::vector<Variable>& outputs) const;

  /// The class name shown in the summary ("Linear").
  virtual std::string type_name() const = 0;
  /// The constructor arguments shown in the summary ("in_features=2, out_features=64, bias=true").
  virtual std::string extra_repr() const { return ""; }
  /// The module tree with parameter shapes and counts, like printing a PyTorch model.
  std::string summary() const;
  /// The module this one was first registered in (null for a model's root, or once the parent
  /// is gone).
  const Module* parent() const {
    const std::shared_ptr<Module*> p = parent_.lock();
    return p ? *p : nullptr;
  }
  /// This module's dotted path from the root of its model ("blocks.2.attn"; "" for a root).
  std::string path() const;
  /// Expires when this module is destroyed: whatever keeps a pointer to a module (a capture)
  /// checks it before touching the module again.
  std::weak_ptr<void> lifetime() const { return life_; }

 protected:
  void add_child(const std::string& name, Module* child);

 private:
  friend class HookHandle;
  void check_unused(const std::string& name, const char* what) const;
  void check_runs_hooks(const char* what) const;
  void summary_into(std::string& out, int indent) const;
  // Each registry entry points at its slot: a member, or an element of owned_params_ /
  // owned_buffers_ (deques: their elements never move as the deque grows).
  std::vector<std::pair<std::string, Variable*>> params_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::deque<Variable> owned_params_;
  std::deque<Tensor> owned_buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::pair<int64_t, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<int64_t, ForwardHook>> forward_hooks_;
  // Hook handles and children hold a weak_ptr to this box, which expires with the module.
  std::shared_ptr<Module*> self_ = std::make_shared<Module*>(this);
  std::weak_ptr<Module*> parent_;                         // the module this one was first registered in
  std::string name_in_parent_;                            // and its name there
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // lifetime()
  bool training_ = true;
};

/// Prints module.summary().
std::ostream& operator<<(std::ostream& os, const Module& module);

// What hooks see of a forward's arguments and result: the Variables in them, in order, and back.
// An argument of another type (options, a cache pointer) passes through unseen. A module whose
// forward returns another type declares the pair next to that type (AttentionOutput does).
/// A Variable: itself.
inline void hook_values_into(std::vector<Variable>& out, const Variable& v) { out.push_back(v); }
/// A Tensor (token ids: Embedding, GPT): a Variable that needs no gradient (undefined for an
/// undefined tensor, an optional mask left out).
inline void hook_values_into(std::vector<Variable>& out, const Tensor& t) {
  out.push_back(t.defined() ? Variable(t) : Variable());
}
/// A list of Variables: each.
inline void hook_values_into(std::vector<Variable>& out, const std::vector<Variable>& vs) {
  out.insert(out.end(), vs.begin(), vs.end());
}
/// A pair of Variables: both.
inline void hook_values_into(std::vector<Variable>& out, const std::pair<Variable, Variable>& p) {
  out.push_back(p.first);
  out.push_back(p.second);
}
/// An (output, state) pair: both.
inline void hook_values_into(std::vector<Variable>& out, const std::tuple<Variable, Variable>& s) {
  out.push_back(std::get<0>(s));
  out.push_back(std::get<1>(s));
}
/// An optional (h, c) state (LSTM, LSTMCell): two Variables, undefined when there is none.
inline void hook_values_into(std::vector<Variable>& out, const std::optional<std::tuple<Variable, Variable>>& s) {
  hook_values_into(out, s ? *s : std::tuple<Variable, Variable>());
}
/// LSTM's (output, (h, c)): the three.
inline void hook_values_into(std::vector<Variable>& out,
                             const std::tuple<Variable, std::tuple<Variable, Variable>>& s) {
  out.push_back(std::get<0>(s));
  hook_values_into(out, std::get<1>(s));
}
/// Any other argument: nothing for the hooks.
template <class T>
void hook_values_into(std::vector<Variable>&, const T&) {}

/// Put a Variable back from hooked values (`at` counts how many were read).
inline void set_hook_values(Variable& v, const std::vector<Variable>& in, size_t& at) { v = in.at(at++); }
/// Put token ids back.
inline void set_hook_values(Tensor& t, const std::vector<Variable>& in, size_t& at) {
  const Variable& v = in.at(at++);
  t = v.defined() ? v.data() : Tensor();
}
/// Put a list of Variables back.
inline void set_hook_values(std::vector<Variable>& vs, const std::vector<Variable>& in, size_t& at) {
  for (Variable& v : vs) v = in.at(at++);
}
/// Put a pair back.
inline void set_hook_values(std::pair<Variable, Variable>& p, const std::vector<Variable>& in, size_t& at) {
  p.first = in.at(at++);
  p.second = in.at(at++);
}
/// Put a pair back.
inline void set_hook_values(std::tuple<Variable, Variable>& s, const std::vector<Variable>& in, size_t& at) {
  std::get<0>(s) = in.at(at++);
  std::get<1>(s) = in.at(at++);
}
/// Put an optional state back: it stays absent unless a hook gave it values.
inline void set_hook_values(std::optional<std::tuple<Variable, Variable>>& s, const std::vector<Variable>& in,
                            size_t& at) {
  std::tuple<Variable, Variable> v;
  set_hook_values(v, in, at);
  if (std::get<0>(v).defined() || std::get<1>(v).defined()) s = v;
}
/// Put LSTM's (output, (h, c)) back.
inline void set_hook_values(std::tuple<Variable, std::tuple<Variable, Variable>>& s, const std::vector<Variable>& in,
                            size_t& at) {
  std::get<0>(s) = in.at(at++);
  set_hook_values(std::get<1>(s), in, at);
}
/// Any other argument: left as it was.
template <class T>
void set_hook_values(T&, const std::vector<Variable>&, size_t&) {}

/// While it lives, `module` is the innermost forward running on this thread: an mg::Error thrown
/// below names it and its place in the model ("in blocks.2.attn (MultiheadAttention): matmul: ...").
class ForwardScope {
 public:
  /// Enter `module`'s forward.
  explicit ForwardScope(const Module& module);
  /// Leave it.
  ~ForwardScope();
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;
};

/// Call `module.forward(args...)` the way PyTorch's Module.__call__ does: inside a ForwardScope,
/// with the forward-pre hooks run on the Variables among the arguments first (they may replace
/// them) and the forward hooks on the result after. Without hooks it is the forward and a scope.
/// Calling a Callable module, m(x), comes here; calling m.forward(x) skips both, as in PyTorch.
template <class M, class... Args>
auto call(M& module, Args&&... args) {
  ForwardScope scope(module);
  if (!module.has_forward_hooks()) return module.forward(std::forward<Args>(args)...);
  std::tuple<std::decay_t<Args>...> arguments(std::forward<Args>(args)...);  // copies the hooks may change
  std::vector<Variable> inputs;
  std::apply([&](const auto&... a) { (hook_values_into(inputs, a), ...); }, arguments);
  module.run_forward_pre_hooks(inputs);
  size_t at = 0;
  std::apply([&](auto&... a) { (set_hook_values(a, inputs, at), ...); }, arguments);
  auto run = [&] { return std::apply([&](const auto&... a) { return module.forward(a...); }, arguments); };
  std::vector<Variable> outputs;
  if constexpr (std::is_void_v<decltype(run())>) {  // a forward that returns nothing: hooks see no outputs
    run();
    module.run_forward_hooks(inputs, outputs);
    return;
  } else {
    auto out = run();
    hook_values_into(outputs, out);
    module.run_forward_hooks(inputs, outputs);
    at = 0;
    set_hook_values(out, outputs, at);
    return out;
  }
}

/// The base of a module that is called like a function, m(x) for m.forward(x), with its hooks
/// and errors that say where (nn::call). Derive from it naming your own class (the C++ way for
/// a base to reach the derived class's forward), and write forward as the plain computation:
///
///   struct Net : nn::Callable<Net> {
///     nn::Linear fc1{2, 64}, fc2{64, 2};
///     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
///     Variable forward(const Variable& x) const { return fc2(relu(fc1(x))); }
///     std::string type_name() const override { return "Net"; }
///   };
///   Net net;
///   Variable y = net(x);   // hooks of net, fc1 and fc2 all run
///
/// `Base` is Module unless the class derives from another module: RNN, GRU and LSTM derive from
/// Callable<RNN, RNNBase>, and a model that extends a library module names itself the same way,
/// `struct MyLinear : nn::Callable<MyLinear, nn::Linear>`, so that m(x) runs *its* forward (derived
/// from nn::Linear alone, m(x) would run Linear's).
///
/// Arguments of other types than Variable, Tensor and the state tuples pass by to forward unseen by
/// the hooks; forward takes its arguments by value or const reference (with hooks registered they
/// are copies the hooks may change). The Variables in a result type of your own are shown to hooks
/// once you declare hook_values_into/set_hook_values for it before the class that returns it (as
/// nn/attention.h does for AttentionOutput); without them the hooks see no outputs.
template <class Self, class Base = Module>
class Callable : public Base {
 public:
  using Base::Base;
  /// Default construction, when Base has one.
  Callable() = default;
  /// Run forward(args...) with hooks and errors that say where.
  template <class... Args>
  auto operator()(Args&&... args) const {
    return nn::call(static_cast<const Self&>(*this), std::forward<Args>(args)...);
  }
  /// The same for a module whose forward changes it (BatchNorm's running statistics).
  template <class... Args>
  auto operator()(Args&&... args) {
    return nn::call(static_cast<Self&>(*this), std::forward<Args>(args)...);
  }
  /// True: calling this module runs its hooks.
  bool runs_hooks() const override { return true; }
};

}  // namespace mg::nn
