// einsum's plan: parsing the equation, checking it against the shapes, and choosing the steps
// (tensor/ops/einsum.h says which). Letters become numbers: 'A'..'Z' 0..25, 'a'..'z' 26..51 (so
// sorting them sorts uppercase first, as PyTorch does), and the broadcast "..." dims 52, 53, ...
#include "minigrad/tensor/ops/einsum.h"

#include <algorithm>
#include <optional>
#include <string>

#include "minigrad/tensor/error.h"
#include "minigrad/tensor/shape.h"

namespace mg {
namespace {

constexpr int kLetters = 52;  // labels below this are letters, from it on "..." dims

// One side of the equation's term: its letters in order, with kEllipsis where "..." stands.
constexpr int kEllipsis = -1;
using Term = std::vector<int>;

char letter(int label) { return static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)); }

std::string label_name(int label) {
  return label < kLetters ? std::string(1, letter(label)) : fmt::format("... dim {}", label - kLetters);
}

// The terms between commas (or the output after "->"): letters, "...", spaces.
std::vector<Term> parse_terms(std::string_view eq, size_t begin, size_t end, std::string_view equation) {
  std::vector<Term> terms(1);
  for (size_t i = begin; i < end; ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if (c == ',') {
      terms.emplace_back();
    } else if (c == '.') {
      MG_CHECK(i + 2 < end && eq[i + 1] == '.' && eq[i + 2] == '.', ValueError,
               "einsum: '.' at index {} of '{}' is not part of an ellipsis '...'", i, equation);
      MG_CHECK(std::count(terms.back().begin(), terms.back().end(), kEllipsis) == 0, ValueError,
               "einsum: a second '...' at index {} of '{}' (one per operand at most)", i, equation);
      terms.back().push_back(kEllipsis);
      i += 2;
    } else if (c >= 'A' && c <= 'Z') {
      terms.back().push_back(c - 'A');
    } else if (c >= 'a' && c <= 'z') {
      terms.back().push_back(26 + (c - 'a'));
    } else {
      throw ValueError(
          fmt::format("einsum: invalid subscript '{}' at index {} of '{}' (subscripts are letters "
                      "a-z, A-Z, and '...')",
                      c, i, equation));
    }
  }
  return terms;
}

std::string term_str(const Term& t) {
  std::string s;
  for (int l : t) s += l == kEllipsis ? std::string("...") : std::string(1, letter(l));
  return s;
}

int64_t product(const Shape& sizes, std::string_view what) {
  int64_t n = 1;
  for (int64_t s : sizes) n = checked_mul(n, s, what);
  return n;
}

}  // namespace

