// Teaching text is code: every file, function and test the docs name must exist, and the ops table
// of docs/03-writing-an-op.md must list every differentiable op the autograd headers declare.
//
// References are read from inline `code` spans and [links](...) outside fenced code blocks of
// README.md, docs/*.md and the examples' READMEs:
//   `tensor/ops/reduce.cpp`                  a path: it must exist
//   `autograd/ops/shape.cpp:transpose`       path:function: the file must define or declare it
//   `tests/test_shape.cpp:Shape.Gradcheck`   path:Suite.Case: the file must have TEST(Suite, Case)
//   `tests/golden/gen_golden.py:view`        path:case: the generator must write case("view", ...)
//   `AttentionForwardOptions::head_mask`     a qualified C++ name: each part but the namespaces must
//                                            appear in the library's code
// A span that does not start with one of the repository's folders (or root files) is not a path.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {
const fs::path kRoot = MG_SOURCE_DIR;
// The library's layers sit at the repository's root; its headers are included as
// <minigrad/nn/linear.h>, which is the file nn/linear.h (README: Layout), so docs name them from the root.
const std::set<std::string> kLayers = {"tensor", "autograd", "nn",  "models",     "inspect",
                                       "optim",  "data",     "viz", "distributed"};
const std::set<std::string> kTopDirs = {"tensor", "autograd", "nn",          "models", "inspect",  "optim",
                                        "data",   "viz",      "distributed", "tests",  "examples", "bench",
                                        "docs",   "fuzz",     "scripts",     "cmake",  ".ci"};
const std::set<std::string> kRootFiles = {"minigrad.h", "Makefile", "CMakeLists.txt", "README.md"};

// Where a path written in the docs lives.
fs::path resolve(const std::string& path) { return kRoot / path; }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every file of code or build script in the repository (not build output, not data).
std::vector<fs::path> code_files() {
  std::vector<fs::path> out;
  for (const char* f : {"Makefile", "CMakeLists.txt"}) out.push_back(kRoot / f);
  for (const std::string& dir : kTopDirs) {
    for (auto& e : fs::recursive_directory_iterator(resolve(dir))) {
      const std::string ext = e.path().extension().string(), name = e.path().filename().string();
      if (e.is_regular_file() && (ext == ".h" || ext == ".cpp" || ext == ".py" || name == "CMakeLists.txt" ||
                                  e.path().parent_path().filename() == "scripts" || name == "run"))
        out.push_back(e.path());
    }
  }
  return out;
}

std::vector<fs::path> markdown_files() {
  std::vector<fs::path> out{kRoot / "README.md"};
  for (const char* dir : {"docs", "examples"})
    for (auto& e : fs::recursive_directory_iterator(kRoot / dir))
      if (e.is_regular_file() && e.path().extension() == ".md") out.push_back(e.path());
  return out;
}

// The text of a markdown file without its fenced code blocks (``` ... ```).
std::string prose_of(const std::string& md) {
  std::string out, line;
  std::istringstream in(md);
  bool fenced = false;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos && line.compare(first, 3, "```") == 0) {
      fenced = !fenced;
      continue;
    }
    out += fenced ? "\n" : line + "\n";
  }
  return out;
}

// Whether `file` defines, declares or names `name` in the way its kind of reference means.
bool file_has(const fs::path& file, const std::string& name) {
  const std::string text = read(file);
  const size_t dot = name.find('.');
  if (file.extension() == ".py")
    return text.find("case(\"" + name + "\"") != std::string::npos ||
           text.find("def " + name + "(") != std::string::npos;
  if (dot != std::string::npos && name.find("::") == std::string::npos) {  // Suite.Case
    const std::regex test_re("TEST(_F|_P)?\\(\\s*" + name.substr(0, dot) + "\\s*,\\s*" + name.substr(dot + 1) +
                             "\\s*\\)");
    return std::regex_search(text, test_re);
  }
  // A definition or declaration, not a mere call: the name follows a type at the start of a line
  // ("Tensor Tensor::reshape(", "Variable tanh(", "bool file_has("), or is a constructor
  // ("Linear::Linear("), a struct, a class, an enum.
  const std::string last = name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1);
  const std::regex def_re("(^|\\n)[ \\t]*(?!return\\b)(?:[\\w:<>,*&~]+[ \\t]+)+(?:\\w+::)*" + last + "[ \\t]*\\(|\\b" +
                          last + "::" + last + "\\s*\\(|(struct|class|enum class)\\s+" + last + "\\b");
  return std::regex_search(text, def_re);
}

