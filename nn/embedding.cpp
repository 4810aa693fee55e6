#include "nn/embedding.h"

#include "nn/init.h"

namespace mg::nn {

Embedding::Embedding(int64_t n, int64_t d, Generator& gen) : num_embeddings(n), embedding_dim(d) {
  MG_CHECK(n > 0 && d > 0, ValueError, "Embedding: sizes must be positive, got {} x {}", n, d);
  weight = register_parameter("weight", empty({n, d}));
  init::normal_(weight, 0, 1, gen);
}

std::string Embedding::extra_repr() const { return fmt::format("{}, {}", num_embeddings, embedding_dim); }

}  // namespace mg::nn
