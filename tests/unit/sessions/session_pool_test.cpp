#include "actors/guest_names.hpp"
#include "actors/session_pool.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

using namespace std::chrono_literals;
using kind = session_pool::decision::kind;
using state = session_pool::state;

/// A fake clock: the pool never reads time itself.
struct fake_clock {
  session_pool::time_point now{};
  void advance(std::chrono::seconds s) { now += s; }
};

session_request req(std::string image = "", bool net = false) {
  session_request r;
  r.user_id = "u";
  r.thread_id = "t";
  r.image = std::move(image);
  r.allow_network = net;
  return r;
}

TEST(SessionGuestName, DeterministicKeptFromSweepsAndDistinct) {
  auto a = session_guest_name("abc123", "alice", "thread-1");
  EXPECT_EQ(a, session_guest_name("abc123", "alice", "thread-1"));
  EXPECT_EQ(a.size(), 22u);
  EXPECT_EQ(a.rfind("gf-s-", 0), 0u);
  // Not of the ephemeral form: no sweep of ephemeral guests deletes a session's files.
  EXPECT_FALSE(names::parse(a));
  EXPECT_NE(a, session_guest_name("abc123", "alice", "thread-2"));
  EXPECT_NE(a, session_guest_name("abc123", "bob", "thread-1"));
  // The parts are length-prefixed: moving a byte between user and thread is another key.
  EXPECT_NE(session_guest_name("abc123", "ab", "c"), session_guest_name("abc123", "a", "bc"));
  EXPECT_NE(a, session_guest_name("zzz999", "alice", "thread-1"));
}

TEST(SessionPool, CreateThenReuseActiveThenWarm) {
  fake_clock c;
  session_pool p{{3, 600s}};
  auto d = p.acquire("a", req(), c.now);
  EXPECT_EQ(d.what, kind::create);
  EXPECT_FALSE(d.evict);
  // A second acquire while the create is in flight waits for it: one guest, never two.
  EXPECT_EQ(p.acquire("a", req(), c.now).what, kind::wait);
  p.created("a", "id-a");
  d = p.acquire("a", req(), c.now);
  EXPECT_EQ(d.what, kind::ready);
  EXPECT_TRUE(d.reused);
  ASSERT_TRUE(p.release("a", c.now));
  EXPECT_EQ(p.find("a")->st, state::warm);
  d = p.acquire("a", req(), c.now);
  EXPECT_EQ(d.what, kind::ready);
  EXPECT_EQ(p.find("a")->st, state::active);
  EXPECT_EQ(p.find("a")->guest_id, "id-a");
}

TEST(SessionPool, AnotherImageOrNetworkIsRefused) {
  fake_clock c;
  session_pool p{{3, 600s}};
  p.acquire("a", req(), c.now);
  p.created("a", "id");
  auto d = p.acquire("a", req("other"), c.now);
  EXPECT_EQ(d.what, kind::refuse);
  EXPECT_EQ(d.why.code, ec::bad_request);
  EXPECT_EQ(p.acquire("a", req("", true), c.now).what, kind::refuse);
  auto mounted = req();
  mounted.mounts.push_back({"/srv/data", "", "/mnt/data", true});
  EXPECT_EQ(p.acquire("a", mounted, c.now).what, kind::refuse);
  // The thread dir is not the guest's identity: the latest acquire's is the one synced.
  auto other_dir = req();
  other_dir.thread_dir = "/srv/threads/t";
  EXPECT_EQ(p.acquire("a", other_dir, c.now).what, kind::ready);
  EXPECT_EQ(p.find("a")->req.thread_dir, "/srv/threads/t");
}

