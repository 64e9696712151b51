#pragma once

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/guest_backend.hpp"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

/// A fork-server pool's template (issue 39; bench/README.md, "A fork-server pool"): a guest
/// of its own (own cgroups, the spawn path of every guest) whose python3 imported a pool's
/// preload once and never runs anyone's code. Each pool guest is the static guest init
/// (guest_init/init.cpp's fork mode, spawned without copying the template) as pid 1 and one
/// fork() of the template beside it as pid 2, the guest's run, in namespaces of their own
/// (guests/fork_template.py says what each does before it is a guest). The template has
/// CAP_SYS_ADMIN, CAP_SETPCAP and CAP_NET_ADMIN in its own user namespace and no seccomp;
/// a guest's init and run drop every capability (the run also stacks the guests'
/// deny-list) before anything of theirs runs. It talks to the host over SOCK_SEQPACKET
/// sockets in its spool (bound read-only; a guest covers it): SO_PEERCRED says the template
/// connected, the pidfds it sends say which processes are the guest's.
namespace guestflow::local {

/// The template's guest-side program (guests/fork_template.py, compiled in).
extern const char* const fork_template_script;
/// guest/unpack_run.py, the `python3 -c` program of every flow run serve sends, compiled in
/// beside them: a waiter that preloads `guestflow:runner` is given it and compiles it ahead
/// (a run whose source differs, a server of another build, is compiled as python3 would).
extern const char* const flow_run_main_script;
/// A python waiter's arguments after its FIFO (a fork template's after its own): the preload,
/// comma-separated, then flow_run_main_script when it has `guestflow:runner`. Empty without
/// a preload.
std::vector<std::string> waiter_preload_args(const std::vector<std::string>& preload);

class fork_template {
public:
  /// Launches the template for pool guests built as `pool_spec` (its shape, image; the
  /// template gets at least 1 GiB: the guests' shared pages stay charged to it), its python3
  /// started with exactly `env` (the pool's exec environment) and importing `preload` as the
  /// python waiter does (`waiter`: python_waiter.py's source). `slot` names it (a server keeps
  /// at most max_slots). Returns once it imported and connected.
  static result<std::unique_ptr<fork_template>> start(guest_backend& backend,
                                                      const guest_spec& pool_spec,
                                                      const std::vector<std::string>& env,
                                                      const std::vector<std::string>& preload,
                                                      const std::string& waiter, size_t slot);
  /// Kills the template and removes its cgroups and spool — unless a guest cloned from it
  /// still runs (a taken guest outlives the server): then it stays for kill_stale(). Then
  /// kill_stale() itself: an earlier server's templates whose clones are gone end too.
  ~fork_template();
  fork_template(const fork_template&) = delete;
  fork_template& operator=(const fork_template&) = delete;

  static constexpr size_t max_slots = 8;

  /// Kills templates a dead server of this state dir left (every slot) but those whose
  /// clones still run: guests live in their template's pid namespace and die with its
  /// sandbox. A template that died alone (its clones outlive it: fork_template.py's keeper
  /// holds the sandbox up) ends here too once they are gone.
  static void kill_stale(guest_backend& backend);

  /// guest_spec::launch for a pool guest: its init and run (pidfds from the template,
  /// checked to be the template's children, pid 1 and 2 of one pid namespace) moved into
  /// `req`'s cgroups, the run given `req`'s workspace as a detached mount, ready once it is a
  /// guest; the init is the guest's (launched_init). `ctl` receives the guest's control
  /// socket (its python_waiter: python_waiter::forked; the template says the run's status
  /// there).
  result<launched_init> clone(const launch_request& req, unique_fd& ctl);

  /// The template still runs (a dead one makes the pool fall back to ordinary guests).
  bool alive() const;

  /// Modules of the preload that failed to import ("name: Error: why").
  const std::vector<std::string>& problems() const { return problems_; }

private:
  fork_template(guest_backend& backend)
      : backend_(backend) {}

  guest_backend& backend_;
  guest_runtime rt_;
  std::filesystem::path spool_;
  unique_fd listen_, conn_;
  pid_t template_pid_ = 0; ///< the python3 (bwrap's pid 1 is rt_.init_pid)
  std::vector<std::string> problems_;
  mutable std::mutex mu_; ///< one clone request at a time until its clone connected
};

} // namespace guestflow::local
