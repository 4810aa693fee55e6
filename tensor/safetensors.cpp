#include "minigrad/tensor/safetensors.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "minigrad/tensor/atomic_file.h"

namespace mg {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian machine");

namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::Bool:
      return "BOOL";
    case DType::BFloat16:
      return "BF16";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& t) {
  if (s == "F32")
    t = DType::Float32;
  else if (s == "F64")
    t = DType::Float64;
  else if (s == "I64")
    t = DType::Int64;
  else if (s == "BOOL")
    t = DType::Bool;
  else if (s == "BF16")
    t = DType::BFloat16;
  else
    return false;
  return true;
}

std::string errno_text() { return std::strerror(errno); }

constexpr int kMaxDepth = 3;  // {name: {"shape": [...]}}: the deepest a safetensors header goes

// A JSON value for an error message, cut short: it came from the file, and may be huge.
std::string short_dump(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace

Tensor SafeTensors::find(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return t;
  return Tensor();
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    MG_CHECK(!name.empty() && name != "__metadata__" && names.insert(name).second, ValueError,
             "save_safetensors: tensor name \"{}\" is empty, reserved or repeated", name);
    MG_CHECK(t.defined(), StateError, "save_safetensors: tensor \"{}\" is undefined", name);
    const Tensor c = t.contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * itemsize(c.dtype());
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string h;
  try {
    h = header.dump();
  } catch (const nlohmann::json::exception&) {  // JSON strings must be UTF-8
    throw ValueError(fmt::format("save_safetensors: a tensor name or metadata text for {} is not valid UTF-8", path));
  }
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  const uint64_t n = h.size();

  // Atomically (tensor/atomic_file.h): a reader sees the old file or the new one, never half.
  write_file_atomic(path, "save_safetensors", [&](const ByteSink& write) {
    write(reinterpret_cast<const char*>(&n), 8);
    write(h.data(), h.size());
    for (const Tensor& c : data)
      if (c.numel() > 0) write(static_cast<const char*>(c.data_ptr()), c.numel() * itemsize(c.dtype()));
  });
}

SafeTensors load_safetensors(const std::string& path) {
  std::error_code ec;
  MG_CHECK(std::filesystem::is_regular_file(path, ec), FileError, "load_safetensors: {} is not a file{}", path,
           std::filesystem::exists(path, ec) ? "" : " (it does not exist)");
  std::string bytes;
  try {
    std::ifstream in(path, std::ios::binary);
    MG_CHECK(in, FileError, "load_safetensors: cannot open {}: {}", path, errno_text());
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    MG_CHECK(!in.bad(), FileError, "load_safetensors: reading {} failed: {}", path, errno_text());
  } catch (const std::ios_base::failure& e) {
    throw FileError(fmt::format("load_safetensors: reading {} failed: {}", path, e.what()));
  } catch (const std::bad_alloc&) {
    throw MemoryError(fmt::format("load_safetensors: {} ({} bytes) does not fit in memory", path,
                                  std::filesystem::file_size(path, ec)));
  }
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

namespace {
// The JSON header at the front of a safetensors file: 8 bytes of little-endian length, then that many
// bytes of JSON, one object. Sets data and data_size to the bytes after it.
nlohmann::json parse_header(const char* bytes, size_t size, const std::string& path, const char*& data,
                            uint64_t& data_size) {
  MG_CHECK(size >= 8, FileError, "load_safetensors: {} is {} bytes, too short to hold the 8-byte header size", path,
           size);
  uint64_t n;
  std::memcpy(&n, bytes, 8);
  MG_CHECK(
      n <= size - 8, FileError,
      "load_safetensors: {} says its header is {} bytes but only {} bytes follow (truncated or not a safetensors file)",
      path, n, size - 8);
  nlohmann::json header;
  try {
    // A safetensors header nests three deep at most ({name: {"shape": [...]}}); deeper is not one,
    // and refusing it here keeps a hostile file from nesting a million levels.
    auto depth_limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      MG_CHECK(depth <= kMaxDepth, FileError,
               "load_safetensors: the header of {} nests deeper than a safetensors header does", path);
      return true;
    };
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + n, depth_limit);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("load_safetensors: the header of {} is not valid JSON: {}", path, e.what()));
  }
  MG_CHECK(header.is_object(), FileError, "load_safetensors: the header of {} is not a JSON object", path);
  data_size = size - 8 - n;
  data = bytes + 8 + n;
  return header;
}

