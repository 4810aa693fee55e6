// Bad calls through the public API, as a new user makes them: each must throw the right typed
// mg::Error with a message that names the op, never crash, hang, abort or return garbage, also under
// ASan + UBSan (make test). The calls, grouped as the API is, are in bad_inputs_tensors.cpp,
// bad_inputs_modules.cpp and bad_inputs_new_surface.cpp; the kernels' in test_bad_kernel_inputs.cpp.
#include <cstdio>

#include "bad_inputs.h"
#include "bad_inputs_catalogue.h"

using namespace mgtest;

TEST(BadInputs, ViewsAndCreation) { views_and_creation(); }
TEST(BadInputs, NewSurface) { new_surface(); }
TEST(BadInputs, Autograd) { autograd(); }
TEST(BadInputs, Modules) { modules(); }
TEST(BadInputs, OptimizersAndSchedules) { optimizers_and_schedules(); }
TEST(BadInputs, Files) { files(); }

TEST(BadInputs, Count) {
  // ctest runs each test in a process of its own, so this one makes all the calls again to count
  // them (the kernels' are counted in test_bad_kernel_inputs.cpp).
  g_cases = 0;
  views_and_creation(), autograd(), modules(), optimizers_and_schedules(), files(), new_surface();
  std::printf("bad calls: %d\n", g_cases);
  EXPECT_GE(g_cases, 230);
}
