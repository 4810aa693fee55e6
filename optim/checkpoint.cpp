#include "minigrad/optim/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include <fmt/ranges.h>

#include "minigrad/nn/serialize.h"

namespace mg::optim {
namespace {
const std::string kPrefix = "optimizer.";

// Which module parameter name each optimized parameter has.
std::unordered_map<VariableImpl*, std::string> names_of(const nn::Module& model, const Optimizer& opt) {
  std::unordered_map<VariableImpl*, std::string> name;
  for (auto& [n, p] : model.named_parameters()) name[p.impl().get()] = n;
  for (const Group& g : opt.groups())
    for (const Variable& p : g.params)
      MG_CHECK(name.count(p.impl().get()), ValueError,
               "checkpoint: the optimizer holds a parameter ({}) that is not part of the model", p.name());
  return name;
}
}  // namespace

namespace {
// How settings are written and compared: the shortest text that reads back as the same double.
std::string number(double v) { return fmt::format("{}", v); }

// A generator's state as metadata: its six int64 words (Generator::get_state), space-separated.
std::string generator_text(const Generator& g) {
  return fmt::format("{}", fmt::join(g.get_state().to_vector<int64_t>(), " "));
}

// The generator that `text` describes, or nothing when it is not six whole numbers that make a state.
std::optional<Generator> parse_generator(const std::string& text) {
  std::vector<int64_t> words;
  const char *p = text.data(), *end = text.data() + text.size();
  while (p < end && words.size() < 7) {
    int64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc()) return std::nullopt;
    words.push_back(v);
    p = next;
    if (p < end && *p++ != ' ') return std::nullopt;
  }
  if (words.size() != 6 || text.empty() || text.back() == ' ') return std::nullopt;
  Generator g;
  try {
    g.set_state(from_vector(words, {6}));
  } catch (const ValueError&) {
    return std::nullopt;
  }
  return g;
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& opt, int64_t step,
                     const LRScheduler* scheduler, const NamedGenerators& generators) {
  MG_CHECK(step >= 0, ValueError, "save_checkpoint: step must be >= 0, got {}", step);
  MG_CHECK(step < std::numeric_limits<int64_t>::max(), ValueError,
           "save_checkpoint: step {} leaves no room for one more", step);
  auto name = names_of(model, opt);
  std::map<std::string, std::string> meta;
  std::vector<std::pair<std::string, Tensor>> tensors = nn::saved_state(model, meta);
  meta.insert({{"optimizer", opt.name()}, {"step", std::to_string(step)}});
  for (auto& [k, v] : opt.hyper_parameters()) meta[kPrefix + k] = number(v);
  if (scheduler) {
    meta["scheduler"] = scheduler->name();
    meta["scheduler.step"] = std::to_string(scheduler->last_step());
    for (auto& [k, v] : scheduler->settings()) meta["scheduler." + k] = number(v);
    for (size_t g = 0; g < scheduler->base_lrs().size(); ++g)
      meta["scheduler.base_lr." + std::to_string(g)] = number(scheduler->base_lrs()[g]);
    for (auto& [k, v] : scheduler->state()) meta["scheduler.state." + k] = number(v);
  }
  for (size_t g = 0; g < opt.groups().size(); ++g) {
    meta["lr." + std::to_string(g)] = number(opt.groups()[g].lr);
    meta["weight_decay." + std::to_string(g)] = number(opt.groups()[g].weight_decay);
    if (opt.groups()[g].momentum) meta["momentum." + std::to_string(g)] = number(*opt.groups()[g].momentum);
    meta["group." + std::to_string(g) + ".params"] = std::to_string(opt.groups()[g].params.size());
    for (const Variable& p : opt.groups()[g].params)
      if (opt.has_state(p))
        for (auto& [k, t] : const_cast<Optimizer&>(opt).state(p))
          tensors.emplace_back(kPrefix + name[p.impl().get()] + "." + k, t);
  }
  for (auto& [k, t] : opt.shared_state()) tensors.emplace_back(kPrefix + "~" + k, t);
  for (auto& [gname, gen] : generators) {
    MG_CHECK(gen != nullptr, ValueError, "save_checkpoint: generator \"{}\" is null", gname);
    MG_CHECK(meta.emplace("rng." + gname, generator_text(*gen)).second, ValueError,
             "save_checkpoint: generator \"{}\" is named twice", gname);
  }
  save_safetensors(path, tensors, meta);
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, Optimizer& opt, LRScheduler* scheduler,
                        const NamedGenerators& generators) {
  return load_checkpoint_from(load_safetensors(path), path, model, opt, scheduler, generators);
}

namespace {
// The whole of `text` as a non-negative int64, or nothing ("12abc", "-3", "" are nothing).
std::optional<int64_t> parse_count(const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}
// A counter that a run goes on from: a count < INT64_MAX (one more step must fit).
std::optional<int64_t> parse_counter(const std::string& text) {
  const std::optional<int64_t> v = parse_count(text);
  if (v && *v == std::numeric_limits<int64_t>::max()) return std::nullopt;
  return v;
}
// The whole of `text` as a finite, non-negative double ("1e-3garbage", "inf", "nan", "-1" are nothing).
std::optional<double> parse_rate(const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}
// The whole of `text` as a double, infinities included ("inf", "-inf"); NaN and garbage are nothing.
std::optional<double> parse_number(const std::string& text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || std::isnan(v)) return std::nullopt;
  return v;
}
}  // namespace

