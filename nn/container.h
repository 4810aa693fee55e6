#pragma once
// Containers that own modules created at run time: Sequential (a pipeline) and ModuleList (an
// indexable list, e.g. the blocks of a Transformer). Children are named "0", "1", ...
#include <memory>
#include <typeinfo>

#include "nn/module.h"

namespace mg::nn {

/// Applies its modules one after the other: Sequential s; s.push_back(make_shared<Linear>(2, 8));
class Sequential : public Module {
 public:
  /// Append a module with a `Variable forward(const Variable&)`; returns it.
  template <class M>
  M& push_back(std::shared_ptr<M> m) {
    MG_CHECK(m != nullptr, ValueError, "Sequential: cannot add a null module");
    owned_.push_back(m);
    steps_.push_back([raw = m.get()](const Variable& x) { return raw->forward(x); });
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
  /// Number of modules.
  size_t size() const { return owned_.size(); }
  std::string type_name() const override { return "Sequential"; }

 private:
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
    MG_CHECK(m != nullptr, ValueError, "ModuleList: module {} is a {}, not the requested type", i, owned_[i]->type_name());
    return *m;
  }
  /// Number of modules.
  size_t size() const { return owned_.size(); }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<Module>> owned_;
};

}  // namespace mg::nn
