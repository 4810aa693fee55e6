#!/usr/bin/env python3
"""Hugging Face's ids for data/bpe.h (GPT-2's byte-level BPE), written to tests/golden/.

Writes
  bpe/vocab.json, bpe/merges.txt  a small byte-level BPE in GPT-2's file format, trained here on
                                  TRAINING_TEXT (400 tokens: <|endoftext|>, the 256 bytes, 143 merges)
  bpe.txt                         ~70 tricky texts with the ids GPT2TokenizerFast gives under it, and
                                  a few id lists whose bytes are not valid UTF-8, with their decode

Run with the venv that has transformers 5.x and tokenizers (no network needed):
    build/torch2-venv/bin/python tests/golden/gen_bpe.py
Training is deterministic: two runs write byte-identical files (the script trains twice and checks).

NOTE: in transformers 5, GPT2Tokenizer and GPT2TokenizerFast are one class (the `tokenizers`
backend): there is no pure-Python "slow" tokenizer left to compare with. So this script carries its
own slow one, reference_encode(), written after OpenAI's encoder.py (the `regex` module's pattern,
then "merge every occurrence of the lowest-ranked pair" until none is left), and checks that it
agrees with the fast one on every case.
NOTE: GPT2Tokenizer(vocab_file=..., merges_file=...) silently ignores both files in transformers 5
(it makes a 1-token tokenizer); the files are passed positionally or through from_pretrained(dir),
and we check that the loaded tokenizer has all 400 tokens.

Line format of bpe.txt (tab-separated; "." stands for an empty field; # starts a comment):
    vocab_size  400
    encode  text  ids  decoded     text and decoded as UTF-8 bytes in hex, ids space-separated
    decode  ids  decoded           decoded (hex) has U+FFFD where the bytes are not valid UTF-8
"""
import hashlib
import json
import os
import shutil
import tempfile

import regex
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Tokenizer, GPT2TokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bpe")
EOT = "<|endoftext|>"
VOCAB_SIZE = 400

# English with punctuation, digits and contractions, some accented and non-Latin words, tabs, double
# spaces and blank lines.
TRAINING_TEXT = """\
The quick brown fox doesn't stop; it jumps over the lazy dog, and we'll see it again tomorrow.
I'm sure they're right: it's 2024, and the 12 dogs ran 3.5 km in 15:30 minutes! Isn't that fast?
Don't worry\tabout  double  spaces, or\ttabs in the text; we've seen worse, haven't we?

She said "hello" to the people of the town, then the people said hello back. You'd think
they'd stop there, but they didn't: the town held a party on 2023-07-04 at 18:00 for 250 guests.

Café crème, naïve résumé, Zürich and São Paulo are words with accents. Привет, мир! Как дела?
東京 and 日本 are written in kanji; 안녕하세요 is Korean. We'll learn them all, won't we?
The end.  The end.\tThe end.
"""


def train(folder):
    """Train the BPE on TRAINING_TEXT and save vocab.json and merges.txt into `folder`."""
    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator([TRAINING_TEXT] * 3, vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=[EOT],
                            show_progress=False)
    os.makedirs(folder, exist_ok=True)
    tok.save_model(folder)


def md5s(folder):
    return {n: hashlib.md5(open(os.path.join(folder, n), "rb").read()).hexdigest() for n in ("vocab.json", "merges.txt")}


