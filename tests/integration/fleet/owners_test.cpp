// Persistent guests' ownership (controlplane/local/fleet_owners) against a real etcd, on the
// leases of two real node registrars: one owner at a time, the key on the owner's lease.
#include "controlplane/local/fleet_owners.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/eventually.hpp"

#include <condition_variable>
#include <gtest/gtest.h>
#include <mutex>

using namespace guestflow;
using namespace std::chrono_literals;

namespace {

/// A node whose record never changes (the registrar only needs it to register).
class quiet_node final : public fleet::registered_node {
public:
  std::string record() override { return R"({"node":"quiet"})"; }
  uint64_t wait_change(uint64_t seen, std::chrono::steady_clock::time_point until) override {
    std::unique_lock lk{mu_};
    cv_.wait_until(lk, until, [&] { return woken_; });
    woken_ = false;
    return seen;
  }
  void wake() override {
    std::lock_guard lk{mu_};
    woken_ = true;
    cv_.notify_all();
  }
  void set_ready(bool) override {}

private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

struct member {
  quiet_node node;
  fleet::node_registrar registrar;
  local::fleet_owners owners;
  member(std::shared_ptr<fleet::etcd_client> etcd, const std::string& name)
      : registrar(etcd, node, {name, 2s, [](const std::string&) {}, [](const std::string&) {}})
      , owners(etcd, name) {
    owners.attach(&registrar);
  }
};

/// What `m` sees as the other owner of `name` ("?" when etcd cannot tell).
std::string owner(member& m, const std::string& name) {
  auto r = m.owners.other_owner(name);
  return r ? *r : "?";
}

TEST(fleet_owners, one_owner_at_a_time_on_its_lease) {
  test_support::etcd_process etcd;
  auto client = fleet::etcd_client::make(etcd.url());
  ASSERT_TRUE(client);
  member a{*client, "node-a"}, b{*client, "node-b"};

  // Not registered yet (fenced): nobody may own anything.
  auto fenced = a.owners.acquire("g");
  ASSERT_FALSE(fenced);
  EXPECT_EQ(fenced.error().code, ec::unavailable);
  EXPECT_NE(fenced.error().message.find("fenced"), std::string::npos) << fenced.error().message;

  a.registrar.start();
  b.registrar.start();
  ASSERT_TRUE(test_support::eventually(
      [&] { return a.registrar.lease() != 0 && b.registrar.lease() != 0; }, 20s));

  ASSERT_TRUE(a.owners.acquire("g"));
  ASSERT_TRUE(a.owners.acquire("g")) << "taking what is ours again is fine";
  auto kv = (*client)->get("/guestflow/owners/g");
  ASSERT_TRUE(kv && kv->has_value());
  EXPECT_EQ((*kv)->lease, a.registrar.lease());

  auto refused = b.owners.acquire("g");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ec::policy_refused); // 409 on the wire
  EXPECT_NE(refused.error().message.find("is owned by node node-a"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(owner(b, "g"), "node-a");
  EXPECT_EQ(owner(a, "g"), "");

  // Released by its owner only.
  b.owners.release("g");
  EXPECT_EQ(owner(b, "g"), "node-a");
  a.owners.release("g");
  EXPECT_EQ(owner(b, "g"), "");
  ASSERT_TRUE(b.owners.acquire("g"));

  // The owner's lease gone (here revoked by its stop): the key goes with it.
  b.registrar.stop();
  EXPECT_EQ(owner(a, "g"), "");
  EXPECT_TRUE(a.owners.acquire("g"));
  a.registrar.stop();
}

} // namespace
