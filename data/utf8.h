#pragma once
// UTF-8 checking shared by the two tokenizers (data/wordpiece.h, data/bpe.h). Internal to data/.
#include <cstdint>
#include <string>
#include <vector>

namespace mg::data {

/// The byte offset of the first invalid UTF-8 sequence in s, or -1 when s is valid (overlong
/// forms, surrogates and values past U+10FFFF are invalid too). When code_points is given, the
/// code points read before that offset are appended to it.
int64_t invalid_utf8_offset(const std::string& s, std::vector<int32_t>* code_points = nullptr);

}  // namespace mg::data