TEST(SessionPool, AnotherMemoryOrCpusIsRefusedAnotherIdleTimeoutIsTheLatest) {
  fake_clock c;
  session_pool p{{3, 600s}};
  auto sized = req();
  sized.memory_mib = 512;
  sized.cpus = 1;
  p.acquire("a", sized, c.now);
  p.created("a", "id");
  auto more = sized;
  more.memory_mib = 1024;
  auto d = p.acquire("a", more, c.now);
  EXPECT_EQ(d.what, kind::refuse);
  EXPECT_EQ(d.why.code, ec::bad_request);
  EXPECT_NE(d.why.message.find("memory_mib or cpus"), std::string::npos) << d.why.message;
  auto cpus = sized;
  cpus.cpus = 2;
  EXPECT_EQ(p.acquire("a", cpus, c.now).what, kind::refuse);
  EXPECT_EQ(p.acquire("a", req(), c.now).what, kind::refuse); // the server's shape
  auto idle = sized;
  idle.idle_timeout_seconds = 5;
  EXPECT_EQ(p.acquire("a", idle, c.now).what, kind::ready);
  EXPECT_EQ(p.idle_timeout(*p.find("a")), 5s);
}

TEST(SessionPool, EachSessionIdlesOutAfterItsOwnTimeout) {
  fake_clock c;
  session_pool p{{3, 600s}};
  auto quick = req(), never = req();
  quick.idle_timeout_seconds = 2;
  never.idle_timeout_seconds = 0;
  p.acquire("quick", quick, c.now);
  p.acquire("never", never, c.now);
  p.acquire("server", req(), c.now);
  for (auto n : {"quick", "never", "server"}) {
    p.created(n, n);
    p.release(n, c.now);
  }
  ASSERT_TRUE(p.next_expiry());
  EXPECT_EQ(*p.next_expiry(), c.now + 2s);
  c.advance(1s);
  EXPECT_TRUE(p.expire(c.now).empty());
  c.advance(1s);
  auto gone = p.expire(c.now);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].name, "quick");
  p.stopped("quick", true, c.now);
  EXPECT_EQ(*p.next_expiry(), c.now - 2s + 600s); // the server's; "never" has none
  c.advance(598s);
  gone = p.expire(c.now);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].name, "server");
  c.advance(24h * 7);
  EXPECT_TRUE(p.expire(c.now).empty());
  EXPECT_EQ(p.find("never")->st, state::warm);
  // A later acquire's timeout is the one that counts.
  auto later = req();
  later.idle_timeout_seconds = 3;
  p.acquire("never", later, c.now);
  p.release("never", c.now);
  c.advance(3s);
  gone = p.expire(c.now);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].name, "never");
}

shape_list local_catalog() {
  shape_list l;
  l.data = {{"s-1vcpu-64mb", 1, 64, 256},    {"s-1vcpu-256mb", 1, 256, 1024},
            {"s-1vcpu-512mb", 1, 512, 2048}, {"s-1vcpu-1gb", 1, 1024, 4096},
            {"s-2vcpu-2gb", 2, 2048, 8192},  {"s-2vcpu-4gb", 2, 4096, 16384},
            {"s-4vcpu-8gb", 4, 8192, 16384}, {"s-4vcpu-16gb", 4, 16384, 16384}};
  l.total = l.data.size();
  return l;
}

TEST(SessionShape, TheSmallestShapeWithTheMemoryAndCpusRoundingUp) {
  auto cat = local_catalog();
  auto id = [&](std::optional<uint64_t> mem, std::optional<uint32_t> cpus,
                uint64_t floor = 256) {
    auto s = session_shape(cat, mem, cpus, floor, std::nullopt, std::nullopt);
    return s ? s->id : "refused: " + s.error().message;
  };
  EXPECT_EQ(id(1024, std::nullopt), "s-1vcpu-1gb");
  EXPECT_EQ(id(1000, std::nullopt), "s-1vcpu-1gb");
  EXPECT_EQ(id(1025, std::nullopt), "s-2vcpu-2gb");
  EXPECT_EQ(id(64, std::nullopt), "s-1vcpu-256mb"); // the provider's floor
  EXPECT_EQ(id(64, std::nullopt, 64), "s-1vcpu-64mb");
  EXPECT_EQ(id(std::nullopt, 2), "s-2vcpu-2gb");
  EXPECT_EQ(id(512, 2), "s-2vcpu-2gb");
  EXPECT_EQ(id(4097, 2), "s-4vcpu-8gb");
  EXPECT_EQ(id(16384, 4), "s-4vcpu-16gb");
}

