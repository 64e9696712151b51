#pragma once

// A control-plane actor driven by a script, for the deterministic scheduler: it keeps a
// tiny guest table (so "was it deleted exactly once" is a fact, not a mock expectation)
// and answers each call as the test says — value, error, or never (the promise is kept so
// the test can answer late, or lose the answer).

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace guestflow::test {

struct call_script {
  enum class mode { ok, fail, hang };
  mode how = mode::ok;
  ec code = ec::transient;
  int times = -1; ///< how many calls this applies to (-1 = all), then back to ok
};

struct fake_guest {
  fake_guest() = default;
  fake_guest(std::string i, std::string n, std::string created = "2020-01-01T00:00:00Z",
             int del = 0)
      : id(std::move(i))
      , name(std::move(n))
      , created_at(std::move(created))
      , deletes(del) {}

  std::string id;
  std::string name;
  std::string created_at = "2020-01-01T00:00:00Z";
  int deletes = 0;                                 ///< successful deletes of this guest
  sandbox_status status = sandbox_status::running; ///< until deleted
  egress_policy egress;                            ///< as created (or changed by the test)
  std::optional<std::string> paused_at;
  std::optional<std::string> last_resumed_at;
  std::string isolation; ///< the view's kind ("" as a CreateOS guest reports none)
};

struct script {
  /// by op: create put exec stream delete list get resume stop egress fetch
  std::map<std::string, call_script> calls;
  exec_result exec_reply;               ///< what a successful exec returns
  std::deque<exec_result> exec_replies; ///< answered first, one per successful exec
  std::vector<exec_request> exec_cmds;  ///< every exec's request, in order
  std::string fetch_reply;              ///< what a successful fetch returns (cap applies)
  /// A resume leaves the guest in this state (running; `resuming` to make the caller poll).
  sandbox_status resume_to = sandbox_status::running;
  /// Another process's guest that appears just before the next create is handled (it won
  /// the race for the name: the create is refused with 409 "name … is taken").
  std::optional<fake_guest> appear_on_create;
  std::vector<exec_stream_line> stream_lines;
  int32_t stream_exit = 0;
  bool create_materializes_on_hang = true; ///< a hung create still makes the guest
  std::vector<std::string> log;            ///< "create NAME", "delete ID", …
  std::vector<fake_guest> guests;
  std::optional<caf::typed_response_promise<sandbox_created>> held_create;
  int next_id = 0;

  /// Decides how this call goes, consuming one use of a limited script.
  call_script::mode take(const std::string& op);
  ec last_code = ec::transient; ///< the code of the last failing call taken
  fake_guest* by_id(const std::string& id);
  /// A stopped guest starts on use (a persistent guest of the local control plane).
  void wake(const std::string& id);
  size_t live() const; ///< guests never deleted
  int deletes_of_name(const std::string& name) const;
  int count(const std::string& prefix) const; ///< log lines starting with `prefix`
};

/// What a test's caller actor heard back from one execution's `run`.
struct run_outcome {
  std::optional<execution_report> report;
  std::optional<failure> error;
  bool answered() const { return report || error; }
};

struct scripted_state {
  static inline const char* name = "scripted_controlplane";
  std::shared_ptr<script> s;
};

controlplane_actor::behavior_type
scripted_controlplane(controlplane_actor::stateful_pointer<scripted_state> self,
                      std::shared_ptr<script> s);

} // namespace guestflow::test
