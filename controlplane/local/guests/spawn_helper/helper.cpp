// The control plane's spawn helper: the privileged steps between "new process" and
// "execve" for guests (launch), commands in guests (exec) and host tools (command). The
// server starts it with posix_spawn (clone(CLONE_VM|CLONE_VFORK): the server's big,
// multi-threaded address space is never copied), and the helper's own forks are cheap —
// it is freestanding and static (no libc, a few KiB), compiled into the server as bytes
// and run from a sealed memfd (spawn_helper.hpp). Everything arrives by argv, envp and
// descriptors at fixed numbers (protocol.hpp); a failed step is reported on the status
// pipe and the helper exits 127.
#include "controlplane/local/guests/raw_syscall.hpp"
#include "controlplane/local/guests/spawn_helper/protocol.hpp"

#include <asm/unistd.h>
#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <linux/poll.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/signal.h>
#include <linux/time.h>
#include <linux/time_types.h>

using namespace guestflow::local::spawn;

namespace {

long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  return guestflow::local::freestanding::raw_syscall(n, a, b, c, d, e);
}

template<class T>
long arg(T v) {
  return (long)v;
}

[[noreturn]] void exit_now(int code) {
  for (;;)
    sys(__NR_exit_group, code);
}

/// Reports `step` failing with the negated errno `rc` on `fd`, then exits 127.
[[noreturn]] void die(int fd, int32_t step, long rc) {
  report r;
  r.step = step;
  r.error = int32_t(rc < 0 ? -rc : 0);
  sys(__NR_write, fd, arg(&r), sizeof r);
  exit_now(127);
}

long number(const char* s) {
  long v = 0;
  bool neg = *s == '-';
  for (s += neg; *s >= '0' && *s <= '9'; ++s)
    v = v * 10 + (*s - '0');
  return neg ? -v : v;
}

unsigned long length(const char* s) {
  unsigned long n = 0;
  while (s[n])
    ++n;
  return n;
}

void say(int fd, const char* s) {
  sys(__NR_write, fd, arg(s), long(length(s)));
}

/// Writes `v` as decimal into `buf` with a terminating NUL.
void decimal(char* buf, long v) {
  char tmp[24];
  int n = 0;
  do
    tmp[n++] = char('0' + v % 10);
  while ((v /= 10) != 0);
  while (n > 0)
    *buf++ = tmp[--n];
  *buf = '\0';
}

long fork_now() {
  return sys(__NR_clone, SIGCHLD);
}

/// Keeps descriptors 0 … keep-1 (`status` close-on-exec) and closes the rest.
long keep_fds(int keep, int status) {
  long rc = sys(__NR_close_range, keep, ~0U, 0);
  return rc < 0 ? rc : sys(__NR_fcntl, status, F_SETFD, FD_CLOEXEC);
}

/// CLOCK_MONOTONIC in ns (the server's std::chrono::steady_clock).
long now_ns() {
  __kernel_timespec t{};
  sys(__NR_clock_gettime, CLOCK_MONOTONIC, arg(&t));
  return long(t.tv_sec) * 1000000000L + long(t.tv_nsec);
}

void report_to(int fd, int32_t step, long value) {
  report r;
  r.step = step;
  r.value = value;
  sys(__NR_write, fd, arg(&r), sizeof r);
}

/// Forks the exit watcher (protocol.hpp): the server's child, in a session of its own, with
/// `fd` as its descriptor 0, `timing` as 1 and nothing else (no pipe of the command's: their
/// EOF must not wait for it). The helper reports the watcher's pid on `timing`. Returns 0 in
/// the watcher, else its pid or a negative errno.
long fork_watcher(long fd, int timing) {
  const long w = sys(__NR_clone, CLONE_PARENT | SIGCHLD);
  if (w > 0) report_to(timing, timing::step_watcher, w);
  if (w != 0) return w;
  sys(__NR_dup3, fd, 0, 0);
  sys(__NR_dup3, timing, 1, 0);
  sys(__NR_close_range, 2, ~0U, 0);
  sys(__NR_setsid);
  return 0;
}

/// The watcher's work: waits until the process behind pidfd 0 exited, writes when it
/// started and exited to descriptor 1 (one write: both or neither), exits.
[[noreturn]] void watch(long started) {
  pollfd p{0, POLLIN, 0};
  while (sys(__NR_ppoll, arg(&p), 1, 0, 0, 0) <= 0) {
  }
  report r[2];
  r[0].step = timing::step_started;
  r[0].value = started;
  r[1].step = timing::step_exited;
  r[1].value = now_ns();
  sys(__NR_write, 1, arg(r), sizeof r);
  exit_now(0);
}

