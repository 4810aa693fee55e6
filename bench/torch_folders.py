#!/usr/bin/env python3
"""The twins of bench/folders/main.cpp, on the same folders and inputs, run by bench/run.py with
each PyTorch it has (2.x from PyPI, and 1.13 with the last transformers and sentence-transformers
that support it):

  torch_folders.py encode   --folder DIR --sentences FILE   SentenceTransformer(DIR).encode(sentences)
  torch_folders.py generate --folder DIR                    GPT2LMHeadModel.generate, greedy, 128 new
                                                            tokens after 32, with its KV cache
  torch_folders.py tokenize --folder DIR --sentences FILE   the `tokenizers` library's encode_batch
                                                            (what a fast tokenizer runs), padded
  torch_folders.py make-gpt2 --folder DIR                   write a GPT-2-small-shaped folder (124 M
                                                            parameters, random weights) with transformers

Prints one line of key=value pairs, as bench_folders does; the best of --repeats runs after a warm-up.
"""
import argparse
import os
import time


def best_seconds(repeats, run):
    run()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["encode", "generate", "tokenize", "make-gpt2"])
    p.add_argument("--folder", required=True)
    p.add_argument("--sentences")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    a = p.parse_args()
    # the `tokenizers` library's thread pool reads this when it starts: the same threads as minigrad
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    version = torch.__version__.split("+")[0]

    if a.mode == "make-gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config())  # GPT-2 small: 12 layers, 768 wide, 12 heads, vocab 50257
        model.save_pretrained(a.folder, safe_serialization=True)
        print(f"wrote {a.folder}: {sum(q.numel() for q in model.parameters())} parameters")
        return

    if a.mode in ("encode", "tokenize"):
        with open(a.sentences, encoding="utf-8") as f:
            sentences = f.read().split("\n")
        if sentences and sentences[-1] == "":
            sentences.pop()

    if a.mode == "encode":
        from sentence_transformers import SentenceTransformer
        st = SentenceTransformer(a.folder, device="cpu")
        t = best_seconds(a.repeats, lambda: st.encode(sentences, batch_size=a.batch_size))
        print(f"torch={version} mode=encode sentences={len(sentences)} seconds={t:.4f} "
              f"sentences/s={len(sentences) / t:.1f} threads={a.threads}")
    elif a.mode == "generate":
        from transformers import GPT2LMHeadModel
        model = GPT2LMHeadModel.from_pretrained(a.folder).eval()
        prompt = torch.arange(1, a.prompt_tokens + 1).reshape(1, -1)
        out = {}

        def run():
            with torch.no_grad():
                out["ids"] = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                            max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                                            pad_token_id=0, use_cache=True)
        t = best_seconds(a.repeats, run)
        n = out["ids"].shape[1] - a.prompt_tokens
        print(f"torch={version} mode=generate new_tokens={n} seconds={t:.4f} tokens/s={n / t:.1f} threads={a.threads}")
    else:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(a.folder, "tokenizer.json"))
        tok.no_truncation()
        tok.enable_padding(pad_id=0)
        t = best_seconds(a.repeats, lambda: tok.encode_batch(sentences))
        print(f"tokenizers mode=tokenize sentences={len(sentences)} seconds={t:.4f} "
              f"sentences/s={len(sentences) / t:.1f} threads={a.threads}")


if __name__ == "__main__":
    main()
