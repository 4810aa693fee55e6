#pragma once
// char_gpt on several processes (mpirun -n N, docs/07-data-parallel.md): everything the example
// needs from distributed/, kept here so that main.cpp reads as the one-process trainer it is.
// Built without MPI, each function is the one-process case.
#include <functional>
#include <memory>

#include "minigrad/minigrad.h"

namespace char_gpt {

/// This process and how many there are: (0, 1) unless started under mpirun with MPI built in.
struct Processes {
  int rank = 0, world = 1;
};

/// Start MPI when the library has it (under mpirun: N processes, each on batch / N rows of every step).
inline Processes start_processes(int* argc, char*** argv) {
#ifdef MG_HAVE_MPI
  mg::distributed::init(argc, argv);
  return {mg::distributed::rank(), mg::distributed::world_size()};
#else
  (void)argc, (void)argv;
  return {};
#endif
}

/// What train() calls after each backward on `world` processes: wait until the gradients are
/// summed over the processes (DistributedDataParallel), and return the loss averaged over them.
/// Nothing (an empty function) for one process.
inline std::function<double(double)> synchronise_gradients(mg::nn::Module& model, int world) {
#ifdef MG_HAVE_MPI
  if (world > 1) {
    auto ddp = std::make_shared<mg::distributed::DistributedDataParallel>(model);
    return [ddp, world](double loss) {
      ddp->wait();
      const mg::Tensor t = mg::full({1}, loss, mg::DType::Float64);
      mg::distributed::all_reduce_sum(t);
      return t.item() / world;
    };
  }
#endif
  (void)model, (void)world;
  return {};
}

/// After an error on this process: stop the others, which would wait for it forever.
inline void stop_other_processes() {
#ifdef MG_HAVE_MPI
  if (mg::distributed::world_size() > 1) mg::distributed::abort(1);
#endif
}

}  // namespace char_gpt