/// launch SERVER_PID UID GID FD_STATUS N_CGROUPS HAS_NETNS WORKSPACE WORKSPACE_MP WAIT
///        N_MOUNTS {SOURCE MOUNTPOINT NO_SYMLINKS}… BWRAP_ARGV…
/// WORKSPACE is a host directory to bind, or `@N`: a detached mount at descriptor N.
/// WAIT 1 (runsc, which detaches its sandbox itself): B forks the program instead of
/// exec'ing it, waits for it and reports its wait status as a value report.
/// A starts a session and forks the shim B, then exits; B (reparented away from the
/// server) joins the guest's cgroups and netns, binds the workspace and the image's
/// directories in a private mount namespace, waits until A is gone (bwrap's
/// --die-with-parent must bind to B's final parent), becomes the guest uid and execs bwrap.
[[noreturn]] void run_launch(char** a) {
  const long server = number(a[0]), uid = number(a[1]), gid = number(a[2]);
  const int status = int(number(a[3])), cgroups = int(number(a[4]));
  const bool netns = number(a[5]) != 0;
  const char *workspace = a[6], *workspace_mp = a[7];
  const bool wait = number(a[8]) != 0;
  const int mounts = int(number(a[9]));
  char** bind = a + 10;
  char** argv = bind + 3 * mounts;
  const int extra = status + 1; // the netns, then the cgroups
  const int cgroup_first = extra + (netns ? 1 : 0);

  long rc = sys(__NR_setsid);
  if (rc < 0) die(status, launch::step_setsid, rc);
  const long self = sys(__NR_getpid);
  rc = fork_now();
  if (rc < 0) die(status, launch::step_fork_shim, rc);
  if (rc > 0) exit_now(0);

  for (int i = 0; i < cgroups; ++i)
    if ((rc = sys(__NR_write, cgroup_first + i, arg("0"), 1)) != 1)
      die(status, launch::step_cgroup, rc);
  if (netns && (rc = sys(__NR_setns, extra, CLONE_NEWNET)) < 0)
    die(status, launch::step_netns, rc);
  if ((rc = sys(__NR_unshare, CLONE_NEWNS)) < 0 ||
      (rc = sys(__NR_mount, 0, arg("/"), 0, MS_SLAVE | MS_REC, 0)) < 0)
    die(status, launch::step_mountns, rc);
  // "@N": the workspace's own file system, a detached mount at descriptor N
  // (workspace_disk.hpp), attached here only: the host's mount table never holds it.
  if (workspace[0] == '@')
    rc = sys(__NR_move_mount, number(workspace + 1), arg(""), AT_FDCWD, arg(workspace_mp),
             MOVE_MOUNT_F_EMPTY_PATH);
  else
    rc = sys(__NR_mount, arg(workspace), arg(workspace_mp), 0, MS_BIND, 0);
  if (rc < 0) die(status, launch::step_workspace, rc);
  for (int i = 0; i < mounts; ++i) {
    const char *source = bind[3 * i], *mountpoint = bind[3 * i + 1];
    const bool no_symlinks = number(bind[3 * i + 2]) != 0;
    const int32_t step = no_symlinks ? launch::step_ro_bind : launch::step_image_root;
    // A read-only bind is a host directory outside the state dir: open it without
    // following any symlink and bind what was opened, so a directory swapped for a symlink
    // cannot redirect the bind.
    char by_fd[32] = "/proc/self/fd/";
    if (no_symlinks) {
      open_how how{};
      how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
      how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
      long fd = sys(__NR_openat2, AT_FDCWD, arg(source), arg(&how), sizeof how);
      if (fd < 0) die(status, step, fd);
      decimal(by_fd + 14, fd);
      source = by_fd; // closed with every other extra descriptor before bwrap runs
    }
    if ((rc = sys(__NR_mount, arg(source), arg(mountpoint), 0, MS_BIND | MS_REC, 0)) < 0)
      die(status, step, rc);
  }
  // Wait for A to be gone (a pidfd pinned while A is provably still our parent).
  long afd = sys(__NR_pidfd_open, self, 0);
  while (sys(__NR_getppid) == self) {
    pollfd p{int(afd), POLLIN, 0};
    __kernel_timespec tick{0, 1000000};
    sys(__NR_ppoll, afd >= 0 ? arg(&p) : 0, afd >= 0 ? 1 : 0, afd >= 0 ? 0 : arg(&tick), 0);
  }
  if (sys(__NR_getppid) == server && server != 1) // as a container's pid 1 it is init anyway
    die(status, launch::step_subreaper, 0);
  if ((rc = sys(__NR_setgroups, 0, 0)) < 0) die(status, launch::step_setgroups, rc);
  if ((rc = sys(__NR_setresgid, gid, gid, gid)) < 0) die(status, launch::step_setgid, rc);
  if ((rc = sys(__NR_setresuid, uid, uid, uid)) < 0) die(status, launch::step_setuid, rc);
  if ((rc = keep_fds(extra, status)) < 0) die(status, launch::step_fds, rc);
  static char* no_env[] = {nullptr};
  if (wait) {
    const long c = fork_now();
    if (c < 0) die(status, launch::step_exec, c);
    if (c > 0) {
      int ws = 0;
      while ((rc = sys(__NR_wait4, c, arg(&ws), 0, 0)) == -EINTR) {
      }
      report r;
      r.value = rc == c ? ws : -1;
      sys(__NR_write, status, arg(&r), sizeof r);
      exit_now(0);
    }
  }
  rc = sys(__NR_execve, arg(argv[0]), arg(argv), arg(no_env));
  die(status, launch::step_exec, rc);
}