namespace {
// A checkpoint's metadata entry `key`; a FileError naming the file when it is missing.
struct Metadata {
  const SafeTensors& file;
  const std::string& path;
  std::string operator()(const std::string& key) const {
    auto it = file.metadata.find(key);
    MG_CHECK(it != file.metadata.end(), FileError,
             "load_checkpoint: {} has no \"{}\" in its metadata (not a minigrad training checkpoint?)", path, key);
    return it->second;
  }
};

// Each group's learning rate, and its momentum where a schedule cycles it.
struct GroupRates {
  std::vector<double> lrs;
  std::vector<std::optional<double>> momenta;
};

// The optimizer's settings as saved: as many groups as it has, each with its size and weight decay,
// and the same hyper-parameters. Returns each group's rates.
GroupRates read_group_rates(const Metadata& meta, const Optimizer& opt) {
  const SafeTensors& file = meta.file;
  const std::string& path = meta.path;
  // One learning rate per parameter group, and as many groups as the optimizer has.
  size_t file_groups = 0;
  while (file.metadata.count("lr." + std::to_string(file_groups))) ++file_groups;
  MG_CHECK(file_groups == opt.groups().size(), FileError,
           "load_checkpoint: {} was saved by an optimizer with {} parameter group(s); this {} has {}", path,
           file_groups, opt.name(), opt.groups().size());
  GroupRates rates;
  for (size_t g = 0; g < file_groups; ++g) {
    const std::string key = "lr." + std::to_string(g);
    const std::optional<double> lr = parse_rate(meta(key));
    MG_CHECK(lr.has_value(), FileError,
             "load_checkpoint: {} has {} \"{}\" in its metadata; expected a finite number >= 0", path, key, meta(key));
    rates.lrs.push_back(*lr);
    const std::string m_key = "momentum." + std::to_string(g);
    rates.momenta.emplace_back();
    if (file.metadata.count(m_key)) {
      rates.momenta.back() = parse_rate(meta(m_key));
      MG_CHECK(rates.momenta.back().has_value(), FileError,
               "load_checkpoint: {} has {} \"{}\"; expected a finite number >= 0", path, m_key, meta(m_key));
    }
    const std::string size_key = "group." + std::to_string(g) + ".params";
    const std::optional<int64_t> size = parse_count(meta(size_key));
    MG_CHECK(size && static_cast<size_t>(*size) == opt.groups()[g].params.size(), FileError,
             "load_checkpoint: {} was saved with {} parameter(s) in group {}; this {} has {} there", path,
             meta(size_key), g, opt.name(), opt.groups()[g].params.size());
    const std::string wd_key = "weight_decay." + std::to_string(g);
    MG_CHECK(meta(wd_key) == number(opt.groups()[g].weight_decay), FileError,
             "load_checkpoint: {} was saved with weight_decay {} in group {}; this {} has {}", path, meta(wd_key), g,
             opt.name(), number(opt.groups()[g].weight_decay));
  }
  for (auto& [k, v] : opt.hyper_parameters())
    MG_CHECK(meta(kPrefix + k) == number(v), FileError,
             "load_checkpoint: {} was saved by an {} with {} = {}; this one has {} = {}", path, opt.name(), k,
             meta(kPrefix + k), k, number(v));
  return rates;
}

// What a scheduler resumes from: its step, base rates, and any state of its own.
struct SchedulerState {
  int64_t step = 0;
  std::vector<double> base_lrs;
  std::map<std::string, double> state;
};

// The schedule: the same kind with the same settings as `scheduler` (or none in the file when null).
SchedulerState read_scheduler(const Metadata& meta, LRScheduler* scheduler, size_t file_groups) {
  const SafeTensors& file = meta.file;
  const std::string& path = meta.path;
  const bool file_has_scheduler = file.metadata.count("scheduler") > 0;
  MG_CHECK(file_has_scheduler || scheduler == nullptr, FileError,
           "load_checkpoint: {} holds no learning-rate schedule, but a {} was given to restore", path,
           scheduler ? scheduler->name() : "");
  MG_CHECK(
      !file_has_scheduler || scheduler != nullptr, FileError,
      "load_checkpoint: {} holds the state of a {} learning-rate schedule; pass the scheduler to load_checkpoint so "
      "that it resumes too (or read only the weights with nn::load)",
      path, meta("scheduler"));
  SchedulerState out;
  if (scheduler) {
    MG_CHECK(meta("scheduler") == scheduler->name(), FileError,
             "load_checkpoint: {} holds a {} schedule but the scheduler is a {}", path, meta("scheduler"),
             scheduler->name());
    for (auto& [k, v] : scheduler->settings())
      MG_CHECK(meta("scheduler." + k) == number(v), FileError,
               "load_checkpoint: {} was saved by a {} with {} = {}; this one has {} = {}", path, scheduler->name(), k,
               meta("scheduler." + k), k, number(v));
    const std::optional<int64_t> s = parse_counter(meta("scheduler.step"));
    MG_CHECK(s.has_value(), FileError,
             "load_checkpoint: {} has scheduler.step \"{}\"; expected a whole number in [0, 2^63 - 1)", path,
             meta("scheduler.step"));
    out.step = *s;
    // checked here, before anything changes (restore() would refuse it only after the weights are in)
    MG_CHECK(scheduler->base_lrs().size() == file_groups, FileError,
             "load_checkpoint: the {} was made for an optimizer with {} parameter groups, but {} holds {}",
             scheduler->name(), scheduler->base_lrs().size(), path, file_groups);
    for (size_t g = 0; g < file_groups; ++g) {
      const std::string key = "scheduler.base_lr." + std::to_string(g);
      const std::optional<double> lr = parse_rate(meta(key));
      MG_CHECK(lr.has_value(), FileError, "load_checkpoint: {} has {} \"{}\"; expected a finite number >= 0", path, key,
               meta(key));
      out.base_lrs.push_back(*lr);
    }
    // the schedule's own state (ReduceLROnPlateau's best value and counters): the same entries
    for (auto& [k, v] : scheduler->state()) {
      const std::string key = "scheduler.state." + k;
      const std::optional<double> x = parse_number(meta(key));
      MG_CHECK(x.has_value(), FileError, "load_checkpoint: {} has {} \"{}\"; expected a number", path, key, meta(key));
      out.state[k] = *x;
    }
    scheduler->check_state(out.state);  // before anything changes
  }

  return out;
}

// The generators' states: every one asked for must be in the file and be a state.
std::vector<std::pair<Generator*, Generator>> read_generators(const Metadata& meta, const NamedGenerators& generators) {
  const SafeTensors& file = meta.file;
  const std::string& path = meta.path;
  std::vector<std::pair<Generator*, Generator>> new_generators;
  for (auto& [gname, gen] : generators) {
    MG_CHECK(gen != nullptr, ValueError, "load_checkpoint: generator \"{}\" is null", gname);
    auto it = file.metadata.find("rng." + gname);
    MG_CHECK(
        it != file.metadata.end(), FileError,
        "load_checkpoint: {} holds no state for generator \"{}\" (\"rng.{}\"); save it with that generator, or pass "
        "generators = {{}} to resume without restoring random numbers (a run with dropout then draws other masks)",
        path, gname, gname);
    const std::optional<Generator> g = parse_generator(it->second);
    MG_CHECK(g.has_value(), FileError,
             "load_checkpoint: {} has rng.{} \"{}\"; expected a generator state (six whole numbers)", path, gname,
             it->second);
    new_generators.emplace_back(gen, *g);
  }

  return new_generators;
}

// Optimizer state: every entry must name an optimized parameter and one of the optimizer's
// state tensors, with the parameter's shape (the step: a 0-dim int64 >= 0); a parameter with
// any state must have all of it.
std::unordered_map<VariableImpl*, ParamState> read_optimizer_state(const SafeTensors& file, const std::string& path,
                                                                   nn::Module& model, Optimizer& opt) {
  std::unordered_map<std::string, Variable> by_name;
  auto names = names_of(model, opt);
  for (const Group& g : opt.groups())
    for (const Variable& p : g.params) by_name[names[p.impl().get()]] = p;
  const std::vector<std::string> wanted = opt.state_names();
  std::unordered_map<VariableImpl*, ParamState> new_state;
  for (auto& [key, t] : file.tensors) {
    if (key.rfind(kPrefix, 0) != 0 || key.rfind(kPrefix + "~", 0) == 0) continue;  // (~: shared state)
    const std::string rest = key.substr(kPrefix.size());
    const size_t dot = rest.find_last_of('.');
    const std::string pname = dot == std::string::npos ? "" : rest.substr(0, dot),
                      sname = dot == std::string::npos ? "" : rest.substr(dot + 1);
    auto it = by_name.find(pname);
    MG_CHECK(it != by_name.end(), FileError,
             "load_checkpoint: {} has optimizer state \"{}\" for a parameter the optimizer does not hold", path, key);
    MG_CHECK(std::find(wanted.begin(), wanted.end(), sname) != wanted.end(), FileError,
             "load_checkpoint: {} has optimizer state \"{}\", which {} does not keep", path, key, opt.name());
    const Variable& p = it->second;
    // a step count must be able to go on: INT64_MAX would only fail at the next step(), after the load
    const bool ok = sname == "step" ? (t.dim() == 0 && t.dtype() == DType::Int64 && t.data<int64_t>()[0] >= 0 &&
                                       t.data<int64_t>()[0] < std::numeric_limits<int64_t>::max())
                                    : (t.shape() == p.shape() && is_floating(t.dtype()));
    MG_CHECK(ok, FileError,
             "load_checkpoint: optimizer state \"{}\" in {} has {} {}{}, which does not fit parameter {} {}{}", key,
             path, dtype_name(t.dtype()), shape_str(t.shape()),
             sname == "step" && t.numel() == 1 && t.dtype() == DType::Int64 ? fmt::format(" = {}", t.data<int64_t>()[0])
                                                                            : "",
             pname, shape_str(p.shape()), sname == "step" ? " (a step count in [0, 2^63 - 1))" : "");
    new_state[p.impl().get()][sname] = sname == "step" ? t.clone() : t.to(p.dtype()).clone();
  }
  for (auto& [impl, st] : new_state)
    for (const std::string& sname : wanted) {
      std::string pname;
      for (auto& [n, v] : by_name)
        if (v.impl().get() == impl) pname = n;
      MG_CHECK(st.count(sname), FileError, "load_checkpoint: {} has optimizer state for {} but no \"{}{}.{}\"", path,
               pname, kPrefix, pname, sname);
    }
  return new_state;
}
}  // namespace

