// A user's program: its own nn/module.h beside minigrad's, and a line fitted with minigrad. It also
// checks that the library it got runs its kernels at the widest instruction set this CPU has.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "nn/module.h"
#include <minigrad/minigrad.h>

// "avx512", "avx2" or "baseline", from the kernel's list of CPU flags (x86-64 Linux).
std::string best_level_by_proc_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  line += ' ';
  auto has = [&](const char* f) { return line.find(' ' + std::string(f) + ' ') != std::string::npos; };
  const bool avx2 = has("avx2") && has("fma") && has("bmi1") && has("bmi2");
  if (avx2 && has("avx512f") && has("avx512bw") && has("avx512cd") && has("avx512dq") && has("avx512vl"))
    return "avx512";
  return avx2 ? "avx2" : "baseline";
}

int main() {
  user::nn::Module mine;
  mg::Generator gen(0);
  mg::nn::Linear fit(1, 1, {}, gen);
  mg::optim::SGD opt(fit.parameters(), {.lr = 0.1});
  const mg::Tensor x = mg::linspace(-1, 1, 16).reshape({16, 1});
  const mg::Tensor y = mg::add(mg::mul(x, mg::full({16, 1}, 2.0)), mg::full({16, 1}, 1.0));  // y = 2x + 1
  double loss = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    mg::Variable l = mg::mse_loss(fit(mg::Variable(x)), mg::Variable(y));
    l.backward();
    opt.step();
    loss = l.item();
  }
  const double w = fit.weight.item(), b = fit.bias.item();
  std::printf("user layers %d; fitted y = %.4f x + %.4f, loss %.2e\n", mine.layers, w, b, loss);

  // The CPU level: the best this CPU supports by the flags Linux lists in /proc/cpuinfo (MG_CPU is
  // not set here), and its GELU equal to the baseline's to the bit.
  const std::string level(mg::cpu_capability()), best = best_level_by_proc_cpuinfo();
  const mg::Tensor z = mg::linspace(-6, 6, 1001);
  const std::vector<float> at_best = mg::gelu(z).to_vector<float>();
  mg::set_cpu_level(mg::CpuLevel::baseline);
  const bool same = mg::gelu(z).to_vector<float>() == at_best;
  std::printf("kernels run at %s (the best this CPU supports: %s); the same GELU as the baseline's: %s\n",
              level.c_str(), best.c_str(), same ? "yes" : "no");
  return std::abs(w - 2) < 1e-2 && std::abs(b - 1) < 1e-2 && mine.layers == 3 && level == best && same ? 0 : 1;
}
