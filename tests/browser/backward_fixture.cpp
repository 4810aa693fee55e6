// The backward page's browser test (test_backward_page.sh), both ends:
//   backward_fixture write OUT.html   recording 2 of examples/backward_walk (hand_attention's head)
//                                     as a page, and its recording beside it (OUT.html.json);
//   backward_fixture check OUT.html.json RESULT.json
//                                     RESULT is what the page's #selftest wrote after stepping
//                                     through every node: each step must show the node the engine
//                                     ran then, and every number of the gradient that arrived there,
//                                     to the 8 significant digits the page prints.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "examples/backward_walk/recordings.h"
#include "minigrad/viz/backward_page.h"

namespace {
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

int fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

// The number of paths along which a gradient went from a root to `target` in walk `w`.
double paths_to(const nlohmann::json& w, int64_t target) {
  std::map<int64_t, std::vector<int64_t>> into;
  std::set<int64_t> roots;
  for (const auto& s : w["steps"]) {
    if (s.contains("seed")) roots.insert(s["node"].get<int64_t>());
    for (const auto& r : s["sends"]) into[r["to"].get<int64_t>()].push_back(s["node"].get<int64_t>());
  }
  std::map<int64_t, double> memo;
  std::function<double(int64_t)> count = [&](int64_t id) {
    if (memo.count(id)) return memo[id];
    double c = roots.count(id) ? 1 : 0;
    for (int64_t from : into[id]) c += count(from);
    return memo[id] = c;
  };
  return count(target);
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && argc == 3) {
    const backward_walk::Recording r = backward_walk::attention_head();
    mg::viz::write_backward_page(argv[2], r.title, r.json);
    std::ofstream(std::string(argv[2]) + ".json") << r.json;
    return 0;
  }
  if (mode != "check" || argc != 4) {
    std::fprintf(stderr, "usage: backward_fixture write OUT.html | check RECORDING.json RESULT.json\n");
    return 2;
  }
  const nlohmann::json rec = read_json(argv[2]), got = read_json(argv[3]);
  const nlohmann::json& steps = rec["walks"][0]["steps"];
  if (got["errors"] != "") return fail("the page reported errors: " + got["errors"].get<std::string>());
  if (got["visited"].size() != steps.size())
    return fail("the page stepped through " + std::to_string(got["visited"].size()) + " nodes, the recording has " +
                std::to_string(steps.size()));
  size_t numbers = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const nlohmann::json &want = steps[k], &seen = got["visited"][k];
    const int64_t node = want["node"];
    if (seen["node"] != node || seen["op"] != rec["nodes"][node]["op"])
      return fail("step " + std::to_string(k + 1) + ": the page showed node " + seen["node"].dump() + " (" +
                  seen["op"].dump() + "), the engine ran " + std::to_string(node));
    if (seen["current"] != 1) return fail("step " + std::to_string(k + 1) + ": not exactly one node outlined");
    const nlohmann::json& values = want["arrived"]["values"];
    if (seen["arrived"].size() != values.size())
      return fail("step " + std::to_string(k + 1) + ": the page showed " + std::to_string(seen["arrived"].size()) +
                  " numbers of the gradient, the recording has " + std::to_string(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      const double shown = std::stod(seen["arrived"][i].get<std::string>()), v = values[i].get<double>();
      if (std::abs(shown - v) > 5e-8 * std::abs(v) + 1e-300)
        return fail("step " + std::to_string(k + 1) + " entry " + std::to_string(i) + ": the page showed " +
                    seen["arrived"][i].get<std::string>() + ", the engine computed " + std::to_string(v));
      ++numbers;
    }
    if (want.contains("fd") && seen["fd"] != "yes")
      return fail("step " + std::to_string(k + 1) + ": the finite-difference check does not say they agree");
  }
  if (got["back_to"] != steps.size() - 2) return fail("Back did not go to the step before the last");
  const double paths = paths_to(rec["walks"][0], got["picked"].get<int64_t>());
  if (got["paths"].get<double>() != paths || paths < 1)
    return fail("the page counted " + got["paths"].dump() + " paths to the clicked node, the recording has " +
                std::to_string(paths));
  std::printf("the page showed all %zu steps and their %zu numbers as the engine computed them; %g paths to %s\n",
              steps.size(), numbers, paths, rec["nodes"][got["picked"].get<int64_t>()]["label"].dump().c_str());
  return 0;
}
