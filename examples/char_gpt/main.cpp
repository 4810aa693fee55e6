// char_gpt: "Does the same machinery write text?"
//
// A decoder-only Transformer (GPT: token + position embeddings, causal self-attention blocks, a
// linear head) learns to continue text one character at a time. By default it reads the
// fortune-cookie sayings of Debian's `fortunes` package; --data FILE takes any text. It keeps a
// validation split, saves a checkpoint (weights + AdamW state + step) every --ckpt-every steps,
// and --resume continues a run exactly where it stopped: each step's batch is drawn from a
// generator seeded by (seed, step), so nothing else needs saving. Then it samples with
// temperature and top-k, and draws the loss curves and the attention of every head on a prompt.
// While it trains it records every head (inspect::Telemetry) on a fixed piece of validation text:
// runs/char_gpt/explorer.html replays the attention maps and head scores over the steps.
#include <CLI/CLI.hpp>

#include "../common/cli.h"  // add_run_options: --gemm, --seed, --out, --threads
#include "experiment.h"

int main(int argc, char** argv) {
  using namespace char_gpt;
  Config c;
  CLI::App app{"char_gpt: a character-level GPT on the fortunes corpus (or --data FILE)"};
  example::add_run_options(app, c.seed, &c.out, {.threads = false});
  app.add_option("--data", c.data, "text file to train on (default: Debian's fortunes)");
  app.add_option("--steps", c.steps, "total AdamW steps");
  app.add_option("--lr", c.lr, "peak learning rate");
  app.add_option("--context", c.context, "characters of context")->check(CLI::Range(8, 1024));
  app.add_option("--dim", c.dim, "model width");
  app.add_option("--heads", c.heads, "attention heads");
  app.add_option("--layers", c.layers, "Transformer blocks");
  app.add_option("--batch", c.batch, "sequences per step");
  app.add_option("--eval-every", c.eval_every, "validation loss every N steps");
  app.add_option("--ckpt-every", c.ckpt_every, "checkpoint every N steps");
  app.add_option("--every", c.every, "telemetry every N steps");
  app.add_flag("--resume", c.resume, "continue from OUT/checkpoint.safetensors");
  app.add_flag("--bf16", c.bf16, "bfloat16 matrix products with float32 sums (mixed precision, as torch.autocast)");
  app.add_flag("--bf16-outputs", c.bf16_outputs,
               "--bf16, and the products write bfloat16 as torch.autocast's do (activations stay bfloat16)");
  app.add_option("--threads", c.threads, "threads per process (0: the cores divided among the processes)");
  app.add_option("--stop-at", c.stop_at, "stop after this step, as if interrupted (then --resume)");
  app.add_option("--prompt", c.prompt, "text to continue");
  app.add_option("--sample-len", c.sample_len, "characters to sample");
  app.add_option("--temperature", c.temperature, "sampling temperature")->check(CLI::PositiveNumber);
  app.add_option("--top-k", c.top_k, "sample among the k most likely characters")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  c.bf16 = c.bf16 || c.bf16_outputs;

  try {
    const Processes processes = start_processes(&argc, &argv);
    c.rank = processes.rank, c.world = processes.world;
    MG_CHECK(c.batch % c.world == 0, ValueError, "char_gpt: --batch {} does not split evenly over {} processes",
             c.batch, c.world);
    if (c.threads > 0 || c.world > 1)
      set_num_threads(c.threads > 0 ? c.threads : std::max<int>(1, get_num_threads() / c.world));
    const Data d = load_data(c);
    Generator g(c.seed);
    models::GPT m(d.vocab.size(), c.context, gpt_options(c), g);
    optim::AdamW opt(m.parameters(), {.lr = c.lr});
    optim::WarmupCosineLR sched(opt, std::max(1, c.steps / 20), c.steps, 0.1);
    std::filesystem::create_directories(c.out);
    const std::string ckpt = c.out + "/checkpoint.safetensors";
    int64_t start = 0;
    if (c.resume) {                                          // every process reads rank 0's checkpoint
      start = optim::load_checkpoint(ckpt, m, opt, &sched);  // the schedule resumes too
      if (c.rank == 0) fmt::print("resumed from {} at step {}\n", ckpt, start);
    }
    if (c.rank == 0)
      fmt::print("{} characters ({} distinct), {} for training; {} parameters{}\n", d.text.size(), d.vocab.size(),
                 d.train.size(), m.num_parameters(),
                 c.world > 1 ? fmt::format("; {} processes x {} threads", c.world, get_num_threads()) : "");
    const History h = train(m, opt, sched, d, c, start, ckpt, synchronise_gradients(m, c.world));
    if (c.rank != 0) return 0;  // rank 0 reports, samples and draws
    if (!h.val_losses.empty())
      fmt::print("validation loss {:.4f} (uniform guessing: {:.4f})\n", h.val_losses.back(),
                 std::log(static_cast<double>(d.vocab.size())));
    Generator sg(c.seed + 1);
    const std::string sampled = sample(m, d.vocab, c, sg);
    fmt::print("\n--- sample (temperature {:.2f}, top-k {}) ---\n{}\n---\n", c.temperature, c.top_k, sampled);
    const std::vector<inspect::HeadScore> scores = label_heads(m, d, c);
    fmt::print("\nwhat each head does (measured):\n{}", score_table(scores));
    fmt::print("checkpoint: {}\npictures: {}\n", ckpt, write_report(m, d, c, h, sampled, scores));
    if (const std::string page = save_explorer(c, h); !page.empty())
      fmt::print("{}explorer: {}\n", explorer_summary(h), page);
  } catch (const mg::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    stop_other_processes();
    return 1;
  }
  return 0;
}
