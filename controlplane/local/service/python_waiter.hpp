#pragma once

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/guest_backend.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace guestflow::local {

/// False when GUESTFLOW_POOL_PYTHON=0 (the pool then starts no waiters).
bool python_waiter_wanted();

/// The guest-side script (python_waiter.py, compiled in by CMake).
extern const char* const python_waiter_script;
/// Compiled in beside it (guests/fork_template.hpp declares it too).
extern const char* const fork_template_script;

/// A python3 started in a warm-pool guest before it is taken, blocked reading a FIFO in the
/// guest's private /tmp, so that the guest's first `python3 FILE ARGS…` or `python3 -c CODE
/// ARGS…` (or either under `timeout --signal=KILL N`) pays no interpreter start-up: the
/// server writes the request into the FIFO and this process (its pipes untouched until
/// then, its pidfd) becomes the exec's. Any other first exec kills it first, so nobody sees a
/// process they did not start. Owns the process: destroying a waiter not handed out kills and
/// reaps it.
class python_waiter {
public:
  /// Starts it with `envs` (the pool guest's: empty, or its image's PATH). It imports
  /// `preload` (the image's, resolved_image::preload) before it makes its FIFO: modules,
  /// and `guestflow:runner` for the runner's engine (python_waiter.py says which).
  static result<std::unique_ptr<python_waiter>>
  start(guest_backend& backend, const guest_runtime& g,
        const std::map<std::string, std::string>& envs,
        const std::vector<std::string>& preload = {});
  /// A fork-pool guest's run (guests/fork_template.hpp) as the waiter, `ctl` its control
  /// socket: forked from the template, which imported the preload; serve() sends it the
  /// request with the exec's pipes, it runs it, and its exit status comes from the template
  /// (exec_process::status_fd), the run being no child of the server. Dropping it unused
  /// ends it (EOF) before the next exec starts: the guest holds its init only.
  static std::unique_ptr<python_waiter> forked(guest_backend& backend, const guest_runtime& g,
                                               unique_fd ctl, std::vector<std::string> env);
  ~python_waiter();
  python_waiter(const python_waiter&) = delete;
  python_waiter& operator=(const python_waiter&) = delete;

  /// The request serving `req` with `env` (the exec's whole environment, as
  /// exec_environment() makes it), or nullopt when the waiter would not behave exactly as
  /// the command: another command, interpreter options, or a variable that changes
  /// python3's start-up (PATH, HOME, TZ, LANG, LANGUAGE, LC_*, PYTHON* but
  /// PYTHONUNBUFFERED) differing from `waiter_env`, the waiter's own.
  static std::optional<std::string> request_for(const exec_request& req,
                                                const std::vector<std::string>& env,
                                                const std::vector<std::string>& waiter_env);

  const std::vector<std::string>& environment() const { return env_; }

  /// Waits (polling, up to `within`, plus up to 60 s more when it has a preload to import)
  /// until the waiter made its FIFO, that is, until its interpreter has started and
  /// imported its preload: a guest is offered only then. False if it ended or is late.
  /// Reads and removes the waiter's report of modules that failed to import.
  bool await_fifo(std::chrono::milliseconds within);

  /// Preload failures ("preload M: Error: why") not reported before by any waiter of this
  /// process, so that the caller logs each failure once however many guests meet it.
  /// Empty until await_fifo() returned true.
  std::vector<std::string> preload_problems() const { return problems_; }

  /// True once the process ended (or was handed out). A dead waiter is a guest someone
  /// killed processes in, and its init cannot finish dying (the last process of its pid
  /// namespace) until the waiter is reaped: such a guest is discarded, never handed out.
  bool exited() const;

  /// Writes `request` into the FIFO and hands out the process; afterwards this object owns
  /// nothing. Fails (and keeps the process, for the destructor) when the waiter is not
  /// listening: not started yet, or gone.
  result<exec_process> serve(const std::string& request);

  /// Kills python waiters a previous server left in `g` (after a restart the pool adopts
  /// its guests; their waiters were children of the dead server): every process in its
  /// cgroups whose command line is a waiter's. Returns how many.
  static size_t kill_stale(const guest_runtime& g);

private:
  python_waiter(guest_backend& backend, guest_runtime g, exec_process p,
                std::vector<std::string> env, bool preloads);
  /// Reads the waiter's failure report (if any) into problems_ and removes it.
  void take_preload_report();

  guest_backend& backend_;
  guest_runtime guest_;
  exec_process p_;
  std::vector<std::string> env_;
  bool preloads_ = false;
  std::vector<std::string> problems_;
  unique_fd ctl_; ///< forked(): the guest init's control socket
  result<exec_process> serve_forked(const std::string& request);
};

} // namespace guestflow::local
