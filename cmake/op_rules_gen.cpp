// A build step, not part of the library: writes the table of derivative rules that
// inspect/op_rules.cpp compiles in, from their one source. docs/03-writing-an-op.md's table names
// each op's rule as `autograd/ops/<family>.cpp:<function>`, and the comment right above that
// function states the rule ("y = tanh x   dx = dy * (1 - y^2)"). Every row becomes one line
//   {"tanh", "autograd/ops/elementwise.cpp:tanh", R"rule(y = tanh x ...)rule"},
// The output is rewritten only when it changes, so an unrelated edit rebuilds nothing.
//   op_rules_gen <repository root> <output file>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {
std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("op_rules_gen: cannot read " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The comment block right above the first line that defines `fn` with one (its lines without "// "), or "".
std::string rule_above(const std::vector<std::string>& lines, const std::string& fn) {
  const std::regex definition("^[A-Za-z_][A-Za-z0-9_:<>, ]* " + fn + "\\(");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], definition)) continue;
    std::vector<std::string> comment;
    for (size_t j = i; j-- > 0 && lines[j].rfind("//", 0) == 0;)
      comment.insert(comment.begin(), lines[j].substr(lines[j].size() > 2 && lines[j][2] == ' ' ? 3 : 2));
    std::string rule;
    for (const std::string& c : comment) rule += (rule.empty() ? "" : "\n") + c;
    if (!rule.empty()) return rule;  // else a helper of the same name: look further down
  }
  return "";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: op_rules_gen <repository root> <output file>\n";
    return 2;
  }
  try {
    const std::string root = argv[1];
    const std::regex row(R"(^\| `([a-z_0-9]+)` \|[^|]*\| `(autograd/ops/[a-z_]+\.cpp):([a-z_0-9]+)`)");
    std::map<std::string, std::vector<std::string>> files;
    std::ostringstream out;
    out << "// Written by cmake/op_rules_gen.cpp from docs/03-writing-an-op.md and autograd/ops/: do not edit.\n";
    int rows = 0;
    for (const std::string& line : lines_of(root + "/docs/03-writing-an-op.md")) {
      std::smatch m;
      if (!std::regex_search(line, m, row)) continue;
      const std::string op = m[1], file = m[2], fn = m[3];
      if (!files.count(file)) files[file] = lines_of(root + "/" + file);
      out << "{\"" << op << "\", \"" << file << ":" << fn << "\", R\"rule(" << rule_above(files[file], fn)
          << ")rule\"},\n";
      ++rows;
    }
    if (rows == 0) throw std::runtime_error("op_rules_gen: no op rows in docs/03-writing-an-op.md's table");
    std::string old;
    if (std::ifstream in(argv[2]); in) old.assign(std::istreambuf_iterator<char>(in), {});
    if (old != out.str()) std::ofstream(argv[2]) << out.str();
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
