// The one-call paths on whole model folders, timed as their users run them (bench/run.py puts them
// beside sentence-transformers, transformers' generate() and the `tokenizers` library, run by
// bench/torch_folders.py on the same folders and inputs):
//
//   bench_folders encode   --folder DIR --sentences FILE   SentenceTransformer::encode, sentences/s
//   bench_folders generate --folder DIR                    greedy GPT::generate: 128 new tokens after a
//                                                          32-token prompt, tokens/s
//   bench_folders tokenize --folder DIR --sentences FILE   AutoTokenizer::encode_batch, sentences/s
//
// Each prints one line of key=value pairs. FILE holds one sentence per line. Each run is repeated
// --repeats times after one warm-up run, and the best time is reported (the least disturbed by the
// machine's other work).
#include <chrono>
#include <fstream>

#include <CLI/CLI.hpp>

#include "minigrad/minigrad.h"

using namespace mg;

namespace {
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  MG_CHECK(in.is_open(), FileError, "bench_folders: cannot open {}", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

template <class F>
double best_seconds(int repeats, const F& run) {
  run();  // warm-up: allocator, thread pool, caches
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_folders: encode, generate and tokenize on model folders"};
  std::string mode, folder, sentences_path;
  int repeats = 3, threads = 2, new_tokens = 128, prompt_tokens = 32, batch_size = 32;
  app.add_option("mode", mode, "encode, generate or tokenize")->required();
  app.add_option("--folder", folder, "the model folder")->required();
  app.add_option("--sentences", sentences_path, "one sentence per line (encode, tokenize)");
  app.add_option("--repeats", repeats, "timed runs after one warm-up; the best is reported");
  app.add_option("--threads", threads, "threads for minigrad's loops and OpenBLAS");
  app.add_option("--new-tokens", new_tokens, "generate: new tokens");
  app.add_option("--prompt-tokens", prompt_tokens, "generate: prompt length");
  app.add_option("--batch-size", batch_size, "encode: sentences per batch");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);
  try {
    if (mode == "encode") {
      const std::vector<std::string> s = read_lines(sentences_path);
      const auto st = models::SentenceTransformer::from_pretrained(folder);
      Tensor e;
      const double t = best_seconds(repeats, [&] { e = st.encode(s, {.batch_size = batch_size}); });
      fmt::print("minigrad mode=encode sentences={} dim={} seconds={:.4f} sentences/s={:.1f} threads={}\n", s.size(),
                 e.size(1), t, static_cast<double>(s.size()) / t, threads);
    } else if (mode == "generate") {
      const auto gpt = models::gpt2_from_pretrained(folder);
      // the prompt: token ids 1 .. prompt_tokens (any ids do: the weights are random)
      const Tensor prompt = arange(1, prompt_tokens + 1).reshape({1, prompt_tokens});
      Tensor out;
      const double t = best_seconds(
          repeats, [&] { out = gpt->generate(prompt, {.max_new_tokens = new_tokens, .use_cache = true}); });
      fmt::print("minigrad mode=generate params={} prompt={} new_tokens={} seconds={:.4f} tokens/s={:.1f} threads={}\n",
                 gpt->num_parameters(), prompt_tokens, out.size(1) - prompt_tokens, t,
                 static_cast<double>(out.size(1) - prompt_tokens) / t, threads);
    } else if (mode == "tokenize") {
      const std::vector<std::string> s = read_lines(sentences_path);
      const auto tok = data::AutoTokenizer::from_pretrained(folder);
      int64_t tokens = 0;
      const double t = best_seconds(repeats, [&] {
        const data::BatchEncoding b = tok.encode_batch(s);
        tokens = sum(b.attention_mask).item<int64_t>();
      });
      fmt::print("minigrad mode=tokenize sentences={} tokens={} seconds={:.4f} sentences/s={:.1f}\n", s.size(), tokens,
                 t, static_cast<double>(s.size()) / t);
    } else {
      fmt::print(stderr, "bench_folders: unknown mode '{}' (encode, generate or tokenize)\n", mode);
      return 2;
    }
  } catch (const Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
