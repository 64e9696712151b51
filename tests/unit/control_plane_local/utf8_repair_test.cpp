#include "controlplane/local/http/utf8_repair.hpp"

#include <gtest/gtest.h>

namespace guestflow::local {
namespace {

const std::string fffd = "\xEF\xBF\xBD";

TEST(local_utf8_repair, passes_valid_text_through) {
  utf8_repair r;
  EXPECT_EQ(r.feed("plain ascii, \xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80"),
            "plain ascii, \xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80");
  EXPECT_EQ(r.flush(), "");
}

TEST(local_utf8_repair, replaces_each_maximal_invalid_subpart) {
  utf8_repair r;
  EXPECT_EQ(r.feed("a\xFF"
                   "b"),
            "a" + fffd + "b");
  EXPECT_EQ(r.feed("\xC3("), fffd + "(");                           // lead without continuation
  EXPECT_EQ(r.feed("\xE2\x82("), fffd + "(");                       // truncated 3-byte sequence
  EXPECT_EQ(r.feed("\xC0\xAF"), fffd + fffd);                       // overlong
  EXPECT_EQ(r.feed("\xED\xA0\x80"), fffd + fffd + fffd);            // surrogate
  EXPECT_EQ(r.feed("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd); // > U+10FFFF
}

TEST(local_utf8_repair, joins_sequences_split_across_chunks) {
  utf8_repair r;
  EXPECT_EQ(r.feed("x\xE2"), "x");
  EXPECT_EQ(r.feed("\x82"), "");
  EXPECT_EQ(r.feed("\xAC"
                   "y"),
            "\xE2\x82\xAC"
            "y");
  EXPECT_EQ(r.feed("\xF0\x9F"), "");
  EXPECT_EQ(r.flush(), fffd) << "an incomplete tail at EOF is one U+FFFD";
}

} // namespace
} // namespace guestflow::local
