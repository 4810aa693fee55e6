#include "helpers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace mgtest {

void expect_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  ASSERT_TRUE(actual.defined()) << "actual tensor is undefined";
  ASSERT_EQ(mg::shape_str(actual.shape()), mg::shape_str(expected.shape()));
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]) || (std::isnan(a[i]) && std::isnan(e[i]));
    if (!ok && reported++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << a[i] << ", expected " << e[i] << " (diff "
                    << std::abs(a[i] - e[i]) << ")";
  }
}

void expect_values(const Tensor& actual, const mg::Shape& shape, const std::vector<double>& values, double atol) {
  expect_close(actual, mg::from_vector(values, shape), atol, 0);
}

void expect_gradcheck(const Fn& fn, const std::vector<Tensor>& inputs, mg::GradcheckOptions opt) {
  const mg::GradcheckResult r = mg::gradcheck(fn, inputs, opt);
  EXPECT_TRUE(r.ok) << r.message;
}

Tensor rnd(const mg::Shape& shape, uint64_t seed, double lo, double hi) {
  mg::Generator g(seed);
  return mg::uniform(shape, lo, hi, g, mg::DType::Float64);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to(mg::DType::Float64).to_vector<double>(), y = b.to(mg::DType::Float64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

namespace {
std::map<std::string, GoldenCase> load_all() {
  std::map<std::string, GoldenCase> all;
  for (const char* file : {"ops.txt", "nn.txt", "torch_mlp.txt", "edge.txt", "second_order.txt", "modern.txt"}) {
    std::ifstream in(std::string(MG_GOLDEN_DIR) + "/" + file);
    if (!in) throw std::runtime_error("cannot open " + std::string(MG_GOLDEN_DIR) + "/" + file);
    std::string line, current;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string key;
      ss >> key;
      if (key == "case") {
        ss >> current;
        if (all.count(current)) throw std::runtime_error(std::string("golden case defined twice: ") + current);
      } else if (key == "end" || key.empty()) {
        continue;
      } else {
        std::string dtype;
        int64_t nd;
        ss >> dtype >> nd;
        mg::Shape shape(nd);
        for (auto& s : shape) ss >> s;
        const int64_t n = mg::numel_of(shape);
        if (dtype == "float64" || dtype == "float32") {  // float32 values are written exactly, as doubles
          std::vector<double> v(n);
          for (auto& x : v) {  // strtod, unlike >>, reads "inf", "-inf" and "nan"
            std::string word;
            ss >> word;
            x = std::strtod(word.c_str(), nullptr);
          }
          all[current][key] =
              mg::from_vector(v, shape).to(dtype == "float32" ? mg::DType::Float32 : mg::DType::Float64);
        } else {
          std::vector<int64_t> v(n);
          for (auto& x : v) ss >> x;
          Tensor t = mg::from_vector(v, shape);
          all[current][key] = dtype == "bool" ? mg::ne(t, mg::zeros({}, mg::DType::Int64)) : t;
        }
      }
    }
  }
  return all;
}
}  // namespace

const GoldenCase& golden(const std::string& name) {
  static const std::map<std::string, GoldenCase> all = load_all();
  auto it = all.find(name);
  if (it == all.end()) throw std::runtime_error("golden case not found: " + name);
  return it->second;
}

void load_golden_params(mg::nn::Module& m, const GoldenCase& c) {
  for (auto& [name, p] : m.named_parameters()) {
    auto it = c.find("param:" + name);
    ASSERT_TRUE(it != c.end()) << "golden case has no parameter " << name;
    ASSERT_EQ(mg::shape_str(it->second.shape()), mg::shape_str(p.shape())) << name;
    p.data().copy_(it->second.to(p.dtype()));
  }
  for (auto& [key, t] : c)
    if (key.rfind("param:", 0) == 0) EXPECT_NO_THROW(m.parameter(key.substr(6))) << "the module has no " << key;
  // buffers as they were before PyTorch's forward (running statistics), when the case has them
  for (auto& [key, t] : c)
    if (key.rfind("state:", 0) == 0) {
      mg::Tensor b;
      ASSERT_NO_THROW(b = m.buffer(key.substr(6))) << "the module has no buffer " << key.substr(6);
      ASSERT_EQ(mg::shape_str(b.shape()), mg::shape_str(t.shape())) << key;
      b.copy_(t.to(b.dtype()));
    }
}

void expect_param_grads(const mg::nn::Module& m, const GoldenCase& c, double tol) {
  for (auto& [name, p] : m.named_parameters()) {
    SCOPED_TRACE("gradient of " + name);
    ASSERT_TRUE(p.grad().defined());
    expect_close(p.grad(), c.at("grad:" + name), tol, tol);
  }
}

void expect_golden(const std::string& name, const Fn& fn) {
  const GoldenCase& c = golden(name);
  for (mg::DType dt : {mg::DType::Float64, mg::DType::Float32}) {
    SCOPED_TRACE(std::string(name) + " in " + std::string(mg::dtype_name(dt)));
    const double tol = dt == mg::DType::Float64 ? 1e-9 : 2e-4;
    std::vector<Variable> in;
    for (int i = 0; c.count("in" + std::to_string(i)); ++i) {
      const Tensor& t = c.at("in" + std::to_string(i));
      if (mg::is_floating(t.dtype()))
        in.emplace_back(t.to(dt), true);
      else
        in.emplace_back(t, false);
    }
    Variable out = fn(in);
    ASSERT_EQ(out.dtype(), dt);
    expect_close(out.data(), c.at("out"), tol, tol);
    mg::sum(mg::mul(out, Variable(c.at("gout").to(dt)))).backward();
    for (size_t i = 0; i < in.size(); ++i) {
      const std::string key = "grad" + std::to_string(i);
      if (!c.count(key)) continue;
      SCOPED_TRACE("gradient of input " + std::to_string(i));
      ASSERT_TRUE(in[i].grad().defined());
      expect_close(in[i].grad(), c.at(key), tol, tol);
    }
  }
}

void check_module(mg::nn::Module& m, const std::string& name,
                  const std::function<std::pair<Variable, Variable>(const std::vector<Variable>&)>& fn) {
  SCOPED_TRACE(name);
  constexpr double kTol = 1e-9;
  const GoldenCase& c = golden(name);
  m.to(mg::DType::Float64);
  load_golden_params(m, c);
  std::vector<Variable> in;
  for (int i = 0; c.count("in" + std::to_string(i)); ++i) {
    const Tensor& t = c.at("in" + std::to_string(i));
    in.emplace_back(t, mg::is_floating(t.dtype()));
  }
  auto [out, weights] = fn(in);
  expect_close(out.data(), c.at("out"), kTol, kTol);
  if (c.count("weights") && weights.defined()) expect_close(weights.data(), c.at("weights"), kTol, kTol);
  for (auto& [key, t] : c)  // buffers after the forward: the running statistics it updated
    if (key.rfind("buffer:", 0) == 0) {
      SCOPED_TRACE(key);
      expect_close(m.buffer(key.substr(7)).to(t.dtype()), t, kTol, kTol);
    }
  sum(out * Variable(c.at("gout"))).backward();
  for (size_t i = 0; i < in.size(); ++i)
    if (c.count("grad" + std::to_string(i))) expect_close(in[i].grad(), c.at("grad" + std::to_string(i)), kTol, kTol);
  expect_param_grads(m, c, kTol);
}

bool ProcCpuInfo::has(const std::string& flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

ProcCpuInfo proc_cpu_info() {
  ProcCpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  // the first CPU's lines: vendor_id comes before flags
  while (std::getline(in, line) && info.flags.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    if (line.rfind("vendor_id", 0) == 0) {
      words >> info.vendor;
    } else if (line.rfind("flags", 0) == 0) {
      for (std::string w; words >> w;) info.flags.push_back(w);
    }
  }
  return info;
}

}  // namespace mgtest
