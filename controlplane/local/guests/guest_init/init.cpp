// The init of a guest whose root is an image (controlplane/local/guests/sandbox_launch.cpp):
// the image may have no shell and no `sleep`, so the control plane brings its own program. It
// is freestanding (no libc, a few KiB, static) and reaches bwrap as a sealed memfd that
// bwrap runs as /proc/self/fd/N. It does what the host layout's `sh -c 'echo >&3; exec 3>&-
// sleep infinity'` does: say "set up" on fd 3, close every inherited descriptor (the pipe
// and the memfd itself), then wait forever. bwrap's own pid 1 reaps orphans; this process
// only keeps the sandbox alive until its cgroup is killed. Every gVisor guest runs it as
// its pid 1 (bound in as a file, gvisor_sandbox.hpp), where it reaps the orphans too.
#include "controlplane/local/guests/raw_syscall.hpp"

#include <asm/unistd.h>

using guestflow::local::freestanding::raw_syscall;

extern "C" [[noreturn]] void _start() {
  static const char ready = '\n';
  raw_syscall(__NR_write, 3, reinterpret_cast<long>(&ready), 1);
  raw_syscall(__NR_close_range, 3, ~0U, 0);
  // Under gVisor this is the sandbox's pid 1 (gvisor_sandbox.hpp): orphans become its
  // children, so it reaps them. SIGCHLD blocked and waited for; without children (under
  // bwrap) the wait simply never ends.
  const unsigned long chld = 1UL << (17 - 1); // SIGCHLD
  raw_syscall(__NR_rt_sigprocmask, 0 /* SIG_BLOCK */, reinterpret_cast<long>(&chld), 0, 8);
  for (;;) {
    while (raw_syscall(__NR_wait4, -1, 0, 1 /* WNOHANG */, 0) > 0) {
    }
    raw_syscall(__NR_rt_sigtimedwait, reinterpret_cast<long>(&chld), 0, 0, 8);
  }
}