/// The guest's seccomp program, read from fd_seccomp (pread: the descriptor may be shared).
sock_filter filter[BPF_MAXINSNS];

/// socketpair(AF_UNIX, SOCK_STREAM) and an SCM_RIGHTS message: the kernel's numbers and
/// LP64 layouts (the UAPI headers do not export them).
constexpr long af_unix = 1, sock_stream = 1, msg_nosignal = 0x4000;
struct io_vector {
  void* base;
  unsigned long len;
};
struct msg_header {
  void* name = nullptr;
  long namelen = 0;
  io_vector* iov = nullptr;
  unsigned long iovlen = 1;
  void* control = nullptr;
  unsigned long controllen = 0;
  long flags = 0;
};
struct one_fd {             // a cmsghdr carrying one descriptor
  unsigned long len = 20;   // the header's 16 bytes + one int
  int level = 1, type = 1;  // SOL_SOCKET, SCM_RIGHTS
  int fd = -1, padding = 0; // CMSG_SPACE rounds up to 8
};
static_assert(sizeof(one_fd) == 24 && sizeof(msg_header) == 56, "the kernel's LP64 layouts");

/// Sends (`send`) or receives `started` with one descriptor on socket `sock`: true when the
/// whole message went or came.
bool pass_fd(bool send, int sock, long& started, int& fd) {
  io_vector iov{&started, sizeof started};
  one_fd c;
  c.fd = fd;
  msg_header m;
  m.iov = &iov;
  m.control = &c;
  m.controllen = sizeof c;
  if (send) // MSG_NOSIGNAL: a watcher that is gone must not take the helper with it
    return sys(__NR_sendmsg, sock, arg(&m), msg_nosignal) == long(sizeof started);
  if (sys(__NR_recvmsg, sock, arg(&m), 0) != long(sizeof started) || m.controllen < c.len ||
      c.level != 1 || c.type != 1)
    return false;
  fd = c.fd;
  return true;
}