# ---- a slow reference after OpenAI's encoder.py, to cross-check the fast tokenizer ----

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_to_char():
    """Printable bytes stand for themselves; the other 68 get the code points 256, 257, ... in order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Reference:
    def __init__(self, folder):
        self.vocab = json.load(open(os.path.join(folder, "vocab.json"), encoding="utf-8"))
        lines = open(os.path.join(folder, "merges.txt"), encoding="utf-8").read().split("\n")
        lines = [l for l in lines if l and not l.startswith("#version")]
        self.rank = {tuple(l.split(" ")): i for i, l in enumerate(lines)}
        self.bytes = byte_to_char()

    def bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = {(a, b) for a, b in zip(parts, parts[1:])}
            best = min(pairs, key=lambda p: self.rank.get(p, float("inf")))
            if best not in self.rank:
                break
            merged, i = [], 0
            while i < len(parts):  # every occurrence, left to right
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return parts

    def encode(self, text):
        ids = []
        chunks = text.split(EOT)
        for k, chunk in enumerate(chunks):
            if k > 0:
                ids.append(self.vocab[EOT])
            for word in PATTERN.findall(chunk):
                mapped = "".join(self.bytes[b] for b in word.encode("utf-8"))
                ids += [self.vocab[t] for t in self.bpe(mapped)]
        return ids


# ---- the cases ----

def cases():
    long_words = ("The quick brown fox jumps over the lazy dog; don't stop. " * 40)[:2000]
    return [
        "hello world", "Hello World", "The quick brown fox doesn't stop", "I'm", "they're", "'s at the start",
        "'S 'M 'LL upper-case contractions", "it's we'll you'd I've we're isn't", "''s '' 's", "don't'll",
        "a   b", "trailing spaces   ", "   leading spaces", " ", "  ", "\n\n", "a\n\nb", "line\r\nbreak",
        "tab\tseparated\t\tcolumns", "\t", "mixed \t\n whitespace \n", "2024-11-25 12:30", "3.14159 and 1,000,000",
        "x1y2z3", "emoji 😀 and 👍🏽 and 👨‍👩‍👧", "东京 is 東京, 日本語のテキスト", "naïve café", "Zürich São Paulo",
        "e\u0301 combining acute, a\u0308\u0304 two marks", "\u0301leading mark", "Привет, мир!",
        "مرحبا بالعالم", "नमस्ते दुनिया", "สวัสดีครับ", "안녕하세요 세계",
        "a<|endoftext|>b", "a <|endoftext|> b", "<|endoftext|>", "<|endoftext|><|endoftext|>",
        "text<|endoftext|>\n\nnext", "<|endoftext|", "<|ENDOFTEXT|>", "<<|endoftext|>>", "", long_words, "a" * 2000,
        "unseen words: xylophone quizzical zebra jazz", "supercalifragilisticexpialidocious",
        "no\u00a0break\u3000ideographic\u2028line\u2029para\u0085nel\u000bvt\u000cff", "file\x1csep\x1dgroup",
        # \s is White_Space: U+001C..U+001F are symbols (str.isspace says space), U+0085 is a space
        "a\x1c\x1db", " \x1cy", "nel\u0085\u0085next", " \u0085y", "a\u00a0\u00a0b", "a \u00a0b", "a\u2028\u2028b",
        "control\x00\x01\x7f chars", "zero\u200bwidth\u200djoiner\ufeffbom\u00adsoft", "\ufffd replacement",
        "Ⅻ ½ ² ٣ numbers of other kinds", "$100 & 50% @home #tag", "!!! ??? ...", " !", " 1", " a", "a  ",
        "  hello  world  ", "😀😀😀", "a\u0000b",
    ]


def byte_ids(vocab, data):
    """The ids of the single-byte tokens for `data` (so the concatenation may be invalid UTF-8)."""
    table = byte_to_char()
    return [vocab[table[b]] for b in data]


def hexed(s):
    return (s.encode("utf-8") if isinstance(s, str) else s).hex() or "."


def joined(ids):
    return " ".join(map(str, ids)) or "."


def main():
    # train twice into fresh folders: the files must be byte-identical
    runs = [tempfile.mkdtemp(prefix="gen_bpe_") for _ in range(2)]
    for d in runs:
        train(d)
    sums = [md5s(d) for d in runs]
    assert sums[0] == sums[1], f"training is not deterministic: {sums}"
    os.makedirs(OUT, exist_ok=True)
    for n in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(runs[0], n), os.path.join(OUT, n))
    for d in runs:
        shutil.rmtree(d)
    print("md5", sums[0])

    vocab = json.load(open(os.path.join(OUT, "vocab.json"), encoding="utf-8"))
    assert len(vocab) == VOCAB_SIZE and vocab[EOT] == 0, len(vocab)
    vocab_path, merges_path = os.path.join(OUT, "vocab.json"), os.path.join(OUT, "merges.txt")
    fast = GPT2TokenizerFast.from_pretrained(OUT)
    positional = GPT2Tokenizer(vocab_path, merges_path)
    for t in (fast, positional):
        assert len(t) == VOCAB_SIZE and t.backend_tokenizer.get_vocab_size() == VOCAB_SIZE, len(t)
    slow = Reference(OUT)

    rows, differ = [], []
    for text in cases():
        ids = fast(text)["input_ids"]
        assert positional(text)["input_ids"] == ids, text
        if slow.encode(text) != ids:
            differ.append(text)
        decoded = fast.decode(ids)
        assert decoded == text, (text, decoded)
        rows.append(f"encode\t{hexed(text)}\t{joined(ids)}\t{hexed(decoded)}")
    if differ:
        print("the encoder.py reference differs from GPT2TokenizerFast (the fast one is written) on:", differ)

    # bytes that are not valid UTF-8: a cut emoji, stray continuation bytes, an overlong "/", a
    # surrogate, bytes that never occur in UTF-8; decode replaces each maximal bad part with U+FFFD
    bad = [b"\xf0\x9f", b"\xf0\x9f\x98", b"a\x80b", b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf0\x80\x80",
           b"\xe2\x82", b"\xe2\x82x", b"\xf4\x90\x80\x80", b"ok\xc3"]
    for data in bad:
        ids = byte_ids(vocab, data)
        decoded = fast.decode(ids)
        assert decoded == data.decode("utf-8", errors="replace"), (data, decoded)
        rows.append(f"decode\t{joined(ids)}\t{hexed(decoded)}")
    # the special token decodes to its text, between others
    ids = fast("a<|endoftext|> b")["input_ids"]
    rows.append(f"decode\t{joined(ids)}\t{hexed(fast.decode(ids))}")

    with open(os.path.join(HERE, "bpe.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# GPT2TokenizerFast under bpe/vocab.json + bpe/merges.txt (tests/golden/gen_bpe.py; format there)\n")
        f.write(f"vocab_size\t{len(vocab)}\n")
        f.write("".join(r + "\n" for r in rows))
    print(f"wrote {len(rows)} cases")


if __name__ == "__main__":
    main()
