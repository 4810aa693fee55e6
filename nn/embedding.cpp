#include "minigrad/nn/embedding.h"

#include "minigrad/nn/init.h"

namespace mg::nn {
Embedding::Embedding(int64_t n, int64_t d, EmbeddingOptions o, Generator& gen)
    : num_embeddings(n),
      embedding_dim(d),
      padding_idx(n > 0 ? padding_row(o.padding_idx, n, "Embedding") : std::nullopt) {
  MG_CHECK(n > 0 && d > 0, ValueError, "Embedding: sizes must be positive, got {} x {}", n, d);
  register_parameter("weight", weight, empty({n, d}));
  init::normal_(weight, 0, 1, gen);
  if (padding_idx) weight.data().narrow(0, *padding_idx, 1).fill_(0);
}

std::string Embedding::extra_repr() const {
  return fmt::format("{}, {}{}", num_embeddings, embedding_dim,
                     padding_idx ? fmt::format(", padding_idx={}", *padding_idx) : "");
}

}  // namespace mg::nn
