// Optimizer checkpoints (optim::save_checkpoint / load_checkpoint): training resumes exactly, and
// a checkpoint that does not fit (other shapes, groups, settings, or a tampered file) changes nothing.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "file_helpers.h"

using namespace mg;
using namespace mgtest;
using testing::HasSubstr;

namespace {
// A few AdamW steps with a warm-up schedule on a fixed regression problem.
void train(TinyMLP& m, optim::AdamW& opt, optim::WarmupCosineLR& sched, int steps) {
  Generator g(123);
  Tensor x = randn({16, 3}, g), y = randn({16, 2}, g);
  for (int i = 0; i < steps; ++i) {
    Variable loss = mse_loss(m(Variable(x)), Variable(y));
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
  }
}
}  // namespace

TEST(Checkpoint, ResumeContinuesExactly) {
  const std::string path = temp_path("resume.safetensors");
  Generator g0(5);
  TinyMLP straight;
  straight.fc1.reset_parameters(g0);
  TinyMLP first;
  for (size_t i = 0; i < 4; ++i) first.parameters()[i].data().copy_(straight.parameters()[i].data());
  {
    optim::AdamW opt(straight.parameters());
    optim::WarmupCosineLR sched(opt, 2, 10);
    train(straight, opt, sched, 6);
  }
  {
    optim::AdamW opt(first.parameters());
    optim::WarmupCosineLR sched(opt, 2, 10);
    train(first, opt, sched, 3);
    optim::save_checkpoint(path, first, opt, 3, &sched);
  }
  TinyMLP resumed;                                      // different random init: everything must come from the file
  optim::AdamW opt(resumed.parameters(), {.lr = 0.5});  // and the schedule's base rate too
  optim::WarmupCosineLR sched(opt, 2, 10);
  const int64_t step = optim::load_checkpoint(path, resumed, opt, &sched);
  EXPECT_EQ(step, 3);
  EXPECT_EQ(sched.last_step(), 3);  // the schedule resumes where it stopped: no set_step by hand
  EXPECT_EQ(sched.base_lrs(), std::vector<double>{1e-3});
  EXPECT_EQ(opt.state(resumed.fc1.weight).at("step").item(), 3);
  train(resumed, opt, sched, 3);
  EXPECT_EQ(snapshot(resumed), snapshot(straight));  // bit for bit
  // The checkpoint still opens as plain weights; optimizer entries are named after parameters.
  SafeTensors f = load_safetensors(path);
  EXPECT_TRUE(f.find("optimizer.fc1.weight.exp_avg").defined());
  EXPECT_EQ(f.metadata.at("optimizer"), "AdamW");
}

TEST(Checkpoint, MismatchedCheckpointsChangeNothing) {
  const std::string path = temp_path("mismatch.safetensors");
  TinyMLP a;
  optim::AdamW opt_a(a.parameters());
  optim::WarmupCosineLR sched(opt_a, 1, 5);
  train(a, opt_a, sched, 2);
  optim::save_checkpoint(path, a, opt_a, 2);
  TinyMLP b;
  const auto before = snapshot(b);
  optim::SGD sgd(b.parameters());
  try {
    optim::load_checkpoint(path, b, sgd);
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds AdamW state but the optimizer is SGD"));
  }
  EXPECT_EQ(snapshot(b), before);
  // An optimizer over only part of the model cannot take state for the rest.
  optim::AdamW partial(b.fc2.parameters());
  EXPECT_THROW(optim::load_checkpoint(path, b, partial), FileError);
  EXPECT_EQ(snapshot(b), before);
  EXPECT_FALSE(partial.has_state(b.fc2.weight));
  // Weights-only files are not training checkpoints.
  nn::save(a, path);
  optim::AdamW opt_b(b.parameters());
  EXPECT_THROW(optim::load_checkpoint(path, b, opt_b), FileError);
  EXPECT_EQ(snapshot(b), before);
}

// The trap: a checkpoint of one optimizer loaded into another with other settings resumed a
// different run without a word. Every setting is checked, and the error names both values.

