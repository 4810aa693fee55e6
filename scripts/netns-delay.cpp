// A network switch with a delay line, for scripts/netns-cluster --delay (which compiles and starts
// it): the kernel's own way to delay packets (the netem qdisc) is missing from some kernels, so the
// hosts' links are TAP devices whose frames this process forwards, each one `delay` microseconds
// after it arrived, which is the link's one-way latency.
//
//   netns-delay DELAY_US PORT...      creates one TAP device per PORT name, prints "ready", and
//                                     forwards frames between them until it is killed
//
// Forwarding is an Ethernet switch's: a frame goes to the port its destination address was last
// seen on, or to every other port (broadcasts, and addresses not seen yet). Frames leave in the
// order they came, each `delay` after its arrival.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

struct Frame {
  Clock::time_point due;
  int from;
  std::vector<unsigned char> bytes;
};

int open_tap(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) return -1;
  ifreq req{};
  req.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &req) < 0) return -1;
  return fd;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: netns-delay DELAY_US PORT...\n");
    return 2;
  }
  const auto delay = std::chrono::microseconds(std::atoll(argv[1]));
  std::vector<int> fds;
  for (int i = 2; i < argc; ++i) {
    const int fd = open_tap(argv[i]);
    if (fd < 0) {
      std::fprintf(stderr, "netns-delay: cannot make TAP device %s: %s\n", argv[i], std::strerror(errno));
      return 1;
    }
    fds.push_back(fd);
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::map<std::string, int> port_of;  // MAC address -> port it was last seen on
  std::deque<Frame> line;              // in arrival order, so in order of due time
  std::vector<pollfd> polls(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) polls[i] = {fds[i], POLLIN, 0};
  std::vector<unsigned char> buf(65536);
  prctl(PR_SET_TIMERSLACK, 1);  // wake when asked to, not up to 50 microseconds later
  for (;;) {
    timespec wait{}, *timeout = nullptr;  // none: sleep until a frame comes
    if (!line.empty()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(line.front().due - Clock::now()).count();
      wait.tv_sec = ns > 0 ? ns / 1000000000 : 0;
      wait.tv_nsec = ns > 0 ? ns % 1000000000 : 0;
      timeout = &wait;
    }
    ppoll(polls.data(), polls.size(), timeout, nullptr);
    const auto now = Clock::now();
    for (size_t i = 0; i < fds.size(); ++i)
      while (polls[i].revents & POLLIN) {
        const ssize_t n = read(fds[i], buf.data(), buf.size());
        if (n <= 0) break;
        if (n >= 14) line.push_back({now + delay, static_cast<int>(i), {buf.begin(), buf.begin() + n}});
      }
    // Leave whatever is due.
    while (!line.empty() && line.front().due <= Clock::now()) {
      const Frame& f = line.front();
      port_of[std::string(f.bytes.begin() + 6, f.bytes.begin() + 12)] = f.from;  // the sender's address
      const auto to = port_of.find(std::string(f.bytes.begin(), f.bytes.begin() + 6));
      const bool flood = (f.bytes[0] & 1) != 0 || to == port_of.end();
      for (size_t p = 0; p < fds.size(); ++p)
        if (static_cast<int>(p) != f.from && (flood || to->second == static_cast<int>(p)))
          (void)!write(fds[p], f.bytes.data(), f.bytes.size());  // a full queue drops it, as a switch would
      line.pop_front();
    }
  }
}
