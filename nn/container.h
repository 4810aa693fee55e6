#pragma once
// Containers that own modules created at run time: Sequential (a pipeline), ModuleList (an
// indexable list, e.g. the blocks of a Transformer; children named "0", "1", ...) and ModuleDict
// (modules by name, e.g. one head per task).
#include <concepts>
#include <functional>
#include <memory>
#include <typeinfo>

#include "minigrad/nn/module.h"

namespace mg::nn {

/// Applies its modules one after the other: Sequential s; s.push_back(make_shared<Linear>(2, 8)).
/// Any module with a forward fits: one taking a Variable (Linear, LayerNorm, ...), one taking
/// token ids (Embedding: the Variable's int64 data is passed on), and self-attention
/// (MultiheadAttention: its output goes on). A module whose forward takes or returns something
/// else is a compile-time error that says so.
class Sequential : public Callable<Sequential> {
 public:
  /// Append a module; returns it.
  template <class M>
  M& push_back(std::shared_ptr<M> m) {
    MG_CHECK(m != nullptr, ValueError, "Sequential: cannot add a null module");
    owned_.push_back(m);
    steps_.push_back(step_of(m.get()));  // called through nn::call, with its hooks
    return register_module(std::to_string(owned_.size() - 1), *m);
  }
  /// Construct a module of type M in place and append it.
  template <class M, class... Args>
  M& emplace_back(Args&&... args) {
    return push_back(std::make_shared<M>(std::forward<Args>(args)...));
  }
  /// x through every module in order.
  Variable forward(const Variable& x) const {
    Variable y = x;
    for (auto& f : steps_) y = f(y);
    return y;
  }
  /// Module i as type M; an IndexError out of range, a ValueError if it is not an M.
  template <class M>
  M& at(size_t i) const {
    MG_CHECK(i < owned_.size(), IndexError, "Sequential: index {} is out of range for {} modules", i, owned_.size());
    M* m = dynamic_cast<M*>(owned_[i].get());
    MG_CHECK(m != nullptr, ValueError, "Sequential: module {} is a {}, not the requested type", i,
             owned_[i]->type_name());
    return *m;
  }
  /// Number of modules.
  size_t size() const { return owned_.size(); }
  std::string type_name() const override { return "Sequential"; }

 private:
  template <class>
  static constexpr bool kNoForward = false;
  // How one module turns the running Variable into the next.
  template <class M>
  static std::function<Variable(const Variable&)> step_of(M* raw) {
    if constexpr (requires(M & m, const Variable& v) {
                    { m.forward(v) } -> std::convertible_to<Variable>;
                  })
      return [raw](const Variable& x) { return Variable(nn::call(*raw, x)); };
    else if constexpr (requires(M & m, const Tensor& t) {
                         { m.forward(t) } -> std::convertible_to<Variable>;
                       })
      return [raw](const Variable& x) { return Variable(nn::call(*raw, x.data())); };  // token ids
    else if constexpr (requires(M & m, const Variable& v) {
                         { m.forward(v).output } -> std::convertible_to<Variable>;
                       })
      return [raw](const Variable& x) { return nn::call(*raw, x).output; };  // self-attention
    else
      static_assert(kNoForward<M>,
                    "Sequential: a module needs a forward taking a Variable (or token ids) and returning a Variable");
  }

  std::vector<std::shared_ptr<Module>> owned_;
  std::vector<std::function<Variable(const Variable&)>> steps_;
};

/// A list of modules registered as "0", "1", ...; forward is up to the owner.
class ModuleList : public Module {
 public:
  /// Append a module; returns it.
  template <class M>
  M& push_back(std::shared_ptr<M> m) {
    MG_CHECK(m != nullptr, ValueError, "ModuleList: cannot add a null module");
    owned_.push_back(m);
    return register_module(std::to_string(owned_.size() - 1), *m);
  }
  /// Construct a module of type M in place and append it.
  template <class M, class... Args>
  M& emplace_back(Args&&... args) {
    return push_back(std::make_shared<M>(std::forward<Args>(args)...));
  }
  /// Module i as type M; an IndexError out of range, a ValueError if it is not an M.
  template <class M>
  M& at(size_t i) const {
    MG_CHECK(i < owned_.size(), IndexError, "ModuleList: index {} is out of range for {} modules", i, owned_.size());
    M* m = dynamic_cast<M*>(owned_[i].get());
    MG_CHECK(m != nullptr, ValueError, "ModuleList: module {} is a {}, not the requested type", i,
             owned_[i]->type_name());
    return *m;
  }
  /// Number of modules.
  size_t size() const { return owned_.size(); }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<Module>> owned_;
};

/// Modules by name, in insertion order, registered under their names: ModuleDict heads;
/// heads.emplace<Linear>("digit", 64, 10); heads.at<Linear>("digit")(x).
class ModuleDict : public Module {
 public:
  /// Add a module under `name` (a ValueError if the name is taken or contains '.'); returns it.
  template <class M>
  M& insert(const std::string& name, std::shared_ptr<M> m) {
    MG_CHECK(m != nullptr, ValueError, "ModuleDict: cannot add a null module as \"{}\"", name);
    M& added = register_module(name, *m);  // checks the name first
    owned_.emplace_back(name, m);
    return added;
  }
  /// Construct a module of type M in place under `name`.
  template <class M, class... Args>
  M& emplace(const std::string& name, Args&&... args) {
    return insert(name, std::make_shared<M>(std::forward<Args>(args)...));
  }
  /// The module under `name` as type M; a ValueError naming the keys there are if absent, and one
  /// if it is not an M.
  template <class M>
  M& at(const std::string& name) const {
    for (auto& [n, m] : owned_)
      if (n == name) {
        M* typed = dynamic_cast<M*>(m.get());
        MG_CHECK(typed != nullptr, ValueError, "ModuleDict: \"{}\" is a {}, not the requested type", name,
                 m->type_name());
        return *typed;
      }
    std::string names;
    for (auto& [n, m] : owned_) names += (names.empty() ? "" : ", ") + n;
    throw ValueError(
        fmt::format("ModuleDict: no module named \"{}\" (it has: {})", name, names.empty() ? "none" : names));
  }
  /// Whether a module is stored under `name`.
  bool contains(const std::string& name) const {
    for (auto& [n, m] : owned_)
      if (n == name) return true;
    return false;
  }
  /// The names, in insertion order.
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (auto& [n, m] : owned_) out.push_back(n);
    return out;
  }
  /// Number of modules.
  size_t size() const { return owned_.size(); }
  std::string type_name() const override { return "ModuleDict"; }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> owned_;
};

}  // namespace mg::nn
