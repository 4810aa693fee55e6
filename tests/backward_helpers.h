#pragma once
// What the backward recorder's tests share (test_backward_recorder.cpp, test_backward_walk.cpp):
// comparisons of a recording with the engine's tensors, bit for bit.
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "minigrad/minigrad.h"

// The statement throws E with `text` in its message.
#define MG_EXPECT_THROW_MSG(statement, E, text) \
  EXPECT_THAT([&] { statement; }, testing::ThrowsMessage<E>(testing::HasSubstr(text)))

namespace backward_tests {
using namespace mg;
using inspect::StepRecord;

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// Every entry of a fully kept record against a tensor, bit for bit.
inline void expect_same_bits(const inspect::TensorRecord& r, const Tensor& t, const std::string& what) {
  ASSERT_TRUE(r.full) << what;
  ASSERT_EQ(r.shape, t.shape()) << what;
  const Tensor c = t.to(DType::Float64).contiguous();
  for (int64_t i = 0; i < c.numel(); ++i)
    EXPECT_TRUE(same_bits(r.values[static_cast<size_t>(i)], c.data<double>()[i]))
        << what << " entry " << i << ": " << r.values[static_cast<size_t>(i)] << " vs " << c.data<double>()[i];
}

inline const inspect::StepRecord& step_at(const inspect::WalkRecord& w, int64_t node) {
  for (const StepRecord& s : w.steps)
    if (s.node == node) return s;
  throw std::runtime_error("no step for node " + std::to_string(node));
}

// Each node's contributions, added in the order they were sent (the engine's order), give the
// bits of what it received.
inline void expect_contributions_add_up(const inspect::WalkRecord& w) {
  std::map<int64_t, std::vector<const inspect::TensorRecord*>> parts;
  for (const StepRecord& s : w.steps) {
    std::vector<const inspect::TensorRecord*> in = parts[s.node];
    if (s.seed) in.insert(in.begin(), &*s.seed);
    ASSERT_FALSE(in.empty()) << "node " << s.node << " ran with nothing sent to it";
    if (s.arrived.full)
      for (size_t i = 0; i < s.arrived.values.size(); ++i) {
        double sum = in[0]->values[i];
        for (size_t k = 1; k < in.size(); ++k) sum += in[k]->values[i];
        EXPECT_TRUE(same_bits(sum, s.arrived.values[i])) << "node " << s.node << " entry " << i;
      }
    for (const inspect::SendRecord& r : s.sends) parts[r.to].push_back(&r.fitted);
  }
}
}  // namespace backward_tests
