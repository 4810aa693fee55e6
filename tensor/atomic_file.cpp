#include "minigrad/tensor/atomic_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "minigrad/tensor/error.h"

namespace mg {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// The mode a write gives its file: the mode of the file it replaces, or what the process's umask
// leaves of rw-rw-rw- for a new one (as for any file a program creates).
mode_t new_file_mode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return st.st_mode & 07777;
  const mode_t mask = ::umask(0);  // reading the umask means setting it: put it straight back
  ::umask(mask);
  return 0666 & ~mask;
}

// Remove "<path>.tmp-<pid>-XXXXXX" files whose process no longer runs: what a write killed half
// way leaves behind. A temporary of a write still running (its process alive) is left alone.
void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string prefix = fs::path(path).filename().string() + ".tmp-";
  std::error_code ec;
  // increment(ec), not a range-for: its operator++ throws std::filesystem_error on a read error
  for (fs::directory_iterator it(parent_dir(path), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    const bool gone = pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
    if (gone) fs::remove(e.path(), ec);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view who,
                       const std::function<void(const ByteSink&)>& fill) {
  remove_stale_temporaries(path);
  // The temporary's name carries this process's id, so that a later write can tell the leftovers
  // of a killed one (its process gone) from a write still running.
  std::string tmp = fmt::format("{}.tmp-{}-XXXXXX", path, ::getpid());
  const int fd = ::mkstemp(tmp.data());
  MG_CHECK(fd >= 0, FileError, "{}: cannot create a temporary file beside {}: {}", who, path, errno_text());
  bool closed = false;
  try {
    // mkstemp makes the file 0600; give it the mode the file it replaces had, or the one a new file gets
    MG_CHECK(::fchmod(fd, new_file_mode(path)) == 0, FileError, "{}: cannot set the mode of {}: {}", who, tmp,
             errno_text());
    fill([&](const char* data, size_t n) {
      while (n > 0) {
        const ssize_t w = ::write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        MG_CHECK(w > 0, FileError, "{}: writing {} failed: {}", who, tmp, errno_text());
        data += w;
        n -= static_cast<size_t>(w);
      }
    });
    MG_CHECK(::fsync(fd) == 0, FileError, "{}: fsync of {} failed: {}", who, tmp, errno_text());
    closed = true;
    MG_CHECK(::close(fd) == 0, FileError, "{}: closing {} failed: {}", who, tmp, errno_text());
  } catch (...) {
    if (!closed) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw FileError(fmt::format("{}: cannot rename {} to {}: {}", who, tmp, path, why));
  }
  // Make the rename itself durable.
  const int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void make_directories(const std::string& dir, std::string_view who) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MG_CHECK(!ec, FileError, "{}: cannot create the folder {}: {}", who, dir, ec.message());
}

void write_text_file(const std::string& path, std::string_view text, std::string_view who) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) make_directories(p.parent_path().string(), who);
  write_file_atomic(path, who, [&](const ByteSink& write) { write(text.data(), text.size()); });
}

}  // namespace mg
