// The init of a guest whose root is an image (controlplane/local/guests/sandbox_launch.cpp):
// the image may have no shell and no `sleep`, so the control plane brings its own program. It
// is freestanding (no libc, a few KiB, static) and reaches bwrap as a sealed memfd that
// bwrap runs as /proc/self/fd/N. It does what the host layout's `sh -c 'echo >&3; exec 3>&-
// sleep infinity'` does: say "set up" on fd 3, close every inherited descriptor (the pipe
// and the memfd itself), then wait forever. bwrap's own pid 1 reaps orphans; this process
// only keeps the sandbox alive until its cgroup is killed.
#include "controlplane/local/guests/raw_syscall.hpp"

#include <asm/unistd.h>

using guestflow::local::freestanding::raw_syscall;

extern "C" [[noreturn]] void _start() {
  static const char ready = '\n';
  raw_syscall(__NR_write, 3, reinterpret_cast<long>(&ready), 1);
  raw_syscall(__NR_close_range, 3, ~0U, 0);
  for (;;) // ppoll with nothing to wait for: sleeps until a signal, forever
    raw_syscall(__NR_ppoll, 0, 0, 0);
}
