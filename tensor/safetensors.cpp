#include "tensor/safetensors.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace mg {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian machine");

namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& t) {
  if (s == "F32") t = DType::Float32;
  else if (s == "F64") t = DType::Float64;
  else if (s == "I64") t = DType::Int64;
  else if (s == "BOOL") t = DType::Bool;
  else return false;
  return true;
}

std::string errno_text() { return std::strerror(errno); }

// Write all of `data` to fd; a FileError on failure.
void write_all(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    MG_CHECK(w > 0, FileError, "save_safetensors: writing {} failed: {}", path, errno_text());
    data += w;
    n -= static_cast<size_t>(w);
  }
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
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
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  const uint64_t n = h.size();

  // Temporary file beside the target, so the final rename stays on one file system.
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  MG_CHECK(fd >= 0, FileError, "save_safetensors: cannot create a temporary file beside {}: {}", path, errno_text());
  try {
    write_all(fd, reinterpret_cast<const char*>(&n), 8, tmp);
    write_all(fd, h.data(), h.size(), tmp);
    for (const Tensor& c : data)
      write_all(fd, static_cast<const char*>(c.storage()->data()) + c.offset() * itemsize(c.dtype()),
                c.numel() * itemsize(c.dtype()), tmp);
    MG_CHECK(::fsync(fd) == 0, FileError, "save_safetensors: fsync of {} failed: {}", tmp, errno_text());
    MG_CHECK(::close(fd) == 0, FileError, "save_safetensors: closing {} failed: {}", tmp, errno_text());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw FileError(fmt::format("save_safetensors: cannot rename {} to {}: {}", tmp, path, why));
  }
  // Make the rename itself durable.
  const int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafeTensors load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MG_CHECK(in, FileError, "load_safetensors: cannot open {}", path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint64_t size = bytes.size();
  MG_CHECK(size >= 8, FileError, "load_safetensors: {} is {} bytes, too short to hold the 8-byte header size", path, size);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  MG_CHECK(n <= size - 8, FileError,
           "load_safetensors: {} says its header is {} bytes but only {} bytes follow (truncated or not a safetensors file)",
           path, n, size - 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("load_safetensors: the header of {} is not valid JSON: {}", path, e.what()));
  }
  MG_CHECK(header.is_object(), FileError, "load_safetensors: the header of {} is not a JSON object", path);
  const uint64_t data_size = size - 8 - n;
  const char* data = bytes.data() + 8 + n;

  SafeTensors out;
  std::vector<std::pair<uint64_t, std::string>> order;  // tensors come back in file order
  for (auto& item : header.items()) {
    const std::string& name = item.key();  // named variables, not structured bindings: lambdas below capture them
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      MG_CHECK(entry.is_object(), FileError, "load_safetensors: __metadata__ in {} must be an object", path);
      for (auto& [k, v] : entry.items()) {
        MG_CHECK(v.is_string(), FileError, "load_safetensors: metadata \"{}\" in {} must be a string", k, path);
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) {
      return FileError(fmt::format("load_safetensors: tensor \"{}\" in {}: {}", name, path, what));
    };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw bad("needs dtype, shape and data_offsets");
    DType dt;
    if (!entry["dtype"].is_string() || !parse_dtype(entry["dtype"].get<std::string>(), dt))
      throw bad("unsupported dtype " + entry["dtype"].dump() + " (minigrad reads F32, F64, I64, BOOL)");
    const auto& js = entry["shape"];
    const auto& jo = entry["data_offsets"];
    if (!js.is_array()) throw bad("shape must be an array");
    Shape shape;
    uint64_t numel = 1;
    for (auto& d : js) {
      if (!d.is_number_unsigned()) throw bad("shape " + js.dump() + " must hold non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v > (1ULL << 40) || (v && numel > (1ULL << 40) / v)) throw bad("shape " + js.dump() + " is too large");
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
    out.tensors.emplace_back(name, t);
    order.emplace_back(b, name);
  }
  // Keep file order: sort by data offset.
  std::vector<size_t> idx(out.tensors.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return order[a].first < order[b].first; });
  std::vector<std::pair<std::string, Tensor>> sorted;
  for (size_t i : idx) sorted.push_back(out.tensors[i]);
  out.tensors = std::move(sorted);
  return out;
}

}  // namespace mg
