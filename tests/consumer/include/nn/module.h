#pragma once
// The user's own nn/module.h, first on the include path: minigrad's headers must not pick it up
// in place of their own (they include "minigrad/nn/module.h").
namespace user::nn {
struct Module {
  int layers = 3;
};
}  // namespace user::nn
