// digits_cnn: "What does a convolution learn, on real handwriting?"
//
// A small convolutional network reads the handwritten-digits data set (1,797 images of 8x8 pixels,
// 43 writers, UCI's "Optical Recognition of Handwritten Digits"), as Debian's python3-sklearn
// package ships it; scripts/fetch-digits takes the one file out of the package as datasets/digits.csv.
// A seeded 80/20 split keeps 359 images the model never trains on; the run reports its accuracy
// on them and draws the learned 3x3 filters, the confusion matrix and the digits it gets wrong.
//
//   conv1  Conv2d(1, 16, 3, padding 1)  + BatchNorm2d + ReLU     (N, 1, 8, 8)  -> (N, 16, 8, 8)
//   conv2  Conv2d(16, 32, 3, padding 1) + BatchNorm2d + ReLU     (N, 16, 8, 8) -> (N, 32, 8, 8)
//   pool   MaxPool2d(2)                                          (N, 32, 8, 8) -> (N, 32, 4, 4)
//   fc1    Flatten + Linear(512, 64) + ReLU + Dropout(0.25)      -> (N, 64)
//   fc2    Linear(64, 10)                                        -> (N, 10) logits
//
//   scripts/fetch-digits && build/examples/digits_cnn/digits_cnn
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace digits_cnn;
  Config c;
  CLI::App app{"digits_cnn: a small CNN on 1,797 handwritten 8x8 digits (scripts/fetch-digits gets them)"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--data", c.data, "the digits CSV written by scripts/fetch-digits");
  app.add_option("--epochs", c.epochs, "passes over the training images")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  app.add_option("--test-fraction", c.test_fraction, "share of images held out")->check(CLI::Range(0.05, 0.5));
  CLI11_PARSE(app, argc, argv);
  try {
    const Split s = split(load_digits(c.data), c.test_fraction, c.seed);
    Generator g(c.seed);
    DigitsCNN m(g);
    fmt::print("{} training and {} held-out images; {} parameters\n", s.train.y.size(0), s.test.y.size(0),
               m.num_parameters());
    const Result r = train(m, s, c);
    fmt::print(
        "held-out accuracy: {:.2f}% ({} of {} wrong)\n\nconfusion matrix (rows: true digit, columns: predicted)\n{}\n",
        100 * r.test.accuracy, r.test.wrong.size(), s.test.y.size(0),
        viz::terminal_heatmap(r.test.confusion, {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
                              {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
    fmt::print("pictures: {}\n", write_report(m, s, r, c));
  } catch (const mg::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
