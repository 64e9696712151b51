#include "fleet/etcd_client.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/eventually.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace guestflow {
namespace {

using namespace std::chrono_literals;
using fleet::etcd_client;
using test_support::etcd_process;

/// One etcd for the whole suite: starting one takes about a second.
class etcd_client_test : public ::testing::Test {
protected:
  static void SetUpTestSuite() { etcd_ = new etcd_process(); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    if (!etcd_->running()) etcd_->restart();
    auto c = etcd_client::make(etcd_->url());
    ASSERT_TRUE(c) << c.error().message;
    client_ = *c;
    prefix_ = "/test/" +
              std::string{::testing::UnitTest::GetInstance()->current_test_info()->name()} +
              "/";
  }

  static etcd_process* etcd_;
  std::shared_ptr<etcd_client> client_;
  std::string prefix_;
};

etcd_process* etcd_client_test::etcd_ = nullptr;

/// A listening socket that never accepts: connects succeed (the kernel's backlog), no
/// answer ever comes — an etcd that hangs.
struct silent_listener {
  int fd = -1;
  uint16_t port = 0;
  silent_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~silent_listener() { ::close(fd); }
};

/// A port nothing listens on (bound, then closed).
uint16_t closed_port() {
  silent_listener l;
  return l.port;
}

TEST_F(etcd_client_test, put_get_range_and_erase_keep_bytes_exact) {
  std::string value{"v\0\xff\n", 4};
  auto rev = client_->put(prefix_ + "a", value);
  ASSERT_TRUE(rev) << rev.error().message;
  EXPECT_GT(*rev, 0);
  ASSERT_TRUE(client_->put(prefix_ + "b", "2"));
  ASSERT_TRUE(client_->put(prefix_ + "c/deeper", "3"));
  ASSERT_TRUE(client_->put(prefix_.substr(0, prefix_.size() - 1) + "0", "outside"));

  auto got = client_->get(prefix_ + "a");
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, value);
  EXPECT_EQ((*got)->create_revision, *rev);

  auto all = client_->range(prefix_);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].key, prefix_ + "a");
  EXPECT_EQ((*all)[2].key, prefix_ + "c/deeper");

  auto gone = client_->erase(prefix_ + "a");
  ASSERT_TRUE(gone);
  EXPECT_TRUE(*gone);
  auto again = client_->erase(prefix_ + "a");
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  auto absent = client_->get(prefix_ + "a");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(absent->has_value());
}

TEST_F(etcd_client_test, create_if_absent_lets_exactly_one_claimant_win) {
  auto key = prefix_ + "name";
  auto first = client_->create_if_absent(key, "runtime-1");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->created);
  auto second = client_->create_if_absent(key, "runtime-2");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->current.value, "runtime-1");
  // The same claimant asking again (a retry whose first attempt landed) holds it.
  auto retry = client_->create_if_absent(key, "runtime-1");
  ASSERT_TRUE(retry);
  EXPECT_TRUE(retry->created);

  auto not_mine = client_->erase_if_value(key, "runtime-2");
  ASSERT_TRUE(not_mine);
  EXPECT_FALSE(*not_mine);
  auto mine = client_->erase_if_value(key, "runtime-1");
  ASSERT_TRUE(mine);
  EXPECT_TRUE(*mine);
  auto reclaimed = client_->create_if_absent(key, "runtime-2");
  ASSERT_TRUE(reclaimed);
  EXPECT_TRUE(reclaimed->created);
}

TEST_F(etcd_client_test, many_threads_racing_for_one_key_get_one_winner) {
  auto key = prefix_ + "contended";
  std::atomic<int> winners{0}, errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto r = client_->create_if_absent(key, "claimant-" + std::to_string(i));
      if (!r)
        ++errors;
      else if (r->created)
        ++winners;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(winners.load(), 1);
}

TEST_F(etcd_client_test, keys_under_a_lease_go_with_it) {
  auto lease = client_->lease_grant(30);
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_EQ(lease->ttl, 30);
  ASSERT_TRUE(client_->put(prefix_ + "node", "record", lease->id));
  auto ttl = client_->lease_keepalive(lease->id);
  ASSERT_TRUE(ttl) << ttl.error().message;
  EXPECT_EQ(*ttl, 30);

  ASSERT_TRUE(client_->lease_revoke(lease->id));
  auto gone = client_->get(prefix_ + "node");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->has_value());
  auto dead = client_->lease_keepalive(lease->id);
  ASSERT_FALSE(dead);
  EXPECT_EQ(dead.error().code, ec::not_found);
  auto twice = client_->lease_revoke(lease->id);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ec::not_found);
  auto orphan = client_->put(prefix_ + "late", "x", lease->id);
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().code, ec::not_found);
}

TEST_F(etcd_client_test, an_unrenewed_lease_expires_and_takes_its_keys) {
  auto lease = client_->lease_grant(1);
  ASSERT_TRUE(lease);
  ASSERT_TRUE(client_->put(prefix_ + "node", "record", lease->id));
  EXPECT_TRUE(test_support::eventually(
      [&] {
        auto r = client_->get(prefix_ + "node");
        return r && !r->has_value();
      },
      15s, 50ms));
  auto dead = client_->lease_keepalive(lease->id);
  ASSERT_FALSE(dead);
  EXPECT_EQ(dead.error().code, ec::not_found);
}

TEST_F(etcd_client_test, fails_over_past_an_unreachable_and_a_silent_endpoint) {
  silent_listener silent;
  auto url = "etcd://127.0.0.1:" + std::to_string(closed_port()) +
             ",127.0.0.1:" + std::to_string(silent.port) +
             ",127.0.0.1:" + std::to_string(etcd_->client_port());
  auto c = etcd_client::make(url, 3s);
  ASSERT_TRUE(c);
  auto rev = (*c)->put(prefix_ + "k", "v");
  ASSERT_TRUE(rev) << rev.error().message;
  // The endpoint that answered is asked first next time.
  auto got = (*c)->get(prefix_ + "k", 200ms);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ((*got)->value, "v");
}

TEST_F(etcd_client_test, a_silent_endpoint_times_out_as_transient_within_the_deadline) {
  silent_listener silent;
  auto c = etcd_client::make("etcd://127.0.0.1:" + std::to_string(silent.port));
  ASSERT_TRUE(c);
  auto r = (*c)->get("/x", 300ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_NE(r.error().message.find("timed out"), std::string::npos) << r.error().message;
}

TEST_F(etcd_client_test, no_endpoint_reachable_is_unavailable_naming_them) {
  auto c = etcd_client::make("etcd://127.0.0.1:" + std::to_string(closed_port()));
  ASSERT_TRUE(c);
  auto r = (*c)->get("/x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_NE(r.error().message.find("unreachable"), std::string::npos) << r.error().message;
}

TEST_F(etcd_client_test, a_killed_etcd_is_unavailable_and_its_data_is_back_after_restart) {
  ASSERT_TRUE(client_->put(prefix_ + "kept", "yes"));
  etcd_->kill();
  auto down = client_->get(prefix_ + "kept");
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code, ec::unavailable);
  etcd_->restart();
  auto back = client_->get(prefix_ + "kept");
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->value, "yes");
}

TEST(etcd_client, refuses_a_malformed_url) {
  auto c = etcd_client::make("http://127.0.0.1:2379");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ec::bad_request);
}

} // namespace
} // namespace guestflow
