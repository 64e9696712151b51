#include "controlplane/local/guests/seccomp_filter.hpp"

#include "common/unique_fd.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <linux/seccomp.h>
#include <memory>
#include <sched.h>
#include <seccomp.h>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

/// Refused outright with EPERM. Names unknown to this libseccomp are skipped.
constexpr const char* denied_syscalls[] = {
    // debugging other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    // mounts and namespaces (also impossible without capabilities; defence in depth)
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    // kernel attack surface an unprivileged guest has no use for
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "vhangup",
    "uselib",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "lookup_dcookie",
    "fanotify_init",
};

constexpr uint64_t namespace_flags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

struct ctx_deleter {
  void operator()(void* c) const { seccomp_release(c); }
};

failure seccomp_error(const std::string& what, int rc) {
  return fail(ec::unavailable, "seccomp filter: " + what + ": " + std::strerror(-rc));
}

} // namespace

result<std::vector<sock_filter>> build_guest_seccomp() {
  std::unique_ptr<void, ctx_deleter> ctx{seccomp_init(SCMP_ACT_ALLOW)};
  if (!ctx) return fail(ec::unavailable, "seccomp filter: seccomp_init failed");
  auto* c = ctx.get();
  // The loader sets no_new_privs itself (bwrap, the exec path); the exported program
  // must not depend on libseccomp's load-time attributes.
  if (int rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0)
    return seccomp_error("bad-arch action", rc);
  // A binary tree of syscall numbers instead of a linear chain: the kernel emulates the
  // program for every syscall number when it loads it (its action cache), once per exec.
  if (int rc = seccomp_attr_set(c, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0)
    return seccomp_error("optimize", rc);
  const auto eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : denied_syscalls) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    if (int rc = seccomp_rule_add(c, eperm, nr, 0); rc < 0) return seccomp_error(name, rc);
  }
  for (uint64_t flag : namespace_flags)
    if (int rc = seccomp_rule_add(c, eperm, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc < 0)
      return seccomp_error("clone", rc);
  if (int nr = seccomp_syscall_resolve_name("clone3"); nr != __NR_SCMP_ERROR)
    if (int rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), nr, 0); rc < 0)
      return seccomp_error("clone3", rc);
  for (int family : {AF_NETLINK, AF_PACKET})
    if (int rc = seccomp_rule_add(c, eperm, SCMP_SYS(socket), 1,
                                  SCMP_A0(SCMP_CMP_EQ, uint64_t(family)));
        rc < 0)
      return seccomp_error("socket", rc);

  unique_fd mem{::memfd_create("guestflow-seccomp", MFD_CLOEXEC)};
  if (!mem) return fail(ec::unavailable, std::string{"memfd: "} + std::strerror(errno));
  if (int rc = seccomp_export_bpf(c, mem.get()); rc < 0) return seccomp_error("export", rc);
  struct stat st;
  if (::fstat(mem.get(), &st) != 0 || st.st_size <= 0 || st.st_size % sizeof(sock_filter) != 0)
    return fail(ec::unavailable, "seccomp filter: exported program has a bad size");

  // x32 system calls share the x86_64 audit arch and differ only by bit 30 of the number:
  // a deny-list keyed on x86_64 numbers would not see them. Refuse them up front.
  std::vector<sock_filter> prog{
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
  };
  const size_t head = prog.size();
  prog.resize(head + size_t(st.st_size) / sizeof(sock_filter));
  if (::pread(mem.get(), prog.data() + head, size_t(st.st_size), 0) != st.st_size)
    return fail(ec::unavailable, "seccomp filter: cannot read the exported program");
  if (prog.size() > BPF_MAXINSNS)
    return fail(ec::unavailable, "seccomp filter: program too long");
  return prog;
}

result<int> seccomp_memfd(const std::vector<sock_filter>& prog) {
  unique_fd mem{::memfd_create("guestflow-seccomp", MFD_CLOEXEC)};
  const auto bytes = ssize_t(prog.size() * sizeof(sock_filter));
  if (!mem || ::write(mem.get(), prog.data(), size_t(bytes)) != bytes ||
      ::lseek(mem.get(), 0, SEEK_SET) != 0)
    return fail(ec::unavailable, std::string{"seccomp memfd: "} + std::strerror(errno));
  return mem.release();
}

} // namespace guestflow::local
