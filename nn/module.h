#pragma once
// nn::Module: the base of every layer and model. A module owns named parameters (ordinary leaf
// Variables with requires_grad) and named submodules, so a whole model can be walked as a tree:
//
//   struct Net : nn::Module {
//     nn::Linear fc1{2, 64}, fc2{64, 2};
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     Variable forward(const Variable& x) { return fc2.forward(relu(fc1.forward(x))); }
//   };
//   for (auto& [name, p] : net.named_parameters()) ...   // "fc1.weight", "fc1.bias", ...
//
// Parameters, buffers and submodules are plain members registered by reference: the registry
// points at the members, so the member and the registry are one object. Assigning to a member
// (tying a head to an embedding: `head.weight = tok.weight`), Module::to(), loading and apply()
// all change what both see. A Module can therefore be neither copied nor moved. Containers that
// create modules at run time (Sequential, ModuleList) own them through shared_ptr.
#include <deque>
#include <functional>
#include <memory>
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
using ForwardHook = std::function<void(const Module& module, const std::vector<Variable>& inputs, std::vector<Variable>& outputs)>;

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
  HookHandle(Module* module, std::weak_ptr<void> life, int64_t id) : module_(module), life_(std::move(life)), id_(id) {}
  Module* module_ = nullptr;
  std::weak_ptr<void> life_;
  int64_t id_ = -1;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
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
  std::vector<std::pair<std::string, Variable>> named_parameters(bool recurse = true, bool remove_duplicate = true) const;
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

  /// The class name shown in the summary ("Linear").
  virtual std::string type_name() const = 0;
  /// The constructor arguments shown in the summary ("in_features=2, out_features=64, bias=true").
  virtual std::string extra_repr() const { return ""; }
  /// The module tree with parameter shapes and counts, like printing a PyTorch model.
  std::string summary() const;
  /// The module this one was first registered in (null for a model's root, or once the parent
  /// is gone), and the name it has there.
  const Module* parent() const { return parent_life_.expired() ? nullptr : parent_; }
  /// This module's dotted path from the root of its model ("blocks.2.attn"; "" for a root).
  std::string path() const;
  /// Expires when this module is destroyed: whatever keeps a pointer to a module (a capture)
  /// checks it before touching the module again.
  std::weak_ptr<void> lifetime() const { return life_; }

 protected:
  void add_child(const std::string& name, Module* child);

 private:
  friend class HookHandle;
  friend class ForwardCall;
  void check_unused(const std::string& name, const char* what) const;
  void summary_into(std::string& out, int indent) const;
  // Each registry entry points at its slot: a member, or an element of owned_params_ /
  // owned_buffers_ (deques: their elements never move).
  std::vector<std::pair<std::string, Variable*>> params_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::deque<Variable> owned_params_;
  std::deque<Tensor> owned_buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::pair<int64_t, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<int64_t, ForwardHook>> forward_hooks_;
  int64_t next_hook_id_ = 0;
  const Module* parent_ = nullptr;
  std::string name_in_parent_;
  std::weak_ptr<void> parent_life_;
  bool training_ = true;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

/// Prints module.summary().
std::ostream& operator<<(std::ostream& os, const Module& module);

// What hooks see of a forward's result: the Variables in it, in order, and back. A module whose
// forward returns another type declares the pair next to that type (AttentionOutput does).
/// A Variable result: itself.
inline std::vector<Variable> hook_values(const Variable& out) { return {out}; }
/// Put hooked values back into a Variable result.
inline void set_hook_values(Variable& out, const std::vector<Variable>& v) { out = v.at(0); }
/// An (output, state) pair (RNN, GRU, LSTMCell): both.
inline std::vector<Variable> hook_values(const std::tuple<Variable, Variable>& out) { return {std::get<0>(out), std::get<1>(out)}; }
/// Put hooked values back into an (output, state) pair.
inline void set_hook_values(std::tuple<Variable, Variable>& out, const std::vector<Variable>& v) { out = {v.at(0), v.at(1)}; }
/// LSTM's (output, (h, c)): the three.
inline std::vector<Variable> hook_values(const std::tuple<Variable, std::tuple<Variable, Variable>>& out) {
  return {std::get<0>(out), std::get<0>(std::get<1>(out)), std::get<1>(std::get<1>(out))};
}
/// Put hooked values back into LSTM's (output, (h, c)).
inline void set_hook_values(std::tuple<Variable, std::tuple<Variable, Variable>>& out, const std::vector<Variable>& v) {
  out = {v.at(0), {v.at(1), v.at(2)}};
}

/// One call of a module's forward, opened at the top of every forward in nn (PyTorch does the same
/// work in Module.__call__). It runs the forward-pre hooks on the inputs, runs the forward hooks
/// on what output() is given, and while it is open an mg::Error thrown anywhere below names the
/// module and its place in the model: "in blocks.2.attn (MultiheadAttention): matmul: ...".
///
///   Variable forward(const Variable& x) const {
///     ForwardCall call(*this, {x});
///     return call.output(linear(call.input(0), weight, bias));
///   }
///
/// A module of your own gets hooks and error paths by opening one the same way.
class ForwardCall {
 public:
  /// Open the call: runs `module`'s forward-pre hooks, which may replace the inputs.
  ForwardCall(const Module& module, std::vector<Variable> inputs);
  ~ForwardCall();
  ForwardCall(const ForwardCall&) = delete;
  ForwardCall& operator=(const ForwardCall&) = delete;

  /// Input i as the pre-hooks left it (the caller's when there are none).
  const Variable& input(size_t i) const { return inputs_.at(i); }
  /// Run the forward hooks on `out` and return it, with whatever they replaced.
  template <class Out>
  Out output(Out out) const {
    if (module_.forward_hooks_.empty()) return out;
    std::vector<Variable> values = hook_values(out);
    run_forward_hooks(values);
    set_hook_values(out, values);
    return out;
  }

 private:
  void run_forward_hooks(std::vector<Variable>& outputs) const;
  const Module& module_;
  std::vector<Variable> inputs_;
};

}  // namespace mg::nn
