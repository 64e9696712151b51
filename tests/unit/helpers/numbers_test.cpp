// common/numbers: the one rule for integers people write (environment, flags, queries).

#include "common/numbers.hpp"

#include <gtest/gtest.h>

using namespace guestflow;

TEST(numbers, digits_with_surrounding_blanks_are_numbers) {
  EXPECT_EQ(parse_uint("0"), std::optional<uint64_t>{0});
  EXPECT_EQ(parse_uint("42"), std::optional<uint64_t>{42});
  EXPECT_EQ(parse_uint(" 42\n"), std::optional<uint64_t>{42});
  EXPECT_EQ(parse_uint("\t007\r\n"), std::optional<uint64_t>{7});
  EXPECT_EQ(parse_uint("18446744073709551615"), std::optional<uint64_t>{UINT64_MAX});
}

TEST(numbers, anything_else_is_not_a_number) {
  const std::string no_break_space = "\xc2\xa0";
  for (std::string bad : {"", " ", "\n", "-1", "+1", "0x10", "1e3", "1.0", "1_000", "1 000",
                          "4 2", "12x", "x12", "18446744073709551616", "\v1", "1\f"})
    EXPECT_EQ(parse_uint(bad), std::nullopt) << "'" << bad << "'";
  EXPECT_EQ(parse_uint(no_break_space + "1"), std::nullopt);
}

TEST(numbers, bounds_are_inclusive) {
  EXPECT_EQ(parse_uint("1", 1, 10), std::optional<uint64_t>{1});
  EXPECT_EQ(parse_uint("10", 1, 10), std::optional<uint64_t>{10});
  EXPECT_EQ(parse_uint("0", 1, 10), std::nullopt);
  EXPECT_EQ(parse_uint("11", 1, 10), std::nullopt);
}

TEST(numbers, narrow_types_refuse_what_does_not_fit) {
  EXPECT_EQ(parse_uint_as<uint32_t>("4294967295"), std::optional<uint32_t>{UINT32_MAX});
  EXPECT_EQ(parse_uint_as<uint32_t>("4294967296"), std::nullopt);
  EXPECT_EQ(parse_uint_as<uint16_t>("65536"), std::nullopt);
  EXPECT_EQ(parse_uint_as<uint8_t>(" 255 "), std::optional<uint8_t>{255});
  EXPECT_EQ(parse_uint_as<uint32_t>("86401", 1, 86'400), std::nullopt);
}

TEST(numbers, one_wording_for_a_refused_integer) {
  EXPECT_EQ(uint_refusal("X", " abc\n", 0, 10), "X: expected an integer in 0..10, got 'abc'");
  EXPECT_EQ(uint_refusal("--timeout", "", 1, 86'400),
            "--timeout: expected an integer in 1..86400, got ''");
}