// All of the library's code (tensor/, autograd/, nn/, models/, optim/, data/, viz/, distributed/), as one text.
const std::string& library_code() {
  static const std::string code = [] {
    std::string all;
    for (const std::string& dir : kLayers)
      for (auto& e : fs::recursive_directory_iterator(kRoot / dir))
        if (e.is_regular_file()) all += read(e.path()) + "\n";
    return all;
  }();
  return code;
}

// A qualified C++ name like `nn::MultiheadAttentionOptions::fused` or `Variable::backward()`: every
// part that is not one of minigrad's namespaces must occur in the library's code as a word.
std::vector<std::string> check_cpp_name(const std::string& where, const std::string& ref) {
  static const std::regex name_re(R"(^(?:[A-Za-z_]\w*::)+[A-Za-z_]\w*(?:\(\))?$)");
  static const std::set<std::string> namespaces = {"mg",  "nn",          "models", "inspect", "optim", "data",
                                                   "viz", "distributed", "init",   "blas",    "fast"};
  std::vector<std::string> out;
  if (!std::regex_match(ref, name_re) || ref.rfind("std::", 0) == 0) return out;
  std::string name = ref.substr(0, ref.find('('));
  for (size_t at = 0; at <= name.size();) {
    const size_t next = std::min(name.find("::", at), name.size());
    const std::string part = name.substr(at, next - at);
    if (!namespaces.count(part) && !std::regex_search(library_code(), std::regex("\\b" + part + "\\b")))
      out.push_back(where + ": minigrad has no " + part);
    at = next + 2;
  }
  return out;
}

// Whether some test compares with the golden case: expect_golden("name", ...), check_module(m, "name",
// ...) or golden("name").
bool golden_case_is_tested(const std::string& name) {
  const std::regex use_re("(expect_golden|golden)\\(\\s*\"" + name + "\"|check_module\\([^,]*,\\s*\"" + name + "\"");
  for (auto& e : fs::directory_iterator(kRoot / "tests"))
    if (e.path().extension() == ".cpp" && e.path().filename() != "test_docs.cpp" &&
        std::regex_search(read(e.path()), use_re))
      return true;
  return false;
}

// Problems with one reference `ref` found in `md` (empty when fine, or when ref is not a path).
std::vector<std::string> check_reference(const fs::path& md, std::string ref, bool link) {
  const std::string where = fs::relative(md, kRoot).string() + ": `" + ref + "`";
  if (!link && ref.find("::") != std::string::npos && ref.find('/') == std::string::npos)
    return check_cpp_name(where, ref);
  std::vector<std::string> out;
  if (ref.find('<') != std::string::npos || ref.find('*') != std::string::npos || ref.find(' ') != std::string::npos)
    return out;  // a pattern (tensor/ops/<family>.cpp) or not a path at all
  fs::path target;
  if (link) {
    if (ref.rfind("http", 0) == 0 || ref.rfind("#", 0) == 0 || ref.rfind("mailto:", 0) == 0) return out;
    ref = ref.substr(0, ref.find('#'));
    target = fs::weakly_canonical(md.parent_path() / ref);
  } else {
    const std::string first = ref.substr(0, ref.find('/'));
    if (ref.rfind("../", 0) == 0) {
      out.push_back(where + " points outside the repository");
      return out;
    }
    const std::string path = ref.substr(0, ref.find(':'));
    if (!(ref.find('/') != std::string::npos && kTopDirs.count(first)) && !kRootFiles.count(path)) return out;
    target = resolve(path);
  }
  const std::string rel = fs::relative(target, kRoot).string();
  if (rel.rfind("..", 0) == 0) {
    out.push_back(where + " points outside the repository");
    return out;
  }
  if (rel.rfind("runs/", 0) == 0 || rel.rfind("build", 0) == 0) return out;  // made by running something
  if (!fs::exists(target)) {
    out.push_back(where + ": " + rel + " does not exist");
    return out;
  }
  const size_t colon = link ? std::string::npos : ref.find(':');
  if (colon != std::string::npos && !file_has(target, ref.substr(colon + 1)))
    out.push_back(where + ": " + rel + " has no " + ref.substr(colon + 1));
  else if (colon != std::string::npos && rel.rfind("tests/golden/gen_golden", 0) == 0 &&
           !golden_case_is_tested(ref.substr(colon + 1)))
    out.push_back(where + ": no test in tests/ reads the golden case \"" + ref.substr(colon + 1) + "\"");
  return out;
}

