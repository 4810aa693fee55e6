// The layers point downward, and nothing but the build keeps them so:
//   tensor/ <- autograd/ <- nn/ <- optim/ <- distributed/     nn/ <- inspect/     data/ <- tensor/     viz/ <- tensor/
//   nn/, data/, optim/ <- models/ (whole architectures and the Hugging Face formats; nothing in the library needs them)
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
// The repository's root, where the layers sit; their headers are included as <minigrad/<layer>/...>
// (or "minigrad/<layer>/..."), through the include folder the build makes (CMakeLists.txt).
const fs::path kRoot = MG_SOURCE_DIR;

// The layers each layer may include from.
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"tensor", {"tensor"}},
    {"autograd", {"tensor", "autograd"}},
    {"nn", {"tensor", "autograd", "nn"}},
    {"inspect", {"tensor", "autograd", "nn", "inspect"}},
    {"optim", {"tensor", "autograd", "nn", "optim"}},
    {"distributed", {"tensor", "autograd", "nn", "optim", "distributed"}},
    {"models", {"tensor", "autograd", "nn", "data", "optim", "models"}},
    {"data", {"tensor", "data"}},
    {"viz", {"tensor", "viz"}},
};
const std::set<std::string> kTensorPrivate = {"tensor/loops.h", "tensor/fastmath.h", "tensor/onednn.h"};

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
      if (e.is_regular_file() && (ext == ".h" || ext == ".cpp"))
        out.emplace_back(layer, fs::relative(e.path(), kRoot).string());
    }
  return out;
}

// What is wrong with `text`, a file of `layer`: one message per upward or private include.
std::vector<std::string> violations(const std::string& layer, const std::string& file, const std::string& text) {
  static const std::regex include_re(R"re(#include\s+["<]minigrad/([a-z_]+)/([^">]+)[">])re");
  std::vector<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), include_re), end; it != end; ++it) {
    const std::string to = (*it)[1], header = to + "/" + (*it)[2].str();
    if (!kAllowed.at(layer).count(to))
      out.push_back(file + " (layer " + layer + ") includes " + header + ", from a layer above its own");
    if (layer != "tensor" && kTensorPrivate.count(header))
      out.push_back(file + " includes " + header +
                    ", which is private to tensor/: call a kernel of tensor/ops.h instead");
  }
  // a library header included without the prefix could be a user's file of the same name
  static const std::regex bare_re(
      R"re(#include\s+["<]((tensor|autograd|nn|models|inspect|optim|data|viz|distributed)/[^">]+)[">])re");
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
  EXPECT_EQ(
      violations("autograd", "an autograd file", "#include \"minigrad/tensor/loops.h\"\nauto y = detail::map_unary;\n")
          .size(),
      2u);
  EXPECT_EQ(violations("nn", "an nn file", "#include <minigrad/optim/adam.h>\n").size(),
            1u);                                                                       // the angle-bracket form too
  EXPECT_EQ(violations("nn", "an nn file", "#include \"nn/module.h\"\n").size(), 1u);  // no prefix
  EXPECT_EQ(violations("nn", "an nn file", "#include <nn/module.h>\n").size(), 1u);
  EXPECT_TRUE(
      violations("optim", "an optim file", "#include \"minigrad/nn/module.h\"\n#include \"minigrad/tensor/ops.h\"\n")
          .empty());
}

TEST(Layers, BlasHasOneDoor) {
  // cblas in tensor/blas.cpp, oneDNN in tensor/onednn.cpp (which only blas.cpp calls): nothing else
  // includes or calls either library.
  const std::regex cblas_re(R"(#include\s*<cblas\.h>|\bcblas_\w+\s*\()"),
      dnnl_re(R"(#include\s*<oneapi/dnnl|\bdnnl_\w+\s*\()");
  const std::regex onednn_user_re(R"(#include\s*"minigrad/tensor/onednn\.h")");
  for (auto& [layer, file] : library_files()) {
    const std::string text = read(kRoot / file);
    EXPECT_EQ(std::regex_search(text, cblas_re), file == "tensor/blas.cpp")
        << file << ": cblas belongs in tensor/blas.cpp";
    EXPECT_EQ(std::regex_search(text, dnnl_re), file == "tensor/onednn.cpp")
        << file << ": oneDNN belongs in tensor/onednn.cpp";
    if (file != "tensor/blas.cpp" && file != "tensor/onednn.cpp")
      EXPECT_FALSE(std::regex_search(text, onednn_user_re))
          << file << " calls oneDNN directly; go through tensor/blas.h";
  }
}

// nn/ is layers: the file formats of published models (config.json, Hugging Face's names) live in
// models/, so nn reads no JSON (the header is on the system path, so only this check would notice).
TEST(Layers, NnReadsNoJson) {
  for (auto& [layer, file] : library_files())
    if (layer == "nn")
      EXPECT_EQ(read(kRoot / file).find("nlohmann"), std::string::npos)
          << file << " uses JSON; that belongs in models/";
}

// The design card's top level: the layers at the repository's root beside examples/, tests/ and
// CMakeLists.txt, and no minigrad/ folder (the prefix of <minigrad/...> exists only in the build's
// include folder and the installed tree).
TEST(Layers, TheLayersSitAtTheRoot) {
  for (const char* dir :
       {"tensor", "autograd", "nn", "models", "inspect", "optim", "data", "viz", "distributed", "examples", "tests"})
    EXPECT_TRUE(fs::is_directory(kRoot / dir)) << dir << "/ is missing from the repository's root";
  EXPECT_TRUE(fs::is_regular_file(kRoot / "CMakeLists.txt"));
  EXPECT_TRUE(fs::is_regular_file(kRoot / "minigrad.h")) << "the umbrella header sits at the root";
  EXPECT_FALSE(fs::exists(kRoot / "minigrad"))
      << "a minigrad/ folder is back in the source tree; the layers sit at the root";
}

// The committed include folder names exactly the layers and the umbrella header, each a relative
// link to the source, so that <minigrad/nn/linear.h> opens nn/linear.h, the tree resolves before
// any build, and nothing else of the repository can be included with the prefix.
TEST(Layers, TheIncludeFolderLinksToTheLayers) {
  const fs::path dir = fs::path(MG_INCLUDE_DIR) / "minigrad";
  std::set<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) {
    names.insert(e.path().filename().string());
    EXPECT_TRUE(fs::is_symlink(e.symlink_status())) << e.path() << " is not a link to the source";
    EXPECT_TRUE(fs::equivalent(e.path(), kRoot / e.path().filename())) << e.path() << " does not point at the source";
    EXPECT_TRUE(fs::read_symlink(e.path()).is_relative()) << e.path() << " must not depend on where the clone is";
  }
  EXPECT_EQ(names, (std::set<std::string>{"tensor", "autograd", "nn", "models", "inspect", "optim", "data", "viz",
                                          "distributed", "minigrad.h"}));
  EXPECT_TRUE(fs::equivalent(dir / "nn" / "linear.h", kRoot / "nn" / "linear.h"));
}
