#pragma once
// The text both character-level examples learn from (char_gpt and char_lstm), so that they see the
// same characters, the same 90/10 split, the same training batch at every step and the same
// validation windows: their losses can be set side by side.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "minigrad/minigrad.h"

namespace char_text {
using namespace mg;

constexpr const char* kFortunes = "/usr/share/games/fortunes";  // Debian's fortunes package

/// `file`, or every plain-text fortune file sorted by name; the "%" separator lines dropped.
inline std::string read_corpus(const std::string& file, int64_t context, std::string_view who) {
  std::vector<std::string> files;
  if (!file.empty()) {
    files.push_back(file);
  } else {
    MG_CHECK(std::filesystem::is_directory(kFortunes), FileError,
             "{}: {} not found; install Debian's fortunes package (apt-get install fortunes) or pass --data FILE", who,
             kFortunes);
    for (auto& e : std::filesystem::directory_iterator(kFortunes))
      if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  }
  std::string text;
  for (auto& f : files) {
    std::ifstream in(f);
    MG_CHECK(in.good(), FileError, "{}: cannot read {}", who, f);
    std::string line;
    while (std::getline(in, line))
      if (line != "%") text += line + "\n";
  }
  // The last 10% is the validation split, and a window is context + 1 characters: it must hold one.
  MG_CHECK(text.size() >= static_cast<size_t>(10 * (context + 2)), ValueError,
           "{}: the text has {} characters; need at least {}, so that its last 10% holds a window of {} + 1", who,
           text.size(), 10 * (context + 2), context);
  return text;
}

/// The characters that occur in the text, numbered in byte order.
struct Vocab {
  std::vector<char> chars;  // id -> character
  int64_t id[256];          // character -> id (-1: not in the text)
  explicit Vocab(const std::string& text) {
    bool seen[256] = {};
    for (unsigned char ch : text) seen[ch] = true;
    for (int i = 0; i < 256; ++i) {
      id[i] = seen[i] ? static_cast<int64_t>(chars.size()) : -1;
      if (seen[i]) chars.push_back(static_cast<char>(i));
    }
  }
  int64_t size() const { return static_cast<int64_t>(chars.size()); }
};

/// A character as a picture's axis label: "\n" for a newline, "_" for a space.
inline std::string label(char ch) { return ch == '\n' ? "\\n" : ch == ' ' ? "_" : std::string(1, ch); }

/// The text split 90/10 into training and validation ids.
struct Data {
  std::string text;
  Vocab vocab;
  std::vector<int64_t> train, val;
};

inline Data load_data(const std::string& file, int64_t context, std::string_view who) {
  std::string text = read_corpus(file, context, who);
  Vocab v(text);
  std::vector<int64_t> ids;
  for (unsigned char ch : text) ids.push_back(v.id[ch]);
  const size_t split = ids.size() * 9 / 10;
  return {std::move(text), v, std::vector<int64_t>(ids.begin(), ids.begin() + split),
          std::vector<int64_t>(ids.begin() + split, ids.end())};
}

/// `batch` random windows of context + 1 characters from `ids`: inputs (batch, context) and the
/// next-character targets (batch, context), both int64.
inline std::pair<Tensor, Tensor> batch_of(const std::vector<int64_t>& ids, int64_t batch, int64_t context,
                                          Generator& g) {
  MG_CHECK(ids.size() >= static_cast<size_t>(context + 2), ValueError,
           "char_text: {} characters cannot hold a window of {} + 1", ids.size(), context);
  Tensor x = empty({batch, context}, DType::Int64), y = empty({batch, context}, DType::Int64);
  for (int64_t b = 0; b < batch; ++b) {
    const size_t start = g.next_u64() % (ids.size() - context - 1);
    for (int64_t t = 0; t < context; ++t) {
      x.data<int64_t>()[b * context + t] = ids[start + t];
      y.data<int64_t>()[b * context + t] = ids[start + t + 1];
    }
  }
  return {x, y};
}

/// The batch of training step `step`: drawn from a generator seeded by (seed, step) alone, so a
/// resumed run sees exactly the batches of an uninterrupted one.
inline std::pair<Tensor, Tensor> train_batch(const Data& d, int64_t batch, int64_t context, uint64_t seed,
                                             int64_t step) {
  Generator g(seed * 1000003 + static_cast<uint64_t>(step));
  return batch_of(d.train, batch, context, g);
}

/// The validation windows: the same 8 batches every time.
inline std::vector<std::pair<Tensor, Tensor>> val_batches(const Data& d, int64_t batch, int64_t context,
                                                          uint64_t seed) {
  Generator g(seed + 7);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int i = 0; i < 8; ++i) out.push_back(batch_of(d.val, batch, context, g));
  return out;
}

}  // namespace char_text
