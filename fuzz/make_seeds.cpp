// Writes the fuzzer's seed files into the folder given: a weights file and an AdamW training
// checkpoint of fuzz/safetensors_fuzz.cpp's model, as minigrad writes them. (The PyTorch-written
// seed is tests/golden/torch_mlp.safetensors.) Run once by hand; its output is committed.
#include <string>

#include "minigrad/minigrad.h"

int main(int argc, char** argv) {
  using namespace mg;
  const std::string dir = argc > 1 ? argv[1] : "fuzz/corpus";
  struct Model : nn::Callable<Model> {
    nn::Linear fc1{3, 4}, fc2{4, 2};
    Model() { register_module("fc1", fc1), register_module("fc2", fc2); }
    std::string type_name() const override { return "Model"; }
  } m;
  nn::save(m, dir + "/minigrad_weights.safetensors");
  optim::AdamW opt(m.parameters(), {.lr = 0.01});
  Variable loss = mse_loss(m.fc2(m.fc1(Variable(ones({2, 3})))), Variable(zeros({2, 2})));
  loss.backward();
  opt.step();
  optim::save_checkpoint(dir + "/minigrad_checkpoint.safetensors", m, opt, 1);
  return 0;
}
