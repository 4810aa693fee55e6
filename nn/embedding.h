#pragma once
// nn::Embedding: a table of vectors, one row per token id.
//
// It is exactly a Linear layer (without bias) applied to one-hot rows: embedding(ids) ==
// one_hot(ids) @ W. Picking rows is just the cheap way to do that product, and its gradient is
// the same too: each row of W gets the sum of the output gradients of the positions that used
// it (tests/test_nn.cpp checks both). Embedding rows are ordinary parameters, randomly
// initialised and trained by backpropagation like every other weight.
#include <optional>

#include "minigrad/nn/module.h"

namespace mg::nn {

/// Embedding's optional settings (PyTorch's defaults).
struct EmbeddingOptions {
  /// A token id (negative counts from the end) whose row starts at zero and never receives a
  /// gradient: the vector of a padding token stays 0.
  std::optional<int64_t> padding_idx;
};

class Embedding : public Callable<Embedding> {
 public:
  /// weight (num_embeddings, embedding_dim) ~ N(0, 1), as in PyTorch (the padding row, if any, 0).
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {},
            Generator& gen = default_generator());
  /// ids: int64 (...) -> (..., embedding_dim). Out-of-range ids are an IndexError.
  Variable forward(const Tensor& ids) const { return embedding(ids, weight, padding_idx); }

  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

  const int64_t num_embeddings, embedding_dim;
  const std::optional<int64_t> padding_idx;  // in [0, num_embeddings), or none
  Variable weight;                           // (num_embeddings, embedding_dim)
};

}  // namespace mg::nn
