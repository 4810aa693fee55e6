#pragma once
// Writing a file so that a reader sees the old version or the new one, never half of either, and
// a crash leaves no half-written file behind: the bytes go to a temporary file beside the target
// ("<path>.tmp-<pid>-XXXXXX", made by mkstemp so that two writers never share one), which is
// fsync'ed, given the mode of the file it replaces, and renamed over the target (a rename within
// one folder is atomic on POSIX). Temporaries left by a writer that was killed half way (its
// process gone) are removed by the next write of the same path. Used by save_safetensors (and so
// nn::save and checkpoints), viz::write_file (pictures, pages) and inspect::Telemetry::save.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace mg {

/// Appends bytes to the file being written; a FileError if the write fails.
using ByteSink = std::function<void(const char* data, size_t n)>;

/// Write the file at `path` atomically (see the file comment): `fill` gets a sink and writes the
/// contents through it, in as many pieces as it likes. On any failure (a FileError naming `who`
/// and the path, or whatever `fill` throws) the old file is left as it was and no temporary remains.
void write_file_atomic(const std::string& path, std::string_view who, const std::function<void(const ByteSink&)>& fill);

/// Create the folder `dir` and its missing parents (nothing when it exists); a FileError naming
/// `who` when it cannot be (a parent is a regular file, no permission).
void make_directories(const std::string& dir, std::string_view who);

/// Write `text` to `path` atomically, creating missing folders first; errors name `who`.
void write_text_file(const std::string& path, std::string_view text, std::string_view who);

}  // namespace mg
