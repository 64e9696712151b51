// The init of a guest whose root is an image (controlplane/local/guests/sandbox_launch.cpp):
// the image may have no shell and no `sleep`, so the control plane brings its own program. It
// is freestanding (no libc, a few KiB, static) and reaches bwrap as a sealed memfd that
// bwrap runs as /proc/self/fd/N. It does what the host layout's `sh -c 'echo >&3; exec 3>&-
// sleep infinity'` does: say "set up" on fd 3, close every inherited descriptor (the pipe
// and the memfd itself), then wait forever. bwrap's own pid 1 reaps orphans; this process
// only keeps the sandbox alive until its cgroup is killed.
#include <asm/unistd.h>

namespace {

long syscall3(long n, long a, long b, long c) {
#if defined(__x86_64__)
  long r;
  asm volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
#elif defined(__aarch64__)
  register long x8 asm("x8") = n;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
#else
#error "guestflow guest init: unsupported architecture (x86_64 and aarch64 only)"
#endif
}

} // namespace

extern "C" [[noreturn]] void _start() {
  static const char ready = '\n';
  syscall3(__NR_write, 3, reinterpret_cast<long>(&ready), 1);
  syscall3(__NR_close_range, 3, ~0U, 0);
  for (;;) // ppoll with nothing to wait for: sleeps until a signal, forever
    syscall3(__NR_ppoll, 0, 0, 0);
}
