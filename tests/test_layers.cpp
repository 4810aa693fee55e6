// The layers point downward, and nothing but the build keeps them so:
//   tensor/ <- autograd/ <- nn/ <- optim/ <- distributed/        data/ <- tensor/        viz/ <- tensor/
// A file may include headers of its own layer and the layers below it, never above. Inside
// tensor/, the loop machinery (tensor/loops.h, `detail::`) and the fast math are private: the
// layers above call kernels, not loops. And BLAS has one door, tensor/blas.cpp.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {
const fs::path kRoot = fs::path(MG_SOURCE_DIR) / "minigrad";  // the library; its headers are included as "minigrad/<layer>/..."

// The layers each layer may include from.
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"tensor", {"tensor"}},
    {"autograd", {"tensor", "autograd"}},
    {"nn", {"tensor", "autograd", "nn"}},
    {"optim", {"tensor", "autograd", "nn", "optim"}},
    {"distributed", {"tensor", "autograd", "nn", "optim", "distributed"}},
    {"data", {"tensor", "data"}},
    {"viz", {"tensor", "viz"}},
};
const std::set<std::string> kTensorPrivate = {"tensor/loops.h", "tensor/fastmath.h"};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every source file of the library: (layer, path relative to the root).
std::vector<std::pair<std::string, std::string>> library_files() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [layer, _] : kAllowed)
    for (auto& e : fs::recursive_directory_iterator(kRoot / layer)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".h" || ext == ".cpp")) out.emplace_back(layer, fs::relative(e.path(), kRoot).string());
    }
  return out;
}

// What is wrong with `text`, a file of `layer`: one message per upward or private include.
std::vector<std::string> violations(const std::string& layer, const std::string& file, const std::string& text) {
  static const std::regex include_re(R"re(#include\s+"minigrad/([a-z_]+)/([^"]+)")re");
  std::vector<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), include_re), end; it != end; ++it) {
    const std::string to = (*it)[1], header = to + "/" + (*it)[2].str();
    if (!kAllowed.at(layer).count(to))
      out.push_back(file + " (layer " + layer + ") includes " + header + ", from a layer above its own");
    if (layer != "tensor" && kTensorPrivate.count(header))
      out.push_back(file + " includes " + header + ", which is private to tensor/: call a kernel of tensor/ops.h instead");
  }
  // a library header included without the prefix could be a user's file of the same name
  static const std::regex bare_re(R"re(#include\s+"((tensor|autograd|nn|optim|data|viz|distributed)/[^"]+)")re");
  for (std::sregex_iterator it(text.begin(), text.end(), bare_re), end; it != end; ++it)
    out.push_back(file + " includes \"" + (*it)[1].str() + "\" without the minigrad/ prefix");
  if (layer != "tensor" && text.find("detail::") != std::string::npos)
    out.push_back(file + " uses tensor's private detail:: helpers");
  return out;
}
}  // namespace

TEST(Layers, EveryFileIncludesOnlyItsLayerAndTheOnesBelow) {
  const auto files = library_files();
  EXPECT_GT(files.size(), 60u);  // the walk found the library
  for (auto& [layer, file] : files)
    for (const std::string& v : violations(layer, file, read(kRoot / file))) ADD_FAILURE() << v;
}

TEST(Layers, TheCheckCatchesUpwardAndPrivateIncludes) {
  // made-up files of each layer
  EXPECT_EQ(violations("nn", "an nn file", "#include \"minigrad/optim/adam.h\"\n").size(), 1u);
  EXPECT_EQ(violations("viz", "a viz file", "#include \"minigrad/autograd/ops.h\"\n").size(), 1u);
  EXPECT_EQ(violations("autograd", "an autograd file", "#include \"minigrad/tensor/loops.h\"\nauto y = detail::map_unary;\n").size(), 2u);
  EXPECT_EQ(violations("nn", "an nn file", "#include \"nn/module.h\"\n").size(), 1u);  // no prefix
  EXPECT_TRUE(violations("optim", "an optim file", "#include \"minigrad/nn/module.h\"\n#include \"minigrad/tensor/ops.h\"\n").empty());
}

TEST(Layers, BlasHasOneDoor) {
  const std::regex call_re(R"(#include\s*<cblas\.h>|\bcblas_\w+\s*\(|#include\s*<oneapi/dnnl|\bdnnl_sgemm\s*\()");
  int doors = 0;
  for (auto& [layer, file] : library_files()) {
    const std::string text = read(kRoot / file);
    const bool calls = std::regex_search(text, call_re);
    if (file == "tensor/blas.cpp") doors += calls;
    else EXPECT_FALSE(calls) << file << " calls BLAS directly; go through tensor/blas.h";
  }
  EXPECT_EQ(doors, 1);
}
