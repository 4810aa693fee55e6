#pragma once
// Reading the tokenizers' golden files (tests/golden/gen_wordpiece.py, gen_bpe.py): one case per
// line, fields separated by tabs, texts as hex bytes so that any byte survives.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace mgtest {

/// The tab-separated fields of one line.
inline std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, '\t');) fields.push_back(f);
  return fields;
}

/// Hex bytes back to bytes ("." is the empty text).
inline std::string unhex(const std::string& hex) {
  if (hex == ".") return "";
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

/// Space-separated ids.
inline std::vector<int64_t> parse_ids(const std::string& field) {
  std::vector<int64_t> ids;
  std::stringstream ss(field);
  for (int64_t id; ss >> id;) ids.push_back(id);
  return ids;
}

/// The tokens of ids, for a failure message ("?" for an id the tokenizer does not have).
template <class Tokenizer>
std::string show(const Tokenizer& tok, const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (id >= 0 && id < tok.vocab_size() ? tok.id_to_token(id) : "?") + " ";
  return s;
}

}  // namespace mgtest
