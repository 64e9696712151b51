// The local control plane answers with guestflow's one error → status table
// (messages/http_status.hpp), except policy_refused: on the CreateOS wire API 403 refuses
// credentials, so it stays 409 (the client maps it back by its message).

#include "controlplane/local/http/replies.hpp"
#include "messages/http_status.hpp"
#include "messages/jsend.hpp"

#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::local;

TEST(local_replies, statuses_are_the_shared_table_but_policy_refused_is_409) {
  for (auto i = static_cast<unsigned>(ec::bad_request); i <= static_cast<unsigned>(last_ec);
       ++i) {
    auto code = static_cast<ec>(i);
    if (code == ec::policy_refused) continue;
    EXPECT_EQ(wire_status(code), http_status(code)) << to_string(code);
  }
  EXPECT_EQ(wire_status(ec::policy_refused), 409u);
  EXPECT_EQ(wire_status(ec::paused), 409u); // "sandbox is paused", as CreateOS answers
  EXPECT_EQ(wire_status(ec::not_found), 404u);
  EXPECT_EQ(wire_status(ec::bad_request), 400u);
}

TEST(local_replies, failures_are_jsend_fail_below_500_and_error_above) {
  auto refused = failure_reply(fail(ec::policy_refused, "image in use: 'py'"));
  EXPECT_EQ(refused.status, 409u);
  EXPECT_EQ(refused.body, jsend_fail("image in use: 'py'"));
  auto down = failure_reply(fail(ec::unavailable, "backend down"));
  EXPECT_EQ(down.status, 503u);
  EXPECT_EQ(down.body, jsend_error("backend down", 503));
}
