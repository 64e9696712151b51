// common/text: the one trim, lower and split.

#include "common/text.hpp"

#include <gtest/gtest.h>

using namespace guestflow;

TEST(text, trim_removes_exactly_the_four_blanks) {
  EXPECT_EQ(trim(" \t\r\nx y\n\r\t "), "x y");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \t\r\n"), "");
  EXPECT_EQ(trim("\vx\f"), "\vx\f");         // vertical tab and form feed are content
  EXPECT_EQ(trim("\xc2\xa0x"), "\xc2\xa0x"); // so is a UTF-8 no-break space
}

TEST(text, lower_changes_ascii_letters_only) {
  EXPECT_EQ(lower("AuTo-Z_09"), "auto-z_09");
  EXPECT_EQ(lower("\xc3\x84"), "\xc3\x84"); // Ä stays: bytes, not characters
  EXPECT_EQ(lower(""), "");
}

TEST(text, split_trims_items_and_drops_empty_ones) {
  EXPECT_EQ(split(" a, b,,c ", ","), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split("a.org b.org\n\tc.org", ", \t\n"),
            (std::vector<std::string>{"a.org", "b.org", "c.org"}));
  EXPECT_TRUE(split("", ",").empty());
  EXPECT_TRUE(split(" , ,", ",").empty());
  EXPECT_EQ(split("one", ","), std::vector<std::string>{"one"});
}