TEST(SessionShape, OverTheCatalogThePinOrTheServersMaximumIsRefusedNamingTheKey) {
  auto cat = local_catalog();
  auto refusal = [](const result<shape>& s) {
    return s ? "chose " + s->id
             : std::string{to_string(s.error().code)} + ": " + s.error().message;
  };
  EXPECT_EQ(refusal(session_shape(cat, 16385, std::nullopt, 256, std::nullopt, std::nullopt)),
            "bad_request: memory_mib: 16385 is more than the largest shape has, "
            "s-4vcpu-16gb (16384 MiB, 4 vCPU)");
  EXPECT_EQ(refusal(session_shape(cat, std::nullopt, 8, 256, std::nullopt, std::nullopt)),
            "bad_request: cpus: 8 is more than the largest shape has, "
            "s-4vcpu-8gb (8192 MiB, 4 vCPU)");
  EXPECT_EQ(refusal(session_shape(cat, 1024, std::nullopt, 256, "s-1vcpu-256mb", std::nullopt)),
            "policy_refused: memory_mib: 1024 does not fit the shape the server pins, "
            "s-1vcpu-256mb (256 MiB, 1 vCPU) (GUESTFLOW_SHAPE)");
  EXPECT_EQ(refusal(session_shape(cat, 200, 1, 256, "s-1vcpu-256mb", std::nullopt)),
            "chose s-1vcpu-256mb");
  EXPECT_EQ(refusal(session_shape(cat, 2048, std::nullopt, 256, std::nullopt, 1024)),
            "policy_refused: memory_mib: 2048 is over the server's maximum of 1024 MiB "
            "(GUESTFLOW_SESSION_MAX_MEMORY_MIB)");
  EXPECT_EQ(refusal(session_shape(cat, 512, 2, 256, std::nullopt, 1024)),
            "policy_refused: memory_mib: 512, cpus: 2 needs shape s-2vcpu-2gb (2048 MiB, 2 "
            "vCPU), over the server's maximum of 1024 MiB (GUESTFLOW_SESSION_MAX_MEMORY_MIB)");
  EXPECT_EQ(refusal(session_shape(cat, 1024, std::nullopt, 256, std::nullopt, 1024)),
            "chose s-1vcpu-1gb");
}

TEST(SessionPool, AtTheCapTheLeastRecentlyReleasedWarmGuestIsStoppedAndWokenLater) {
  fake_clock c;
  session_pool p{{3, 600s}};
  for (auto n : {"a", "b", "c"}) {
    p.acquire(n, req(), c.now);
    p.created(n, std::string{"id-"} + n);
  }
  c.advance(1s);
  ASSERT_TRUE(p.release("b", c.now));
  c.advance(1s);
  ASSERT_TRUE(p.release("a", c.now)); // released later than b
  auto d = p.acquire("d", req(), c.now);
  EXPECT_EQ(d.what, kind::create);
  ASSERT_TRUE(d.evict);
  EXPECT_EQ(*d.evict, "b");
  EXPECT_EQ(p.find("b")->st, state::stopping);
  EXPECT_EQ(p.counted(), 3u);
  // b's own user comes back while its stop is in flight: wait, then wake the same guest.
  EXPECT_EQ(p.acquire("b", req(), c.now).what, kind::wait);
  p.stopped("b", true, c.now);
  EXPECT_EQ(p.find("b")->st, state::stopped);
  EXPECT_EQ(p.find("b")->guest_id, "id-b"); // files kept with it
  p.created("d", "id-d");
  EXPECT_EQ(p.counted(), 3u); // a stopped guest holds no running place
  d = p.acquire("b", req(), c.now);
  EXPECT_EQ(d.what, kind::wake);
  EXPECT_EQ(d.guest_id, "id-b");
  EXPECT_TRUE(d.reused);
  ASSERT_TRUE(d.evict); // waking needs a running place too
  EXPECT_EQ(*d.evict, "a");
  EXPECT_EQ(p.find("b")->st, state::creating);
  p.created("b", "id-b");
  EXPECT_EQ(p.find("b")->st, state::active);
  // A failed stop forgets the slot: the guest is found again by name.
  p.stopped("a", false, c.now);
  EXPECT_EQ(p.find("a"), nullptr);
}

