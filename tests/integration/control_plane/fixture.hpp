#pragma once

#include "messages/jsend.hpp"
#include "messages/json.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace guestflow::testing {

/// Host pids whose cgroup path names the guest (its processes, seen from the host).
std::vector<int> guest_pids(const std::string& id);

using test_support::eventually;

/// Create bodies of the pool tests (`--warm-pool s-1vcpu-256mb=N`): a deny-all guest the
/// pool holds, and one of a shape it does not (built on demand).
inline const std::string pool_guest_body =
    R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})";
inline const std::string built_guest_body =
    R"({"shape":"s-1vcpu-512mb","egress":["240.0.0.0/4"]})";

/// One real control plane per test, on 127.0.0.1:0 with a fresh state dir. TearDown
/// (whatever failed) starts the server again if the test stopped or killed it, deletes
/// every guest it lists alive until none is (a guest that will not go fails the test), then
/// stops it and checks that no guest it saw or the test created has a process left.
class control_plane_test : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;

  /// (Re)starts the server on the same state dir with extra flags / env.
  void start(const std::vector<std::string>& args = {},
             const std::map<std::string, std::string>& env = {});
  /// SIGTERM; returns the exit status.
  int stop();
  /// Deletes every guest listed alive, again while refused, until none is listed (60 s);
  /// fails the test for each one left. Returns every id it saw alive.
  std::set<std::string> delete_every_guest();

  http_client client() const { return http_client{cp_->port(), api_key_}; }
  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = {}, const header_map& headers = {}) const;

  /// The reply's JSend envelope (fails the test if it is not one).
  static jsend envelope(const http_reply& r);
  /// `data` of a success reply decoded as T (fails the test otherwise).
  template<class T>
  static T data(const http_reply& r) {
    auto env = envelope(r);
    EXPECT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(env.status, jsend::kind::success) << r.body;
    auto v = decode<T>(env.data.text);
    if (!v) {
      ADD_FAILURE() << "cannot decode data: " << v.error().message << " in " << r.body;
      return T{};
    }
    return *v;
  }
  /// Asserts a JSend fail (4xx) / error (5xx) with `status` whose message contains `needle`.
  static void expect_refusal(const http_reply& r, unsigned status, const std::string& needle);

  /// POST /v1/sandboxes; returns the created guest (recorded for cleanup).
  sandbox_created create(const std::string& body = R"({"shape":"s-1vcpu-256mb"})");
  /// POST …/exec (buffered).
  exec_result exec(const std::string& id, const std::string& cmd,
                   const std::vector<std::string>& args = {});
  http_reply exec_reply(const std::string& id, const std::string& cmd,
                        const std::vector<std::string>& args = {});
  std::string exec_body(const std::string& cmd, const std::vector<std::string>& args) const;
  sandbox_view view(const std::string& id);
  http_reply put_file(const std::string& id, const std::string& path, const std::string& body);
  http_reply get_file(const std::string& id, const std::string& path);

  /// Entries under state_dir/guests (one workspace per guest the backend built).
  size_t workspace_count() const;
  uint64_t sandbox_total();
  /// Waits (at most `within`) until the warm pool holds `n` ready guests and makes none
  /// (after a take it rebuilds one); false if it never did.
  bool pool_full(int n, std::chrono::seconds within);

  /// Non-empty: every create() asks for this isolation and checks the guest's view says so.
  std::string isolation_;
  test_support::temp_dir dir_{"guestflow-cp-test"};
  std::filesystem::path state_dir_;
  std::string api_key_;
  std::unique_ptr<control_plane_process> cp_;
  std::vector<std::string> created_;
};

/// A suite that runs on both guest kinds (isolation "namespaces" and "gvisor"): the same
/// behaviour, the same assertions. Instantiate it with GUESTFLOW_BOTH_KINDS(suite).
class both_kinds_test : public control_plane_test,
                        public ::testing::WithParamInterface<const char*> {
protected:
  void SetUp() override {
    isolation_ = GetParam();
    control_plane_test::SetUp();
  }
  bool gvisor() const { return isolation_ == "gvisor"; }
};

#define GUESTFLOW_BOTH_KINDS(suite)                                                            \
  INSTANTIATE_TEST_SUITE_P(                                                                    \
      kinds, suite, ::testing::Values("namespaces", "gvisor"),                                 \
      [](const ::testing::TestParamInfo<const char*>& i) { return std::string{i.param}; })

} // namespace guestflow::testing
