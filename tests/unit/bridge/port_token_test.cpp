// The service URL tokens (bridge/server/port_token.hpp): what one grants, and every way a
// token that was not signed for it is refused.

#include "bridge/server/port_token.hpp"

#include <gtest/gtest.h>
#include <vector>

namespace guestflow::bridge {
namespace {

const port_grant grant{"sb-abc_123", 8000, 2'000'000'000};

TEST(port_token, a_signed_grant_reads_back_until_it_expires) {
  port_signer s{"key"};
  auto t = s.sign(grant);
  auto g = s.verify(t, grant.expires_at - 1);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->guest_id, grant.guest_id);
  EXPECT_EQ(g->port, 8000);
  EXPECT_EQ(g->expires_at, grant.expires_at);
  auto late = s.verify(t, grant.expires_at);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ec::policy_refused);
  EXPECT_NE(late.error().message.find("expired"), std::string::npos);
}

TEST(port_token, another_key_or_any_changed_field_is_refused) {
  port_signer s{"key"};
  auto t = s.sign(grant);
  EXPECT_FALSE(port_signer{"other key"}.verify(t, 0));
  EXPECT_FALSE(port_signer{}.verify(t, 0)); // a fresh random key: a restarted server
  auto at = [&](size_t field) {             // the offset of the field-th '.'
    size_t k = 0;
    for (size_t i = 0; i < field; ++i)
      k = t.find('.', k) + 1;
    return k;
  };
  auto other_port = t.substr(0, at(1)) + "8001" + t.substr(at(2) - 1);
  auto later = t.substr(0, at(2)) + "2000000001" + t.substr(at(3) - 1);
  auto other_guest = "sb-abc_124" + t.substr(at(1) - 1);
  for (auto& bad : {other_port, later, other_guest}) {
    auto r = s.verify(bad, 0);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("wrong"), std::string::npos) << bad;
  }
  const std::vector<std::string> malformed{"", "x", "a.b", "a.b.c", ".8000.1.ff", t + "0"};
  for (auto& bad : malformed)
    EXPECT_FALSE(s.verify(bad, 0)) << bad;
}

TEST(port_token, ids_that_cannot_travel_in_a_url_are_told_apart) {
  EXPECT_TRUE(token_safe_id("sb-0123_abcXYZ"));
  EXPECT_FALSE(token_safe_id(""));
  EXPECT_FALSE(token_safe_id("a.b"));
  EXPECT_FALSE(token_safe_id("a/b"));
  EXPECT_FALSE(token_safe_id(std::string(129, 'a')));
}

} // namespace
} // namespace guestflow::bridge
