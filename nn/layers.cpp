#include "minigrad/nn/layers.h"

#include "minigrad/nn/init.h"

namespace mg::nn {

Dropout::Dropout(DropoutOptions o, Generator& gen) : p(o.p), gen_(&gen) {
  MG_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: probability must be in [0, 1], got {}", p);
}

// (Constructors with parameters named as their members are defined here, not in the header, so
// that a user compiling with -Wshadow gets no warning from minigrad's headers.)
Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

Unflatten::Unflatten(int64_t dim, Shape sizes) : dim(dim), sizes(std::move(sizes)) {}

}  // namespace mg::nn
