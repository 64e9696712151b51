#pragma once

#include "controlplane/local/service/sandbox_service.hpp"
#include "controlplane/local/store/guest_record.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace guestflow::local {

/// Bench/test-only domain (`--simulate-latency-ms N`): answers every call after N ms with
/// no guest started, so that a benchmark of the runtime measures the runtime's own
/// overhead against a control plane of known, fixed latency. Records live in memory only;
/// files read back empty and writes are discarded. Exec exits 0 and prints `exec_stdout`
/// on stdout (`--simulate-exec-stdout FILE`; empty by default), buffered or streamed
/// alike: with a canned guest-runner frame stream there, a whole-flow run completes (the
/// bridge bench), without it the run ends in an error (no frames).
class simulated_control_plane final : public sandbox_service {
public:
  explicit simulated_control_plane(std::chrono::milliseconds latency,
                                   std::string exec_stdout = {})
      : latency_(latency)
      , exec_stdout_(std::move(exec_stdout)) {}

  shape_list shapes() override;
  capabilities caps() override;
  whoami who() override;
  result<sandbox_created> create(const sandbox_create_request& req) override;
  result<noted_view> view(const std::string& id) override;
  result<sandbox_list> list(const list_query& q) override;
  result<sandbox_deleted> destroy(const std::string& id) override;
  result<sandbox_view> pause(const std::string& id) override;
  result<sandbox_view> resume(const std::string& id) override;
  result<egress_body> egress(const std::string& id) override;
  result<egress_body> set_egress(const std::string& id, const egress_policy& p) override;
  result<std::unique_ptr<running_exec>> start_exec(const std::string& id,
                                                   const exec_request& req) override;
  result<guest_file> open_file(const std::string& id, const std::string& path,
                               bool for_write) override;
  void pause_idle() override {}
  /// The latency is waited by the transport (on a timer): no call here ever sleeps.
  std::chrono::milliseconds simulated_latency() const override { return latency_; }

private:
  /// The record `id` (mutex held) or 404; with `usable`, also 409 unless running.
  result<guest_record*> find(const std::string& id, bool usable = false);
  result<sandbox_view> set_status(const std::string& id, sandbox_status from,
                                  sandbox_status to);

  std::chrono::milliseconds latency_;
  std::string exec_stdout_; ///< what every exec prints (read once, at start)
  std::mutex mu_;
  std::map<std::string, guest_record> guests_;
  /// name → id of every live guest: a create's name check is a lookup, not a scan of
  /// every record (tens of thousands in a bench).
  std::unordered_map<std::string, std::string> live_names_;
  int64_t next_seq_ = 1;
};

} // namespace guestflow::local