TEST(SessionPool, AStoppedGuestIsForgottenAfterTheRetention) {
  fake_clock c;
  session_pool p{{1, 10s, 100s}};
  p.acquire("a", req(), c.now);
  p.created("a", "id-a");
  p.release("a", c.now);
  c.advance(10s);
  auto idle = p.expire(c.now);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(p.find("a")->st, state::stopping);
  p.stopped("a", true, c.now);
  ASSERT_TRUE(p.next_expiry());
  EXPECT_EQ(*p.next_expiry(), c.now + 100s);
  c.advance(99s);
  p.expire(c.now);
  EXPECT_EQ(p.find("a")->st, state::stopped);
  EXPECT_TRUE(p.begin_delete("a")) << "a stopped session can be deleted";
  p.deleted("a");
  p.acquire("a", req(), c.now);
  p.created("a", "id-a2");
  p.release("a", c.now);
  c.advance(10s);
  p.expire(c.now);
  p.stopped("a", true, c.now);
  c.advance(100s);
  EXPECT_TRUE(p.expire(c.now).empty());
  EXPECT_EQ(p.find("a"), nullptr); // the control plane deleted it at the same time
  EXPECT_FALSE(p.next_expiry());
}

TEST(SessionPool, AnActiveGuestIsNeverEvicted) {
  fake_clock c;
  session_pool p{{2, 600s}};
  p.acquire("a", req(), c.now);
  p.created("a", "id-a");
  p.acquire("b", req(), c.now); // still creating: counted, not evictable
  auto d = p.acquire("c", req(), c.now);
  EXPECT_EQ(d.what, kind::refuse);
  EXPECT_EQ(d.why.code, ec::capacity);
  EXPECT_EQ(p.find("a")->st, state::active);
  EXPECT_EQ(p.find("c"), nullptr);
  p.create_failed("b"); // a failed create frees its place
  EXPECT_EQ(p.acquire("c", req(), c.now).what, kind::create);
}

TEST(SessionPool, WarmGuestsIdlePastTheTimeoutExpire) {
  fake_clock c;
  session_pool p{{3, 10s}};
  for (auto n : {"a", "b", "c"}) {
    p.acquire(n, req(), c.now);
    p.created(n, n);
  }
  EXPECT_FALSE(p.next_expiry());
  p.release("a", c.now);
  c.advance(4s);
  p.release("b", c.now);
  ASSERT_TRUE(p.next_expiry());
  EXPECT_EQ(*p.next_expiry(), c.now - 4s + 10s);
  c.advance(5s);
  EXPECT_TRUE(p.expire(c.now).empty()); // a idle 9 s
  c.advance(1s);
  auto gone = p.expire(c.now);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].name, "a");
  EXPECT_EQ(p.find("a")->st, state::stopping);
  EXPECT_EQ(p.find("c")->st, state::active); // active guests never idle out
  c.advance(1h);
  gone = p.expire(c.now);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].name, "b");
  p.stopped("a", false, c.now);
  p.stopped("b", false, c.now);
  EXPECT_FALSE(p.next_expiry());
}

TEST(SessionPool, NoTimeoutNeverExpires) {
  fake_clock c;
  session_pool p{{3, 0s, 0s}};
  p.acquire("a", req(), c.now);
  p.created("a", "a");
  p.release("a", c.now);
  c.advance(24h * 365);
  EXPECT_TRUE(p.expire(c.now).empty());
  EXPECT_FALSE(p.next_expiry());
}

TEST(SessionPool, ReleaseAndDeleteOfUnknownOrCreating) {
  fake_clock c;
  session_pool p{{3, 600s}};
  EXPECT_EQ(p.release("x", c.now).error().code, ec::not_found);
  EXPECT_EQ(p.begin_delete("x").error().code, ec::not_found);
  p.acquire("a", req(), c.now);
  EXPECT_EQ(p.release("a", c.now).error().code, ec::bad_request);
  EXPECT_EQ(p.begin_delete("a").error().code, ec::bad_request);
  p.created("a", "id");
  ASSERT_TRUE(p.begin_delete("a"));
  EXPECT_EQ(p.begin_delete("a").error().code, ec::not_found); // a second DELETE
  EXPECT_EQ(p.release("a", c.now).error().code, ec::not_found);
  p.deleted("a");
  EXPECT_EQ(p.counted(), 0u);
}

} // namespace
} // namespace guestflow