EinsumPlan einsum_plan(std::string_view equation, const std::vector<Shape>& shapes) {
  const size_t arrow = equation.find("->");
  MG_CHECK(arrow == std::string_view::npos || equation.find("->", arrow + 2) == std::string_view::npos, ValueError,
           "einsum: '{}' has more than one '->'", equation);
  const size_t lhs_end = arrow == std::string_view::npos ? equation.size() : arrow;
  std::vector<Term> inputs = parse_terms(equation, 0, lhs_end, equation);
  MG_CHECK(inputs.size() == shapes.size(), ValueError,
           "einsum: '{}' has {} operand term(s) but {} operand(s) were given", equation, inputs.size(), shapes.size());
  MG_CHECK(!shapes.empty(), ValueError, "einsum: no operands");

  // Each operand's labels, one per dim: "..." becomes the last dims of the broadcast ellipsis.
  int64_t ellipsis_dims = 0;
  bool any_ellipsis = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t letters = std::count_if(inputs[i].begin(), inputs[i].end(), [](int l) { return l != kEllipsis; });
    const bool has = letters != static_cast<int64_t>(inputs[i].size());
    const int64_t ndim = static_cast<int64_t>(shapes[i].size());
    MG_CHECK(has ? letters <= ndim : letters == ndim, ShapeError,
             "einsum: operand {} has shape {} ({} dims) but its subscripts '{}' name {}{}", i, shape_str(shapes[i]),
             ndim, term_str(inputs[i]), letters, has ? " and more ('...')" : "");
    if (has) any_ellipsis = true, ellipsis_dims = std::max(ellipsis_dims, ndim - letters);
  }
  std::vector<std::vector<int>> labels(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t mine = static_cast<int64_t>(shapes[i].size()) + 1 - static_cast<int64_t>(inputs[i].size());
    for (int l : inputs[i]) {
      if (l != kEllipsis) {
        labels[i].push_back(l);
        continue;
      }
      for (int64_t e = ellipsis_dims - mine; e < ellipsis_dims; ++e)
        labels[i].push_back(kLetters + static_cast<int>(e));
    }
  }

  // Each label's size: equal wherever it appears, or 1 (broadcast); repeated in one operand, equal.
  std::vector<std::optional<int64_t>> size(kLetters + ellipsis_dims);
  std::vector<int> uses(size.size(), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    std::vector<std::optional<int64_t>> here(size.size());
    for (size_t d = 0; d < labels[i].size(); ++d) {
      const int l = labels[i][d];
      const int64_t n = shapes[i][d];
      ++uses[l];
      MG_CHECK(!here[l] || *here[l] == n, ShapeError,
               "einsum: subscript {} is repeated in operand {} (shape {}) with sizes {} and {}; they must be equal",
               label_name(l), i, shape_str(shapes[i]), *here[l], n);
      here[l] = n;
      MG_CHECK(!size[l] || n == *size[l] || n == 1 || *size[l] == 1, ShapeError,
               "einsum: subscript {} has size {} in operand {} (shape {}), which does not broadcast with size {} seen "
               "before",
               label_name(l), n, i, shape_str(shapes[i]), *size[l]);
      if (!size[l] || *size[l] == 1) size[l] = n;  // first seen, or only broadcast (1) so far
    }
  }

  // The output's labels.
  std::vector<int> out;
  if (arrow == std::string_view::npos) {
    if (any_ellipsis)
      for (int64_t e = 0; e < ellipsis_dims; ++e) out.push_back(kLetters + static_cast<int>(e));
    for (int l = 0; l < kLetters; ++l)
      if (uses[l] == 1) out.push_back(l);
  } else {
    const std::vector<Term> outs = parse_terms(equation, arrow + 2, equation.size(), equation);
    MG_CHECK(outs.size() == 1, ValueError, "einsum: the output of '{}' has a ',' (it is one term)", equation);
    std::vector<bool> seen(size.size(), false);
    for (int l : outs[0]) {
      if (l == kEllipsis) {
        for (int64_t e = 0; e < ellipsis_dims; ++e) out.push_back(kLetters + static_cast<int>(e));
        continue;
      }
      MG_CHECK(uses[l] > 0, ValueError, "einsum: output subscript {} of '{}' is in no operand's subscripts", letter(l),
               equation);
      MG_CHECK(!seen[l], ValueError, "einsum: output subscript {} appears more than once in '{}'", letter(l), equation);
      seen[l] = true;
      out.push_back(l);
    }
  }  // (an output without the operands' "..." sums their dims, as PyTorch)
  std::vector<bool> in_output(size.size(), false);
  for (int l : out) in_output[l] = true;

  // Where each label is present at full size (a broadcast size-1 dim is not a presence).
  auto full = [&](int l, int64_t n) { return n == *size[l]; };
  std::vector<std::vector<bool>> present(labels.size(), std::vector<bool>(size.size(), false));
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t d = 0; d < labels[i].size(); ++d)
      if (full(labels[i][d], shapes[i][d])) present[i][labels[i][d]] = true;
  auto needed_after = [&](size_t i, int l) {  // in the output, or present in an operand after i
    if (in_output[l]) return true;
    for (size_t j = i + 1; j < labels.size(); ++j)
      if (present[j][l]) return true;
    return false;
  };

  EinsumPlan plan;
  std::vector<std::vector<int>> prepared(labels.size());  // each prepared operand's labels
  for (size_t i = 0; i < labels.size(); ++i) {
    EinsumPlan::Prepare p;
    std::vector<int> ls = labels[i];
    Shape sh = shapes[i];
    // a repeated label: its diagonal, as a last dim, until every label is there once
    for (bool repeated = true; repeated;) {
      repeated = false;
      for (size_t a = 0; a < ls.size() && !repeated; ++a)
        for (size_t b = a + 1; b < ls.size() && !repeated; ++b)
          if (ls[a] == ls[b]) {
            p.diagonals.push_back({static_cast<int64_t>(a), static_cast<int64_t>(b)});
            const int l = ls[a];
            const int64_t n = sh[a];
            ls.erase(ls.begin() + b), sh.erase(sh.begin() + b);
            ls.erase(ls.begin() + a), sh.erase(sh.begin() + a);
            ls.push_back(l), sh.push_back(n);
            repeated = true;
          }
    }
    // a label at full size here and nowhere else, nor in the output: summed out
    std::vector<int> kept;
    Shape kept_shape;
    for (size_t d = 0; d < ls.size(); ++d) {
      const int l = ls[d];
      bool elsewhere = in_output[l];
      for (size_t j = 0; j < labels.size() && !elsewhere; ++j) elsewhere = j != i && present[j][l];
      if (full(l, sh[d]) && !elsewhere) {
        p.sum_dims.push_back(static_cast<int64_t>(d));
      } else if (full(l, sh[d])) {
        kept.push_back(l), kept_shape.push_back(sh[d]);
      }  // else a broadcast size-1 dim: dropped by the reshape
    }
    p.shape = kept_shape;
    prepared[i] = kept;
    plan.prepare.push_back(std::move(p));
  }

  auto sizes_of = [&](const std::vector<int>& ls) {
    Shape s;
    for (int l : ls) s.push_back(*size[l]);
    return s;
  };
  auto position = [](const std::vector<int>& ls, int l) {
    return static_cast<int64_t>(std::find(ls.begin(), ls.end(), l) - ls.begin());
  };
  std::vector<int> result = prepared[0];
  for (size_t k = 1; k < prepared.size(); ++k) {
    const std::vector<int>& right = prepared[k];
    std::vector<int> batch, rows, summed, columns;
    for (int l : result) {
      const bool shared = position(right, l) < static_cast<int64_t>(right.size());
      if (!shared)
        rows.push_back(l);
      else if (needed_after(k, l))
        batch.push_back(l);
      else
        summed.push_back(l);
    }
    for (int l : right)
      if (position(result, l) == static_cast<int64_t>(result.size())) columns.push_back(l);
    EinsumPlan::Product p;
    for (const auto* group : {&batch, &rows, &summed})
      for (int l : *group) p.left_perm.push_back(position(result, l));
    for (const auto* group : {&batch, &summed, &columns})
      for (int l : *group) p.right_perm.push_back(position(right, l));
    const int64_t B = product(sizes_of(batch), "einsum"), M = product(sizes_of(rows), "einsum"),
                  K = product(sizes_of(summed), "einsum"), N = product(sizes_of(columns), "einsum");
    p.left_shape = {B, M, K};
    p.right_shape = {B, K, N};
    result = batch;
    result.insert(result.end(), rows.begin(), rows.end());
    result.insert(result.end(), columns.begin(), columns.end());
    p.out_shape = sizes_of(result);
    plan.products.push_back(std::move(p));
  }
  for (int l : out) plan.out_perm.push_back(position(result, l));
  return plan;
}

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  const OpScope scope("einsum");  // what the plan's matmul, sum or the allocator raise names einsum
  return run_einsum(einsum_plan(equation, einsum_shapes(operands)), operands);
}

}  // namespace mg
