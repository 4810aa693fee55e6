#pragma once
// digits_cnn, the experiment: the model, the data, the training, what is measured and the report
// of it, everything the tests include; main.cpp is the command line that runs it.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "minigrad/minigrad.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"
#include "minigrad/viz/terminal.h"

namespace digits_cnn {
using namespace mg;

constexpr int64_t kImages = 1797, kSide = 8, kClasses = 10;

struct Config {
  std::string data = "datasets/digits.csv";  // written by scripts/fetch-digits
  int epochs = 30;                           // passes over the training images
  int64_t batch = 32;                        // images per AdamW step
  double lr = 2e-3;                          // AdamW learning rate (cosine-decayed to 10%)
  double test_fraction = 0.2;                // images held out for the accuracy
  uint64_t seed = 0;                         // split, weights, batches and dropout
  std::string out = "runs/digits_cnn";
};

struct Data {
  Tensor x;  // (N, 1, 8, 8) float32, pixel values 0..16 scaled to 0..1
  Tensor y;  // (N) int64 digits
};

// datasets/digits.csv: one image per line, 64 pixel values (0-16) row by row, then the digit.
Data load_digits(const std::string& path) {
  std::ifstream in(path);
  MG_CHECK(in.good(), FileError,
           "digits_cnn: cannot read {}; run scripts/fetch-digits first (it takes the file from "
           "Debian's python3-sklearn package)",
           path);
  std::vector<float> px;
  std::vector<int64_t> labels;
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string f;
    std::vector<double> v;
    while (std::getline(fields, f, ',')) v.push_back(std::stod(f));
    MG_CHECK(v.size() == kSide * kSide + 1 && v.back() >= 0 && v.back() < kClasses, FileError,
             "digits_cnn: {} line {} is not 64 pixel values and a digit", path, labels.size() + 1);
    for (size_t i = 0; i < kSide * kSide; ++i) px.push_back(static_cast<float>(v[i] / 16.0));
    labels.push_back(static_cast<int64_t>(v.back()));
  }
  const auto n = static_cast<int64_t>(labels.size());
  MG_CHECK(n == kImages, FileError, "digits_cnn: {} has {} images, expected {}", path, n, kImages);
  return {from_vector(px, {n, 1, kSide, kSide}), from_vector(labels, {n})};
}

// A seeded shuffle, then the first test_fraction of it held out.
struct Split {
  Data train, test;
  Tensor test_ids;  // row of each test image in the file
};

Split split(const Data& d, double test_fraction, uint64_t seed) {
  Generator g(seed);
  const Tensor perm = randperm(d.y.size(0), g);
  const auto n_test = static_cast<int64_t>(test_fraction * static_cast<double>(d.y.size(0)));
  const Tensor test = perm.narrow(0, 0, n_test), train = perm.narrow(0, n_test, d.y.size(0) - n_test);
  return {{index_select(d.x, 0, train), index_select(d.y, 0, train)},
          {index_select(d.x, 0, test), index_select(d.y, 0, test)},
          test};
}

class DigitsCNN : public nn::Callable<DigitsCNN> {
 public:
  explicit DigitsCNN(Generator& g)
      : conv1(1, 16, 3, {.padding = 1}, g),
        conv2(16, 32, 3, {.padding = 1}, g),
        bn1(16),
        bn2(32),
        pool(2),
        fc1(32 * 4 * 4, 64, {}, g),
        fc2(64, kClasses, {}, g),
        drop({.p = 0.25}, g) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("drop", drop);
  }
  /// x (N, 1, 8, 8) -> logits (N, 10). Not const: in training mode BatchNorm updates its running statistics.
  Variable forward(const Variable& x) {
    Variable h = relu(bn1(conv1(x)));    // (N, 16, 8, 8)
    h = pool(relu(bn2(conv2(h))));       // (N, 32, 4, 4)
    h = drop(relu(fc1(flatten(h, 1))));  // (N, 64)
    return fc2(h);                       // (N, 10)
  }
  std::string type_name() const override { return "DigitsCNN"; }

  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  nn::MaxPool2d pool;
  nn::Linear fc1, fc2;
  nn::Dropout drop;
};

struct Evaluation {
  double accuracy = 0;
  Tensor predicted;            // (N) int64
  Tensor confusion;            // (10, 10) float32: row = true digit, column = predicted
  std::vector<int64_t> wrong;  // rows of the evaluated set that were misclassified
};

// Accuracy in eval mode: BatchNorm uses its running statistics, dropout is off.
Evaluation evaluate(DigitsCNN& m, const Data& d) {
  NoGradGuard no_grad;
  const bool was_training = m.is_training();
  m.eval();
  Evaluation e;
  e.predicted = argmax(m(Variable(d.x)).data(), -1);
  m.train(was_training);
  const std::vector<int64_t> p = e.predicted.to_vector<int64_t>(), y = d.y.to_vector<int64_t>();
  std::vector<float> conf(kClasses * kClasses, 0);
  for (size_t i = 0; i < p.size(); ++i) {
    conf[y[i] * kClasses + p[i]] += 1;
    if (p[i] != y[i]) e.wrong.push_back(static_cast<int64_t>(i));
  }
  e.confusion = from_vector(conf, {kClasses, kClasses});
  e.accuracy = p.empty() ? 0 : 1.0 - static_cast<double>(e.wrong.size()) / static_cast<double>(p.size());
  return e;
}