/// exec UID GID N_CGROUPS N_CANDIDATES CANDIDATE… ARGV… (envp: the command's)
/// X forks the exit watcher W while it is still all on the host, joins the guest's cgroups
/// and namespaces, chroots to the init's root and enters the user namespace, then clones Y
/// with CLONE_PARENT: Y is the server's child (pidfd, exit status) inside the guest's pid
/// namespace. X opens a pidfd of Y before it reports Y to the server (which alone may reap
/// it) and sends it to W with Y's start; it does not wait for W. Y drops every capability,
/// becomes the guest uid, loads the seccomp filter and execs the first candidate that exists.
[[noreturn]] void run_exec(char** a, char** envp) {
  const int s = exec::fd_status;
  const long uid = number(a[0]), gid = number(a[1]);
  const int cgroups = int(number(a[2])), candidates = int(number(a[3]));
  char** cands = a + 4;
  char** argv = cands + candidates;
  const int timing = exec::fd_cgroups_first + cgroups;
  int to_watcher[2] = {-1, -1};
  if (sys(__NR_socketpair, af_unix, sock_stream | O_CLOEXEC, 0, arg(to_watcher)) == 0) {
    const long w = fork_watcher(to_watcher[1], timing);
    if (w == 0) {
      long started = 0;
      int pidfd = -1;
      if (pass_fd(false, 0, started, pidfd)) {
        sys(__NR_dup3, pidfd, 0, 0);
        watch(started);
      }
      exit_now(0);
    }
    sys(__NR_close, to_watcher[1]);
    if (w < 0) {
      sys(__NR_close, to_watcher[0]);
      to_watcher[0] = -1;
    }
  }
  sys(__NR_close, timing);
  long rc;
  for (int i = 0; i < cgroups; ++i)
    if ((rc = sys(__NR_write, exec::fd_cgroups_first + i, arg("0"), 1)) != 1)
      die(s, exec::step_cgroup, rc);
  // One setns through the init's pidfd (Linux 5.8): six namespaces at once, no descriptor
  // per namespace to open, pass and close.
  constexpr long guest_namespaces =
      CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWPID | CLONE_NEWNS;
  if ((rc = sys(__NR_setns, exec::fd_init, guest_namespaces)) < 0) die(s, exec::step_setns, rc);
  if ((rc = sys(__NR_fchdir, exec::fd_root)) < 0 || (rc = sys(__NR_chroot, arg("."))) < 0)
    die(s, exec::step_chroot, rc);
  if ((rc = sys(__NR_setgroups, 0, 0)) < 0) die(s, exec::step_setgroups, rc);
  if ((rc = sys(__NR_setns, exec::fd_init, CLONE_NEWUSER)) < 0) die(s, exec::step_userns, rc);
  const long started = now_ns();
  const long y = sys(__NR_clone, CLONE_PARENT | SIGCHLD);
  if (y < 0) die(s, exec::step_clone, y);
  if (y > 0) {
    if (to_watcher[0] >= 0) {
      long at = started;
      int pidfd = int(sys(__NR_pidfd_open, y, 0));
      if (pidfd >= 0) pass_fd(true, to_watcher[0], at, pidfd);
    }
    report r;
    r.value = y;
    sys(__NR_write, s, arg(&r), sizeof r);
    exit_now(0);
  }
  // Y: a session of its own (kill_exec signals the process group).
  if ((rc = sys(__NR_setsid)) < 0) die(s, exec::step_setsid, rc);
  for (int cap = 0; cap <= 63; ++cap)
    sys(__NR_prctl, PR_CAPBSET_DROP, cap); // EINVAL past the last capability
  if ((rc = sys(__NR_setresgid, gid, gid, gid)) < 0) die(s, exec::step_setgid, rc);
  if ((rc = sys(__NR_setresuid, uid, uid, uid)) < 0) die(s, exec::step_setuid, rc);
  // The guest namespace's root uid is unmapped, so setresuid did not clear the
  // capabilities setns granted: drop them explicitly.
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if ((rc = sys(__NR_capset, arg(&hdr), arg(data))) < 0 ||
      (rc = sys(__NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)) < 0)
    die(s, exec::step_caps, rc);
  if ((rc = sys(__NR_chdir, arg("/workspace"))) < 0) die(s, exec::step_chdir, rc);
  if ((rc = sys(__NR_prctl, PR_SET_NO_NEW_PRIVS, 1)) < 0) die(s, exec::step_nnp, rc);
  rc = sys(__NR_pread64, exec::fd_seccomp, arg(filter), sizeof filter, 0);
  if (rc <= 0 || rc % long(sizeof(sock_filter)) != 0) die(s, exec::step_seccomp, rc);
  sock_fprog prog{(unsigned short)(rc / long(sizeof(sock_filter))), filter};
  if ((rc = keep_fds(s + 1, s)) < 0) die(s, exec::step_fds, rc);
  if ((rc = sys(__NR_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, arg(&prog))) < 0)
    die(s, exec::step_seccomp, rc);
  long err = -ENOENT;
  for (int i = 0; i < candidates; ++i) {
    rc = sys(__NR_execve, arg(cands[i]), arg(argv), arg(envp));
    if (rc == -EACCES)
      err = rc;
    else if (rc != -ENOENT && rc != -ENOTDIR) {
      err = rc;
      break;
    }
  }
  say(2, "guestflow: ");
  say(2, argv[0]);
  if (err == -ENOENT) {
    say(2, ": command not found\n");
    exit_now(127);
  }
  char num[24];
  decimal(num, -err);
  say(2, ": cannot execute: errno ");
  say(2, num);
  say(2, "\n");
  exit_now(126);
}