std::vector<std::string> check_markdown(const fs::path& md, const std::string& text, int* count = nullptr) {
  static const std::regex span_re("`([^`\\n]+)`"), link_re("\\]\\(([^)\\s]+)\\)");
  // A path written in plain prose, outside backticks: nn/transformer.h, autograd/ops/attention.cpp.
  static const std::regex plain_re(
      R"((?:^|[\s(,])((?:tensor|autograd|nn|models|inspect|optim|data|viz|distributed|tests|examples|bench|docs|fuzz|scripts|cmake)/[\w./-]*\.(?:h|cpp|py|md|txt|in))\b)");
  const std::string prose = prose_of(text);
  std::vector<std::string> out;
  const std::string plain = std::regex_replace(prose, span_re, " ");
  for (std::sregex_iterator it(plain.begin(), plain.end(), plain_re), end; it != end; ++it)
    for (auto& p : check_reference(md, (*it)[1], false)) out.push_back(p);
  for (std::sregex_iterator it(prose.begin(), prose.end(), span_re), end; it != end; ++it) {
    for (auto& p : check_reference(md, (*it)[1], false)) out.push_back(p);
    if (count) ++*count;
  }
  for (std::sregex_iterator it(prose.begin(), prose.end(), link_re), end; it != end; ++it)
    for (auto& p : check_reference(md, (*it)[1], true)) out.push_back(p);
  return out;
}

// The differentiable ops declared in autograd/ops/*.h.
std::set<std::string> declared_ops() {
  static const std::regex decl_re(
      R"(\n(?:Variable|std::pair<Variable, Tensor>|std::vector<Variable>)\s+([a-z_0-9]+)\()");
  std::set<std::string> ops;
  for (auto& e : fs::directory_iterator(kRoot / "autograd" / "ops"))
    if (e.path().extension() == ".h") {
      const std::string text = read(e.path());
      for (std::sregex_iterator it(text.begin(), text.end(), decl_re), end; it != end; ++it) ops.insert((*it)[1]);
    }
  return ops;
}

// The ops in the first column of docs/03's table (rows starting "| `op`").
std::set<std::string> table_ops() {
  static const std::regex row_re(R"(\n\| *`([a-z_0-9]+)` *\|)");
  const std::string text = read(kRoot / "docs" / "03-writing-an-op.md");
  std::set<std::string> ops;
  for (std::sregex_iterator it(text.begin(), text.end(), row_re), end; it != end; ++it) ops.insert((*it)[1]);
  return ops;
}
}  // namespace

TEST(Docs, EveryReferencedFileFunctionAndTestExists) {
  int spans = 0;
  for (const fs::path& md : markdown_files())
    for (const std::string& problem : check_markdown(md, read(md), &spans)) ADD_FAILURE() << problem;
  EXPECT_GT(spans, 200);  // the docs were found and read
}