struct Result {
  std::vector<double> train_loss, test_accuracy;  // per epoch
  Evaluation test;                                // after the last epoch
};

// AdamW on shuffled mini-batches (a DataLoader: a new seeded order every epoch), the learning
// rate cosine-decayed over all steps.
Result train(DigitsCNN& m, const Split& s, const Config& c) {
  data::DataLoader loader(data::TensorDataset({s.train.x, s.train.y}),
                          {.batch_size = c.batch, .shuffle = true, .seed = c.seed + 1});
  const int64_t n = loader.dataset().size();
  optim::AdamW opt(m.parameters(), {.lr = c.lr, .weight_decay = 1e-4});
  optim::WarmupCosineLR sched(opt, 0, c.epochs * loader.size(), 0.1);
  Result r;
  viz::ProgressBar bar(c.epochs, "train");
  m.train();
  for (int epoch = 1; epoch <= c.epochs; ++epoch) {
    double total = 0;
    for (const data::Batch& b : loader) {  // b[0]: images (batch, 1, 8, 8), b[1]: labels (batch)
      Variable loss = cross_entropy(m(Variable(b[0])), b[1]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      sched.step();
      total += loss.item() * static_cast<double>(b[1].size(0));
    }
    r.train_loss.push_back(total / static_cast<double>(n));
    r.test_accuracy.push_back(evaluate(m, s.test).accuracy);
    bar.update(epoch, r.train_loss.back(), r.test_accuracy.back(), n);
  }
  bar.finish();
  r.test = evaluate(m, s.test);
  return r;
}

// The 16 first-layer filters side by side, 2 rows of 8, with a hatched cell between them.
Tensor filter_grid(const nn::Conv2d& conv) {
  const Tensor w = conv.weight.data().to(DType::Float32);  // (16, 1, 3, 3)
  const int64_t rows = 2, cols = w.size(0) / rows, k = w.size(2);
  Tensor grid = full({rows * (k + 1) - 1, cols * (k + 1) - 1}, -INFINITY);
  for (int64_t f = 0; f < w.size(0); ++f)
    grid.narrow(0, (f / cols) * (k + 1), k).narrow(1, (f % cols) * (k + 1), k).copy_(w.narrow(0, f, 1).reshape({k, k}));
  return grid;
}

std::string write_report(const DigitsCNN& m, const Split& s, const Result& r, const Config& c) {
  const int64_t n_train = s.train.y.size(0), n_test = s.test.y.size(0);
  viz::Report rep(
      c.out, "digits_cnn: a convolutional network on handwritten digits",
      fmt::format("A small CNN (two 3x3 convolutions with batch norm, a max-pool, two linear layers) trained "
                  "on {} 8x8 images of handwritten digits and tested on {} it never saw: {:.2f}% right.",
                  n_train, n_test, 100 * r.test.accuracy));
  std::vector<double> epochs;
  for (size_t i = 0; i < r.train_loss.size(); ++i) epochs.push_back(static_cast<double>(i + 1));
  rep.add_svg("loss.svg",
              viz::line_chart_svg({{"training loss", epochs, r.train_loss}},
                                  {.title = "training loss", .x_label = "epoch", .y_label = "cross-entropy"}),
              "Mean cross-entropy over each epoch's mini-batches.");
  rep.add_svg("test_accuracy.svg",
              viz::line_chart_svg({{"held-out accuracy", epochs, r.test_accuracy}},
                                  {.title = "held-out accuracy", .x_label = "epoch", .y_label = "accuracy"}),
              fmt::format("Accuracy on the {} held-out images after each epoch (eval mode).", n_test));
  rep.add_svg(
      "filters.svg",
      viz::heatmap_svg(filter_grid(m.conv1),
                       {.title = "conv1: the 16 learned 3x3 filters", .diverging = true, .annotate = 0, .cell = 20}),
      "The first convolution's filters (red positive, blue negative), which start as uniform noise. Each one "
      "slides over the image and responds where the ink matches it: strongly where red cells meet ink and blue "
      "cells meet paper.");
  std::vector<std::string> digits;
  for (int64_t i = 0; i < kClasses; ++i) digits.push_back(std::to_string(i));
  rep.add_svg(
      "confusion.svg",
      viz::heatmap_svg(r.test.confusion, {.title = "confusion matrix (held-out images)",
                                          .row_labels = digits,
                                          .col_labels = digits,
                                          .row_title = "true digit",
                                          .col_title = "predicted digit",
                                          .annotate = 1,
                                          .cell = 28}),
      "Row d counts the held-out images of digit d by what the model called them: all on the diagonal is perfect.");
  const std::vector<int64_t> p = r.test.predicted.to_vector<int64_t>(), y = s.test.y.to_vector<int64_t>(),
                             file_row = s.test_ids.to_vector<int64_t>();
  for (size_t i = 0; i < std::min<size_t>(r.test.wrong.size(), 12); ++i) {
    const int64_t w = r.test.wrong[i];
    rep.add_svg(
        fmt::format("wrong_{}.svg", i),
        viz::heatmap_svg(
            s.test.x.narrow(0, w, 1).reshape({kSide, kSide}),
            {.title = fmt::format("a {} read as {}", y[w], p[w]), .vmin = 0, .vmax = 1, .annotate = 0, .cell = 14}),
        fmt::format("Held-out image (line {} of datasets/digits.csv): a {} the model read as a {}.", file_row[w] + 1,
                    y[w], p[w]));
  }
  return rep.write_index();
}

}  // namespace digits_cnn