TEST(Checkpoint, OtherGroupsOrSettingsAreErrorsNamingBoth) {
  const std::string path = temp_path("settings.safetensors");
  TinyMLP a;
  optim::AdamW opt_a({{a.fc1.parameters(), {}}, {a.fc2.parameters(), {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR sched_a(opt_a, 1, 5);
  train(a, opt_a, sched_a, 2);
  optim::save_checkpoint(path, a, opt_a, 2, &sched_a);
  TinyMLP b;
  auto before = snapshot(b);
  auto refused = [&](optim::Optimizer& opt, optim::LRScheduler* sched, const std::string& why) {
    try {
      optim::load_checkpoint(path, b, opt, sched);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
    EXPECT_EQ(snapshot(b), before);
    for (auto& p : b.parameters()) EXPECT_FALSE(opt.has_state(p));
  };
  optim::AdamW one_group(b.parameters(), {.beta2 = 0.95});
  optim::WarmupCosineLR s1(one_group, 1, 5);
  refused(one_group, &s1, "saved by an optimizer with 2 parameter group(s); this AdamW has 1");
  optim::AdamW other_split({{{b.fc1.weight}, {}}, {{b.fc1.bias, b.fc2.weight, b.fc2.bias}, {.weight_decay = 0.0}}},
                           {.beta2 = 0.95});
  optim::WarmupCosineLR s2(other_split, 1, 5);
  refused(other_split, &s2, "saved with 2 parameter(s) in group 0; this AdamW has 1 there");
  optim::AdamW other_decay({{b.fc1.parameters(), {}}, {b.fc2.parameters(), {.weight_decay = 0.1}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR s3(other_decay, 1, 5);
  refused(other_decay, &s3, "saved with weight_decay 0 in group 1; this AdamW has 0.1");
  optim::AdamW other_beta({{b.fc1.parameters(), {}}, {b.fc2.parameters(), {.weight_decay = 0.0}}});
  optim::WarmupCosineLR s4(other_beta, 1, 5);
  refused(other_beta, &s4, "saved by an AdamW with beta2 = 0.95; this one has beta2 = 0.999");
  optim::AdamW same({{b.fc1.parameters(), {}}, {b.fc2.parameters(), {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR other_schedule(same, 2, 5);
  refused(same, &other_schedule, "saved by a WarmupCosineLR with warmup_steps = 1; this one has warmup_steps = 2");
  optim::StepLR step_lr(same, 3);
  refused(same, &step_lr, "holds a WarmupCosineLR schedule but the scheduler is a StepLR");
  refused(same, nullptr, "holds the state of a WarmupCosineLR learning-rate schedule; pass the scheduler");
  // a schedule built on another (one-group) optimizer: refused before the weights are touched
  optim::WarmupCosineLR of_another(one_group, 1, 5);
  refused(same, &of_another, "the WarmupCosineLR was made for an optimizer with 1 parameter groups");
  optim::WarmupCosineLR fits(same, 1, 5);
  EXPECT_EQ(optim::load_checkpoint(path, b, same, &fits), 2);
  EXPECT_EQ(fits.last_step(), 2);
  EXPECT_EQ(same.groups()[0].lr, opt_a.groups()[0].lr);
  // A file without a schedule cannot restore one.
  optim::save_checkpoint(path, a, opt_a, 2);
  TinyMLP c;
  before = snapshot(c);
  optim::AdamW fresh({{c.fc1.parameters(), {}}, {c.fc2.parameters(), {.weight_decay = 0.0}}}, {.beta2 = 0.95});
  optim::WarmupCosineLR s5(fresh, 1, 5);
  try {
    optim::load_checkpoint(path, c, fresh, &s5);
    ADD_FAILURE();
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds no learning-rate schedule, but a WarmupCosineLR was given"));
  }
  EXPECT_EQ(snapshot(c), before);
}

// Named tensors in and out: PyTorch's state_dict / load_state_dict(strict=False), a prefix for a
// sub-module, and a file held in memory.

TEST(Checkpoint, TamperedCheckpointsChangeNothing) {
  const std::string path = temp_path("tamper.safetensors"), bad = temp_path("tampered.safetensors");
  TinyMLP a;
  optim::AdamW opt_a(a.parameters());
  optim::WarmupCosineLR sched(opt_a, 1, 5);
  train(a, opt_a, sched, 2);
  optim::save_checkpoint(path, a, opt_a, 2);
  const SafeTensors good = load_safetensors(path);
  TinyMLP b;
  optim::AdamW opt_b(b.parameters(), {.lr = 0.5});
  const auto before = snapshot(b);
  auto refused = [&](std::vector<std::pair<std::string, Tensor>> tensors, std::map<std::string, std::string> meta,
                     const std::string& text) {
    SCOPED_TRACE(text);
    save_safetensors(bad, tensors, meta);
    try {
      optim::load_checkpoint(bad, b, opt_b);
      ADD_FAILURE() << "loaded a tampered checkpoint";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
    EXPECT_EQ(snapshot(b), before);
    EXPECT_FALSE(opt_b.has_state(b.fc1.weight));
    EXPECT_EQ(opt_b.groups()[0].lr, 0.5);
  };
  auto meta_with = [&](const std::string& k, const std::string& v) {
    auto m = good.metadata;
    m[k] = v;
    return m;
  };
  refused(good.tensors, meta_with("step", "-3"), "step \"-3\"");
  refused(good.tensors, meta_with("step", "12abc"), "step \"12abc\"");
  refused(good.tensors, meta_with("lr.0", "nan"), "lr.0 \"nan\"");
  refused(good.tensors, meta_with("lr.0", "1e-3garbage"), "lr.0 \"1e-3garbage\"");
  refused(good.tensors, meta_with("lr.1", "0.1"), "saved by an optimizer with 2 parameter group(s); this AdamW has 1");
  auto without = [&](const std::string& name) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (auto& [n, t] : good.tensors)
      if (n != name) out.emplace_back(n, t);
    return out;
  };
  refused(without("optimizer.fc1.weight.exp_avg_sq"), good.metadata, "no \"optimizer.fc1.weight.exp_avg_sq\"");
  auto with = [&](const std::string& name, const Tensor& t) {
    auto out = without(name);
    out.emplace_back(name, t);
    return out;
  };
  refused(with("optimizer.fc1.weight.step", from_vector<int64_t>({-1}, {})), good.metadata, "= -1");
  refused(with("optimizer.fc1.weight.bogus", zeros({4, 3})), good.metadata, "which AdamW does not keep");
}

namespace {
// A model with dropout (its masks drawn from the default generator) trained on batches whose rows
// are drawn from a generator of the run's own: both streams of random numbers must resume.
struct DropoutNet : nn::Callable<DropoutNet> {
  nn::Linear fc1{3, 16}, fc2{16, 2};
  nn::Dropout drop{{.p = 0.5}};
  DropoutNet() { register_module("fc1", fc1), register_module("fc2", fc2), register_module("drop", drop); }
  Variable forward(const Variable& x) const { return fc2(drop(relu(fc1(x)))); }
  std::string type_name() const override { return "DropoutNet"; }
};

// `steps` AdamW steps on 8 rows of a fixed data set, sampled by `batches`; the losses.
std::vector<double> train_sampled(DropoutNet& m, optim::AdamW& opt, Generator& batches, int steps) {
  Generator data(11);
  const Tensor x = randn({32, 3}, data), y = randn({32, 2}, data);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    const Tensor rows = multinomial(ones({32}), 8, /*replacement=*/false, batches);
    Variable loss = mse_loss(m(Variable(index_select(x, 0, rows))), Variable(index_select(y, 0, rows)));
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}
}  // namespace

// Without the generators' states a resumed run drew other dropout masks (loss 0.5487 against
// 0.5062 uninterrupted, at step 3 of the report); with them it is the same run, bit for bit.
TEST(Checkpoint, ResumeWithDropoutAndSamplingContinuesExactly) {
  const std::string path = temp_path("dropout.safetensors");
  auto start = [](DropoutNet& m) {
    Generator init(5);
    m.fc1.reset_parameters(init), m.fc2.reset_parameters(init);
  };
  DropoutNet straight, first;
  start(straight), start(first);
  manual_seed(1);
  Generator batches(2);
  std::vector<double> want;
  {
    optim::AdamW opt(straight.parameters(), {.lr = 0.01});
    want = train_sampled(straight, opt, batches, 6);
  }
  manual_seed(1);
  batches.manual_seed(2);
  {
    optim::AdamW opt(first.parameters(), {.lr = 0.01});
    train_sampled(first, opt, batches, 3);
    optim::save_checkpoint(path, first, opt, 3, nullptr, {{"default", &default_generator()}, {"batches", &batches}});
  }
  // elsewhere, later: other seeds everywhere; everything must come from the file
  manual_seed(99);
  batches.manual_seed(98);
  DropoutNet resumed;
  optim::AdamW opt(resumed.parameters(), {.lr = 0.01});
  EXPECT_EQ(
      optim::load_checkpoint(path, resumed, opt, nullptr, {{"default", &default_generator()}, {"batches", &batches}}),
      3);
  const std::vector<double> rest = train_sampled(resumed, opt, batches, 3);
  EXPECT_EQ(rest, std::vector<double>(want.begin() + 3, want.end()));
  EXPECT_EQ(snapshot(resumed), snapshot(straight));
  // the control: restoring the weights and the optimizer but not the generators is another run
  manual_seed(99);
  batches.manual_seed(98);
  DropoutNet partial;
  optim::AdamW opt2(partial.parameters(), {.lr = 0.01});
  optim::load_checkpoint(path, partial, opt2, nullptr, {});
  EXPECT_NE(train_sampled(partial, opt2, batches, 3), rest);
}

TEST(Checkpoint, GeneratorStatesAreCheckedBeforeAnythingChanges) {
  const std::string path = temp_path("rng.safetensors");
  TinyMLP m;
  optim::AdamW opt(m.parameters());
  Generator g(3);
  optim::save_checkpoint(path, m, opt, 1, nullptr, {{"default", &default_generator()}});
  TinyMLP other;
  optim::AdamW opt2(other.parameters());
  const auto before = snapshot(other);
  const Tensor state = g.get_state();
  // a generator the file does not hold: named, nothing changed
  try {
    optim::load_checkpoint(path, other, opt2, nullptr, {{"default", &default_generator()}, {"batches", &g}});
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no state for generator \"batches\""));
  }
  EXPECT_EQ(snapshot(other), before);
  EXPECT_EQ(g.get_state().to_vector<int64_t>(), state.to_vector<int64_t>());
  // a state that is not one (tampered metadata)
  SafeTensors f = load_safetensors(path);
  f.metadata["rng.default"] = "1 2 3";
  save_safetensors(path, f.tensors, f.metadata);
  EXPECT_THROW(optim::load_checkpoint(path, other, opt2), FileError);
  f.metadata["rng.default"] = "0 0 0 0 0 0";
  save_safetensors(path, f.tensors, f.metadata);
  EXPECT_THROW(optim::load_checkpoint(path, other, opt2), FileError);
  EXPECT_EQ(snapshot(other), before);
  // Generator::set_state refuses what get_state never returns, and round-trips what it does
  Generator h(7);
  h.next_normal();  // keeps a spare normal: the state has it
  Generator k(8);
  k.set_state(h.get_state());
  EXPECT_EQ(k.next_normal(), h.next_normal());
  EXPECT_EQ(k.next_u64(), h.next_u64());
  EXPECT_THROW(k.set_state(zeros({6})), ValueError);
  EXPECT_THROW(k.set_state(from_vector<int64_t>({1, 2, 3, 4, 2, 0}, {6})), ValueError);
}

// A step count of 2^63 - 1 loaded and then failed at the next step(); it is refused at the load,
// naming the entry, with the model and the optimizer as they were.
TEST(Checkpoint, StepCountThatCannotGoOnIsRefused) {
  const std::string path = temp_path("maxstep.safetensors");
  TinyMLP m;
  optim::AdamW opt(m.parameters());
  Variable loss = mse_loss(m(Variable(ones({2, 3}))), Variable(zeros({2, 2})));
  loss.backward();
  opt.step();
  optim::save_checkpoint(path, m, opt, 1);
  SafeTensors f = load_safetensors(path);
  for (auto& [n, t] : f.tensors)
    if (n == "optimizer.fc1.weight.step") t = from_vector<int64_t>({std::numeric_limits<int64_t>::max()}, {});
  save_safetensors(path, f.tensors, f.metadata);
  TinyMLP other;
  optim::AdamW opt2(other.parameters());
  const auto before = snapshot(other);
  try {
    optim::load_checkpoint(path, other, opt2);
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"optimizer.fc1.weight.step\""));
    EXPECT_THAT(e.what(), HasSubstr("= 9223372036854775807"));
  }
  EXPECT_EQ(snapshot(other), before);
  EXPECT_FALSE(opt2.has_state(other.fc1.weight));
  // the run's own step counter is a counter too
  optim::save_checkpoint(path, m, opt, 1);
  f = load_safetensors(path);
  f.metadata["step"] = "9223372036854775807";
  save_safetensors(path, f.tensors, f.metadata);
  EXPECT_THROW(optim::load_checkpoint(path, other, opt2), FileError);
  EXPECT_THROW(optim::save_checkpoint(path, m, opt, std::numeric_limits<int64_t>::max()), ValueError);
}