// One tensor's header entry {"dtype", "shape", "data_offsets"}, checked against the data bytes, and
// the tensor read from them; `begin` is set to its first byte in the data.
Tensor read_entry(const std::string& name, const nlohmann::json& entry, const char* data, uint64_t data_size,
                  const std::string& path, uint64_t& begin) {
  auto bad = [&](const std::string& what) {
    return FileError(fmt::format("load_safetensors: tensor \"{}\" in {}: {}", name, path, what));
  };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    throw bad("needs dtype, shape and data_offsets");
  DType dt;
  if (!entry["dtype"].is_string() || !parse_dtype(entry["dtype"].get<std::string>(), dt))
    throw bad("unsupported dtype " + short_dump(entry["dtype"]) + " (minigrad reads F32, F64, I64, BOOL, BF16)");
  const auto& js = entry["shape"];
  const auto& jo = entry["data_offsets"];
  if (!js.is_array()) throw bad("shape must be an array");
  Shape shape;
  uint64_t numel = 1;
  for (auto& d : js) {
    if (!d.is_number_unsigned()) throw bad("shape " + short_dump(js) + " must hold non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v > (1ULL << 40) || (v && numel > (1ULL << 40) / v)) throw bad("shape " + short_dump(js) + " is too large");
    numel *= v;
    shape.push_back(static_cast<int64_t>(v));
  }
  if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
    throw bad("data_offsets must be [begin, end]");
  const uint64_t b = jo[0].get<uint64_t>(), e = jo[1].get<uint64_t>();
  if (b > e || e > data_size)
    throw bad(fmt::format("data_offsets [{}, {}] fall outside the {} data bytes (truncated file?)", b, e, data_size));
  if (e - b != numel * itemsize(dt))
    throw bad(fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", b, e, e - b,
                          shape_str(shape), dtype_name(dt), numel * itemsize(dt)));
  Tensor t = empty(shape, dt);
  if (e > b) std::memcpy(t.storage()->data(), data + b, e - b);
  if (dt == DType::Bool) {
    const uint8_t* p = static_cast<const uint8_t*>(t.storage()->data());
    for (uint64_t i = 0; i < numel; ++i)
      if (p[i] > 1) throw bad("a BOOL element is neither 0 nor 1");
  }
  begin = b;
  return t;
}

// The tensors in file order, sorted by data offset. They must tile the data exactly, each starting
// where the one before ends (the format's rule: no overlaps, which would let two tensors share
// bytes, and no holes, which could hide anything).
std::vector<std::pair<std::string, Tensor>> in_file_order(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                          const std::vector<uint64_t>& begins, uint64_t data_size,
                                                          const std::string& path) {
  std::vector<size_t> idx(tensors.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return begins[a] < begins[b]; });
  std::vector<std::pair<std::string, Tensor>> sorted;
  uint64_t at = 0;
  for (size_t i : idx) {
    const uint64_t begin = begins[i], bytes_i = tensors[i].second.numel() * itemsize(tensors[i].second.dtype());
    MG_CHECK(begin == at, FileError,
             "load_safetensors: tensor \"{}\" in {} starts at byte {} of the data, but {} {} there", tensors[i].first,
             path, begin, begin < at ? "the tensor before it ends" : "nothing is stored before", at);
    at = begin + bytes_i;
    sorted.push_back(tensors[i]);
  }
  MG_CHECK(at == data_size, FileError, "load_safetensors: {} holds {} data bytes but its tensors cover {}", path,
           data_size, at);
  return sorted;
}
}  // namespace

SafeTensors parse_safetensors(const void* bytes, size_t size, const std::string& path) {
  const char* data;
  uint64_t data_size;
  const nlohmann::json header = parse_header(static_cast<const char*>(bytes), size, path, data, data_size);
  SafeTensors out;
  std::vector<uint64_t> begins;
  for (auto& [name, entry] : header.items()) {
    if (name != "__metadata__") {
      uint64_t begin;
      out.tensors.emplace_back(name, read_entry(name, entry, data, data_size, path, begin));
      begins.push_back(begin);
      continue;
    }
    MG_CHECK(entry.is_object(), FileError, "load_safetensors: __metadata__ in {} must be an object", path);
    for (auto& [k, v] : entry.items()) {
      MG_CHECK(v.is_string(), FileError, "load_safetensors: metadata \"{}\" in {} must be a string", k, path);
      out.metadata[k] = v.get<std::string>();
    }
  }
  out.tensors = in_file_order(out.tensors, begins, data_size, path);
  return out;
}

}  // namespace mg
