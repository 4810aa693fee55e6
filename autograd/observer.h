#pragma once
// A window onto the tape as it is built and walked, for tools that show the backward pass
// (inspect::BackwardRecorder). record() and the engine call the observer attached to their thread,
// if any, at these moments:
//
//   recorded      an op was just recorded: its node, its output (before anything has read it), its inputs;
//   walk_started  a backward walk begins (backward, mg::grad, create_graph; walks nest when a hook
//                 or a rule calls backward), and walk_finished when it ends, also by an exception;
//   seeded        a root's gradient is handed to its node;
//   arrived       a node is about to run: the sum of what its consumers sent, and that sum after
//                 the hooks on its output;
//   ran           the node's rule has run (for a leaf's AccumulateGrad: its .grad() holds the sum);
//   sent          the rule returned a gradient for input i: as returned, and as fitted to the
//                 input's shape (broadcasting summed away), on its way to the node below.
//
// With no observer attached (the default) an op pays one test of a thread-local pointer, and a walk
// one such read plus a test of a null pointer per node and per edge: the engine stays its four
// steps (autograd/engine.cpp) and computes the same bits.
#include <cstddef>
#include <vector>

#include "minigrad/autograd/node.h"

namespace mg {

/// Receives the tape's events on the thread it is attached to (see the file comment). Every
/// method has an empty default; the tensors are the engine's own, valid only during the call.
class GraphObserver {
 public:
  virtual ~GraphObserver() = default;
  /// An op was recorded: `node` (its name, input shapes and edges set), its output `out`, which no
  /// one has read yet (an observer may change its numbers: finite differences do), and its inputs.
  virtual void recorded(Node& /*node*/, Tensor& /*out*/, const std::vector<Variable>& /*inputs*/) {}
  /// A backward walk starts; `create_graph`: its rules run on Variables and are recorded.
  virtual void walk_started(bool /*create_graph*/) {}
  /// A root's gradient (ones, or the one passed to backward) is handed to `node`.
  virtual void seeded(const Node& /*node*/, const Tensor& /*grad*/) {}
  /// `from`'s rule returned `returned` for its input `input`; `fitted` is that gradient summed down
  /// to the input's shape (fit_gradient), and it is added into what `to` has received so far.
  virtual void sent(const Node& /*from*/, size_t /*input*/, const Tensor& /*returned*/, const Tensor& /*fitted*/,
                    const Node& /*to*/) {}
  /// `node` is about to run: `summed` is the sum of every contribution sent to it, `after_hooks`
  /// the same after the hooks registered on its output (the same tensor when there are none).
  virtual void arrived(const Node& /*node*/, const Tensor& /*summed*/, const Tensor& /*after_hooks*/) {}
  /// `node`'s rule has run.
  virtual void ran(const Node& /*node*/) {}
  /// The walk is over (also when a rule threw: `completed` is false then). Called from a
  /// destructor, so it must not throw.
  virtual void walk_finished(bool /*completed*/) noexcept {}
};

/// The observer attached to this thread, or null.
GraphObserver* graph_observer();
/// Attach `observer` to this thread (null detaches); returns the one attached before.
GraphObserver* set_graph_observer(GraphObserver* observer);

}  // namespace mg