TEST(Docs, TheCheckCatchesStaleReferences) {
  const fs::path md = kRoot / "docs" / "made-up.md";
  EXPECT_EQ(check_markdown(md, "See `tensor/ops/nope.cpp`.").size(), 1u);
  EXPECT_EQ(check_markdown(md, "See `tensor/ops/reduce.cpp:no_such_function`.").size(), 1u);
  EXPECT_EQ(check_markdown(md, "See `tests/test_shape.cpp:Shape.NoSuchTest`.").size(), 1u);
  EXPECT_EQ(check_markdown(md, "See `tests/golden/gen_golden.py:no_such_case`.").size(), 1u);
  EXPECT_EQ(check_markdown(md, "See [the file](../nn/nope.h) and `../shared/x.py`.").size(), 2u);
  EXPECT_EQ(check_markdown(md, "Set `nn::AttentionMask::head_mask`.").size(), 1u);  // a renamed struct
  EXPECT_EQ(check_markdown(md, "See `tests/test_shape.cpp:expect_gradcheck`.").size(),
            1u);  // called there, defined elsewhere
  EXPECT_EQ(check_markdown(md, "The layers are in nn/transformers.h, (see autograd/nope.cpp).").size(),
            2u);  // plain prose
  EXPECT_TRUE(check_markdown(md,
                             "See `tensor/ops/reduce.cpp:sum`, `tests/test_shape.cpp:Shape.Gradcheck`, "
                             "`tests/golden/gen_golden.py:view`, [chapter 1](01-tensors.md), `nn::Linear`, "
                             "`nn::MultiheadAttentionOptions::fused`, `Variable::backward()`, "
                             "`runs/mlp/index.html`.\n```\n`tensor/nope.h`\n```\n")
                  .empty());
}

TEST(Docs, OpsTableListsEveryDifferentiableOp) {
  const std::set<std::string> declared = declared_ops(), listed = table_ops();
  EXPECT_GT(declared.size(), 30u);
  for (const std::string& op : declared)
    EXPECT_TRUE(listed.count(op)) << "docs/03-writing-an-op.md: the ops table has no row for `" << op << "`";
  for (const std::string& op : listed)
    EXPECT_TRUE(declared.count(op)) << "docs/03-writing-an-op.md: the ops table lists `" << op
                                    << "`, which no autograd/ops/*.h declares";
}

TEST(Docs, CodeCommentsReferenceWhatExists) {
  // The same checks on the paths and path:name references written in code and scripts: a comment
  // that sends the reader to a file, function or test that is not there is a stale map too.
  static const std::regex ref_re(
      R"((?:^|[\s(`'"])((?:tensor|autograd|nn|optim|viz|tests|examples|bench|docs|scripts)/[\w./-]*\.(?:h|cpp|py|md|txt|safetensors)(?::[A-Za-z_][\w.:]*)?))");
  int refs = 0;
  for (const fs::path& file : code_files()) {
    if (file.filename() == "test_docs.cpp") continue;  // its own test strings name files that do not exist, on purpose
    const std::string text = read(file);
    for (std::sregex_iterator it(text.begin(), text.end(), ref_re), end; it != end; ++it, ++refs) {
      std::string ref = (*it)[1];
      while (!ref.empty() && (ref.back() == '.' || ref.back() == ':')) ref.pop_back();  // sentence punctuation
      for (const std::string& problem : check_reference(file, ref, false)) ADD_FAILURE() << problem;
    }
  }
  EXPECT_GT(refs, 100);
}

TEST(Docs, NothingPointsOutsideTheRepository) {
  // Code, scripts and docs: the benchmark's PyTorch reference once lived in ../shared, outside.
  static const std::regex up_re(R"(\.\./[\w.-]+(?:/[\w.-]+)*)");
  std::vector<fs::path> files = code_files();
  for (const fs::path& md : markdown_files()) files.push_back(md);
  for (const fs::path& file : files) {
    if (file.filename() == "test_docs.cpp") continue;  // this file spells the pattern out
    const std::string text = read(file);
    for (std::sregex_iterator it(text.begin(), text.end(), up_re), end; it != end; ++it) {
      const std::string rel = fs::relative(fs::weakly_canonical(file.parent_path() / (*it)[0].str()), kRoot).string();
      EXPECT_NE(rel.rfind("..", 0), 0u) << fs::relative(file, kRoot) << " points outside the repository: " << (*it)[0];
    }
  }
}
