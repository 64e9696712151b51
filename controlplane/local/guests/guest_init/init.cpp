// The init of a guest whose root is an image (controlplane/local/guests/sandbox_launch.cpp):
// the image may have no shell and no `sleep`, so the control plane brings its own program. It
// is freestanding (no libc, a few KiB, static) and reaches bwrap as a sealed memfd that
// bwrap runs as /proc/self/fd/N. It does what the host layout's `sh -c 'echo >&3; exec 3>&-
// sleep infinity'` does: say "set up" on fd 3, close every inherited descriptor (the pipe
// and the memfd itself), then wait forever. bwrap's own pid 1 reaps orphans; this process
// only keeps the sandbox alive until its cgroup is killed. Every gVisor guest runs it as
// its pid 1 (bound in as a file, gvisor_sandbox.hpp), where it reaps the orphans too.
//
// `init fork`: pid 1 of a fork-server pool guest (guests/fork_template.py spawns it, without
// copying the template's memory, into the guest's fresh namespaces; the run is the template's
// fork beside it). fd 3 is a socket to that run: once the run says the host moved both into
// the guest's cgroups, this init enters a cgroup namespace there (later execs enter its
// namespaces), drops every capability and is not dumpable, answers, and reaps forever.
#include "controlplane/local/guests/raw_syscall.hpp"

#include <asm/unistd.h>
#include <linux/capability.h>
#include <linux/prctl.h>
#include <linux/sched.h>

using guestflow::local::freestanding::raw_syscall;

namespace {

[[noreturn]] void reap_forever() {
  // Under gVisor, and as a fork-pool guest's init, this is the guest's pid 1: orphans become
  // its children, so it reaps them. SIGCHLD blocked and waited for; without children (under
  // bwrap) the wait simply never ends.
  const unsigned long chld = 1UL << (17 - 1); // SIGCHLD
  raw_syscall(__NR_rt_sigprocmask, 0 /* SIG_BLOCK */, reinterpret_cast<long>(&chld), 0, 8);
  for (;;) {
    while (raw_syscall(__NR_wait4, -1, 0, 1 /* WNOHANG */, 0) > 0) {
    }
    raw_syscall(__NR_rt_sigtimedwait, reinterpret_cast<long>(&chld), 0, 0, 8);
  }
}

[[noreturn]] void fail() {
  raw_syscall(__NR_exit_group, 1); // pid 1 gone: the kernel kills the guest's namespace
  for (;;) {
  }
}

/// A fork-pool guest's init (the header says when each step runs). Any failure ends it, and
/// with it every process of the guest: fail closed.
[[noreturn]] void fork_guest_init() {
  raw_syscall(__NR_close_range, 4, ~0U, 0);
  char go = 0;
  if (raw_syscall(__NR_read, 3, reinterpret_cast<long>(&go), 1) != 1) fail();
  if (raw_syscall(__NR_unshare, CLONE_NEWCGROUP) != 0) fail();
  // What is left of the bounding set (the template empties its own: a read each), CAP_SETPCAP
  // last: dropping it needs it. A read past the last capability is EINVAL: nothing held.
  auto dropped = [](int cap) {
    return raw_syscall(__NR_prctl, PR_CAPBSET_READ, cap) != 1 ||
           raw_syscall(__NR_prctl, PR_CAPBSET_DROP, cap) == 0;
  };
  for (int cap = 0; cap <= 63; ++cap)
    if (cap != CAP_SETPCAP && !dropped(cap)) fail();
  if (!dropped(CAP_SETPCAP)) fail();
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (raw_syscall(__NR_capset, reinterpret_cast<long>(&hdr), reinterpret_cast<long>(data)) !=
          0 ||
      raw_syscall(__NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) != 0 ||
      raw_syscall(__NR_prctl, PR_SET_DUMPABLE, 0) != 0)
    fail();
  if (raw_syscall(__NR_write, 3, reinterpret_cast<long>(&go), 1) != 1) fail();
  raw_syscall(__NR_close_range, 3, ~0U, 0);
  reap_forever();
}

bool is_fork(const char* s) {
  return s && s[0] == 'f' && s[1] == 'o' && s[2] == 'r' && s[3] == 'k' && s[4] == 0;
}

} // namespace

extern "C" [[noreturn]] void init_main(long* sp) {
  const long argc = sp[0];
  char** argv = reinterpret_cast<char**>(sp + 1);
  if (argc >= 2 && is_fork(argv[1])) fork_guest_init();
  static const char ready = '\n';
  raw_syscall(__NR_write, 3, reinterpret_cast<long>(&ready), 1);
  raw_syscall(__NR_close_range, 3, ~0U, 0);
  reap_forever();
}

// The entry point: hand the initial stack (argc, argv) to init_main on a stack aligned as a
// call expects (as the spawn helper's).
#if defined(__x86_64__)
asm(".globl _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n"
    " call init_main\n hlt\n");
#elif defined(__aarch64__)
asm(".globl _start\n_start:\n mov x0, sp\n bl init_main\n");
#endif
