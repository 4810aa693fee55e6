#include "check.h"

#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace exercises {

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

void expect_hint_is_real(const Hint& hint) {
  const std::string root = MG_SOURCE_DIR;
  const std::string doc = read_file(root + "/" + hint.doc);
  ASSERT_FALSE(doc.empty()) << hint.task << ": the hint names " << hint.doc << ", which is missing or empty";
  bool found = false;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    const size_t hashes = line.find_first_not_of('#');
    if (hashes == 0 || hashes == std::string::npos || hashes > 3 || line[hashes] != ' ') continue;
    if (line.substr(hashes + 1) == hint.section) found = true;
  }
  EXPECT_TRUE(found) << hint.task << ": the hint names the section \"" << hint.section << "\" of " << hint.doc
                     << ", which has no such heading (was it renamed?)";
  const std::string solution = read_file(root + "/exercises/solutions/" + hint.task + ".h");
  EXPECT_NE(solution.find(hint.section), std::string::npos)
      << hint.task << ": exercises/solutions/" << hint.task << ".h does not mention the section \"" << hint.section
      << "\" its check points to";
}

double max_abs_diff(const mg::Tensor& a, const mg::Tensor& b) {
  const std::vector<double> x = a.to(mg::DType::Float64).contiguous().to_vector<double>();
  const std::vector<double> y = b.to(mg::DType::Float64).contiguous().to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))) continue;  // equal infinities (masked scores) too
    const double d = std::abs(x[i] - y[i]);
    if (std::isnan(d)) return INFINITY;  // a NaN against a number
    if (d > worst) worst = d;
  }
  return worst;
}

bool expect_close(const mg::Tensor& actual, const mg::Tensor& expected, double tol, const std::string& what) {
  if (!actual.defined()) {
    ADD_FAILURE() << what << ": the result is an undefined tensor (nothing was returned?)";
    return false;
  }
  if (actual.shape() != expected.shape()) {
    ADD_FAILURE() << what << ": shape " << mg::shape_str(actual.shape()) << ", expected "
                  << mg::shape_str(expected.shape());
    return false;
  }
  const double diff = max_abs_diff(actual, expected);
  if (!(diff <= tol)) {
    ADD_FAILURE() << what << ": off by up to " << std::setprecision(3) << diff << " (allowed " << tol << ")\n  got:\n"
                  << actual << "\n  expected:\n"
                  << expected;
    return false;
  }
  return true;
}

mg::Tensor random64(const mg::Shape& shape, uint64_t seed) {
  mg::Generator gen(seed);
  return mg::randn(shape, gen, mg::DType::Float64);
}

}  // namespace exercises
