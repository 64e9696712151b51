#include "controlplane/client/retry_policy.hpp"

#include <gtest/gtest.h>
#include <set>

using namespace guestflow::cp;
using std::chrono::milliseconds;

TEST(cp_client_retry_policy, delays_grow_exponentially_with_jitter_within_bounds) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    retry_policy p(milliseconds{100}, milliseconds{5000}, seed);
    for (unsigned a = 0; a < 12; ++a) {
      int64_t full = std::min<int64_t>(100LL << a, 5000);
      auto d = p.delay(a).count();
      EXPECT_GE(d, full / 2) << "attempt " << a;
      EXPECT_LE(d, full) << "attempt " << a;
    }
  }
}

TEST(cp_client_retry_policy, jitter_actually_varies) {
  retry_policy p(milliseconds{1000}, milliseconds{1000}, 7);
  std::set<int64_t> seen;
  for (int i = 0; i < 50; ++i)
    seen.insert(p.delay(0).count());
  EXPECT_GT(seen.size(), 10u);
}

TEST(cp_client_retry_policy, never_waits_past_the_deadline) {
  using clock = retry_policy::clock;
  retry_policy p(milliseconds{100}, milliseconds{5000}, 1);
  auto now = clock::now();
  auto deadline = now + milliseconds{1000};
  milliseconds spent{0};
  unsigned retries = 0;
  while (auto w = p.next(now + spent, deadline)) {
    spent += *w;
    ++retries;
    ASSERT_LT(now + spent, deadline);
  }
  // 50..100, 100..200, 200..400, 400..800: at least 2 and at most 4 fit into one second.
  EXPECT_GE(retries, 2u);
  EXPECT_LE(retries, 4u);
  EXPECT_EQ(p.retries(), retries);
}

TEST(cp_client_retry_policy, retry_after_raises_the_wait_and_can_forbid_the_retry) {
  using clock = retry_policy::clock;
  retry_policy p(milliseconds{10}, milliseconds{100}, 3);
  auto now = clock::now();
  auto w = p.next(now, now + milliseconds{5000}, milliseconds{2000});
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, milliseconds{2000});
  EXPECT_FALSE(p.next(now, now + milliseconds{1000}, milliseconds{2000}));
}

TEST(cp_client_retry_policy, degenerate_settings_still_wait) {
  // initial = max = 0 is raised to 1 ms, and the jitter's lower half must not take it back
  // to 0: every retry waits exactly 1 ms, whatever the seed and the attempt.
  for (uint64_t seed = 0; seed < 100; ++seed) {
    retry_policy p(milliseconds{0}, milliseconds{0}, seed);
    for (unsigned attempt : {0u, 1u, 30u}) {
      auto d = p.delay(attempt).count();
      EXPECT_GE(d, 1) << "seed " << seed << ", attempt " << attempt;
      EXPECT_LE(d, 1) << "seed " << seed << ", attempt " << attempt;
    }
  }
}