// Everything is read and checked before anything changes: a failed load leaves the model, the
// optimizer, the schedule and the generators as they were.
int64_t load_checkpoint_from(const SafeTensors& file, const std::string& path, nn::Module& model, Optimizer& opt,
                             LRScheduler* scheduler, const NamedGenerators& generators) {
  const Metadata meta{file, path};
  MG_CHECK(meta("optimizer") == opt.name(), FileError, "load_checkpoint: {} holds {} state but the optimizer is {}",
           path, meta("optimizer"), opt.name());
  const std::optional<int64_t> step = parse_counter(meta("step"));
  MG_CHECK(step.has_value(), FileError,
           "load_checkpoint: {} has step \"{}\" in its metadata; expected a whole number in [0, 2^63 - 1)", path,
           meta("step"));
  const GroupRates rates = read_group_rates(meta, opt);
  SchedulerState schedule = read_scheduler(meta, scheduler, rates.lrs.size());
  const auto new_generators = read_generators(meta, generators);
  const auto new_state = read_optimizer_state(file, path, model, opt);
  std::map<std::string, Tensor> shared;
  for (auto& [key, t] : file.tensors)
    if (key.rfind(kPrefix + "~", 0) == 0) shared[key.substr(kPrefix.size() + 1)] = t;
  opt.check_shared_state(shared);
  // The weights are checked (and then copied) last: nothing above has changed anything yet.
  nn::load_from(model, file, path, {.ignore_prefixes = {kPrefix}});
  for (const Group& g : opt.groups())
    for (const Variable& p : g.params) {
      auto it = new_state.find(p.impl().get());
      opt.state(p) = it == new_state.end() ? ParamState{} : it->second;
    }
  opt.load_shared_state(shared);
  for (size_t g = 0; g < rates.lrs.size(); ++g) {
    opt.groups()[g].lr = rates.lrs[g];
    opt.groups()[g].momentum = rates.momenta[g];
  }
  if (scheduler) {
    scheduler->restore(schedule.step, std::move(schedule.base_lrs));
    scheduler->load_state(schedule.state);
  }
  for (auto& [gen, g] : new_generators) *gen = g;
  return *step;
}

}  // namespace mg::optim
