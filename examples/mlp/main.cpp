// mlp: the first thing to run. A two-layer perceptron learns to separate two interleaved spirals
// in the plane -- a boundary no straight line can draw -- using nothing but minigrad's autograd:
// the weights are ordinary Variables, the loss is cross-entropy, and "training" is
// a momentum SGD step on each weight after every backward().
//
//   make build && build/examples/mlp/mlp     (make demo builds it too, the demo does not run it;
//   tests/test_example_models.cpp checks what it prints, across seeds)
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace mlp;
  Config c;
  CLI::App app{"mlp: a two-layer perceptron learns two spirals with autograd and momentum SGD"};
  example::add_run_options(app, c.seed, &c.out);
  app.add_option("--steps", c.steps, "full-batch SGD steps");
  app.add_option("--lr", c.lr, "learning rate");
  CLI11_PARSE(app, argc, argv);

  Generator gen(c.seed);
  const Data data = make_spirals(gen);
  MLP model(gen);
  fmt::print("minigrad mlp: 2 -> {} -> 2 on two spirals ({} points), full-batch SGD with momentum, {} threads\n",
             kHidden, 2 * kPointsPerClass, get_num_threads());
  const std::vector<double> losses = train(model, data, c);
  draw(model, data);
  const double acc = accuracy(model, data);
  fmt::print("\nloss {:.4f} at step 1, {:.4f} at step {}; final training accuracy: {:.1f}%\n", losses.front(),
             losses.back(), losses.size(), 100 * acc);

  viz::Report rep(c.out, "mlp: two spirals", "A 2 -> 64 -> 2 perceptron trained with autograd and momentum SGD.");
  rep.add_svg("decision_boundary.svg",
              viz::decision_boundary_svg(
                  probability_grid(model, 96, 96), data.x, data.y,
                  fmt::format("Decision boundary after {} steps ({:.1f}% accuracy)", c.steps, 100 * acc)),
              "Background: the model's P(class 1) over the plane; dots: the training points.");
  rep.add_svg(
      "loss.svg",
      viz::line_chart_svg({viz::Series::over_steps("train loss", losses)},
                          {.title = "Training loss", .x_label = "step", .y_label = "cross-entropy", .log_y = true}),
      "Full-batch cross-entropy.");
  fmt::print("pictures: {}\n", rep.write_index());
  return acc > 0.95 ? 0 : 1;
}