/// command HAS_NETNS N_SYSCTLS {PATH VALUE}… ARGV… (envp: the server's)
/// Enters the network namespace, writes the sysctls there, execs ARGV[0].
[[noreturn]] void run_command(char** a, char** envp) {
  const int s = command::fd_status;
  const bool netns = number(a[0]) != 0;
  const int sysctls = int(number(a[1]));
  char** pairs = a + 2;
  char** argv = pairs + 2 * sysctls;
  long rc;
  if (netns && (rc = sys(__NR_setns, command::fd_netns, CLONE_NEWNET)) < 0)
    die(s, command::step_setns, rc);
  for (int i = 0; i < sysctls; ++i) {
    long fd = sys(__NR_openat, AT_FDCWD, arg(pairs[2 * i]), O_WRONLY | O_CLOEXEC);
    if (fd < 0) die(s, command::step_sysctl, fd);
    const long n = long(length(pairs[2 * i + 1]));
    if ((rc = sys(__NR_write, fd, arg(pairs[2 * i + 1]), n)) != n)
      die(s, command::step_sysctl, rc);
    sys(__NR_close, fd);
  }
  if ((rc = keep_fds(s + 1, s)) < 0) die(s, command::step_fds, rc);
  rc = sys(__NR_execve, arg(argv[0]), arg(argv), arg(envp));
  die(s, command::step_exec, rc);
}

/// timed FD_TIMING + command's arguments: `command` with an exit watcher of the program
/// (protocol.hpp), which watches this very process through the exec.
[[noreturn]] void run_timed(char** a, char** envp) {
  const int timing = int(number(a[0]));
  const long started = now_ns();
  const long self = sys(__NR_pidfd_open, sys(__NR_getpid), 0);
  if (self >= 0) {
    if (fork_watcher(self, timing) == 0) watch(started);
    sys(__NR_close, self);
  }
  sys(__NR_close, timing);
  run_command(a + 1, envp);
}

bool same(const char* x, const char* y) {
  while (*x && *x == *y)
    ++x, ++y;
  return *x == *y;
}

} // namespace

// The compiler may turn struct initialisation into these calls.
extern "C" void* memset(void* d, int c, unsigned long n) {
  auto* p = static_cast<unsigned char*>(d);
  while (n--)
    *p++ = (unsigned char)c;
  return d;
}
extern "C" void* memcpy(void* d, const void* s, unsigned long n) {
  auto* p = static_cast<unsigned char*>(d);
  auto* q = static_cast<const unsigned char*>(s);
  while (n--)
    *p++ = *q++;
  return d;
}

extern "C" [[noreturn]] void helper_main(long* sp) {
  const long argc = sp[0];
  char** argv = reinterpret_cast<char**>(sp + 1);
  char** envp = argv + argc + 1;
  // Every signal at its default, the ones libc reserves for itself (which posix_spawn
  // leaves ignored) included: nothing of the server's dispositions reaches a guest.
  const struct { long handler = 0, flags = 0, restorer = 0, mask = 0; } dfl;
  for (int sig = 1; sig <= 64; ++sig)
    sys(__NR_rt_sigaction, sig, arg(&dfl), 0, 8);
  if (argc >= 2 && same(argv[1], "launch")) run_launch(argv + 2);
  if (argc >= 2 && same(argv[1], "exec")) run_exec(argv + 2, envp);
  if (argc >= 2 && same(argv[1], "command")) run_command(argv + 2, envp);
  if (argc >= 3 && same(argv[1], "timed")) run_timed(argv + 2, envp);
  exit_now(125);
}

// The entry point: hand the initial stack (argc, argv, envp) to helper_main on a stack
// aligned as a call expects.
#if defined(__x86_64__)
asm(".globl _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n"
    " call helper_main\n hlt\n");
#elif defined(__aarch64__)
asm(".globl _start\n_start:\n mov x0, sp\n bl helper_main\n");
#endif
