#pragma once
// Whether ops record themselves on the tape. Off inside a NoGradGuard (evaluation, optimizer
// updates, gradient checking's numeric pass).

namespace mg {

/// Thread-local switch for recording.
struct GradMode {
  /// True when new ops are recorded (the default).
  static bool is_enabled();
  /// Turn recording on or off for this thread.
  static void set_enabled(bool enabled);
};

/// RAII: nothing is recorded while one of these is alive (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// RAII: ops are recorded while one of these is alive, even inside a NoGradGuard (like
/// torch.enable_grad()). The engine holds one while it runs a backward with create_graph.
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace mg
