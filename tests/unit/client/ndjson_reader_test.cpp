#include "controlplane/client/ndjson_reader.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

using namespace guestflow::cp;

namespace {

struct collected {
  std::vector<std::string> lines;
  ndjson_reader::line_fn fn() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};

/// Feeds `stream` split at the given cut points, then finishes.
std::vector<std::string> reassemble(const std::string& stream, std::vector<size_t> cuts,
                                    size_t max_line = size_t{16} << 20) {
  ndjson_reader r(max_line);
  collected c;
  size_t at = 0;
  for (auto cut : cuts) {
    EXPECT_TRUE(r.feed(std::string_view(stream).substr(at, cut - at), c.fn()));
    at = cut;
  }
  EXPECT_TRUE(r.feed(std::string_view(stream).substr(at), c.fn()));
  EXPECT_TRUE(r.finish(c.fn()));
  return c.lines;
}

} // namespace

TEST(cp_client_ndjson, random_chunkings_reassemble_exactly) {
  std::vector<std::string> expected;
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    std::string line = R"({"stdout":")" + std::string(static_cast<size_t>(i % 37), 'x') +
                       std::to_string(i) + "\"}";
    expected.push_back(line);
    stream += line + (i % 3 == 0 ? "\r\n" : "\n");
  }
  expected.push_back(R"({"exit_code":0})");
  stream += expected.back() + "\n";
  std::mt19937 rng(12345);
  for (int round = 0; round < 300; ++round) {
    std::vector<size_t> cuts;
    std::uniform_int_distribution<size_t> pos(0, stream.size());
    auto n = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int k = 0; k < n; ++k)
      cuts.push_back(pos(rng));
    std::sort(cuts.begin(), cuts.end());
    ASSERT_EQ(reassemble(stream, cuts), expected) << "round " << round;
  }
  // Every single-byte chunking too (boundaries between '\r' and '\n' included).
  std::vector<size_t> every;
  for (size_t i = 1; i < stream.size(); ++i)
    every.push_back(i);
  EXPECT_EQ(reassemble(stream, every), expected);
}

TEST(cp_client_ndjson, partial_last_line_is_delivered_at_finish) {
  ndjson_reader r;
  collected c;
  ASSERT_TRUE(r.feed("{\"stdout\":\"a\"}\n{\"exit_co", c.fn()));
  EXPECT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(r.buffered(), 9u); // {"exit_co
  ASSERT_TRUE(r.feed("de\":3}", c.fn()));
  EXPECT_EQ(c.lines.size(), 1u);
  ASSERT_TRUE(r.finish(c.fn()));
  ASSERT_EQ(c.lines.size(), 2u);
  EXPECT_EQ(c.lines[1], "{\"exit_code\":3}");
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(cp_client_ndjson, crlf_and_blank_lines) {
  auto lines = reassemble("a\r\n\r\n\nb\rc\r\n\r", {2, 3});
  // A lone '\r' inside a line is content; only the one before '\n' (or at the end) goes.
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b\rc"}));
}

TEST(cp_client_ndjson, line_over_the_cap_fails_and_stays_failed) {
  ndjson_reader r(8);
  collected c;
  EXPECT_TRUE(r.feed("12345678\n", c.fn())); // exactly the cap
  EXPECT_TRUE(r.feed("12345678\r", c.fn())); // the cap plus a pending '\r'
  EXPECT_TRUE(r.feed("\n", c.fn()));
  EXPECT_EQ(c.lines.size(), 2u);
  EXPECT_TRUE(r.feed("1234", c.fn()));
  EXPECT_FALSE(r.feed("567890", c.fn())); // 10 > 8 + 1 buffered: refused while arriving
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(r.buffered(), 0u);
  EXPECT_FALSE(r.feed("ok\n", c.fn()));
  EXPECT_FALSE(r.finish(c.fn()));
  EXPECT_EQ(c.lines.size(), 2u);
}

// The shared splitter (common/line_assembler.hpp) refuses a ninth byte that is not a '\r'
// as it arrives — it can no longer end a line within the cap — instead of at the newline or
// at the end: the same lines are refused, sooner, and nothing is delivered either way.
TEST(cp_client_ndjson, nine_bytes_without_cr_fail_as_they_arrive) {
  {
    ndjson_reader r(8);
    collected c;
    EXPECT_FALSE(r.feed("123456789", c.fn()));
    EXPECT_FALSE(r.feed("\n", c.fn()));
    EXPECT_TRUE(c.lines.empty());
  }
  {
    ndjson_reader r(8);
    collected c;
    EXPECT_TRUE(r.feed("12345678", c.fn())); // the cap, still a line
    EXPECT_FALSE(r.feed("9", c.fn()));
    EXPECT_FALSE(r.finish(c.fn()));
  }
}

TEST(cp_client_ndjson, a_long_line_in_one_chunk_is_refused_without_buffering_it) {
  ndjson_reader r(1024);
  collected c;
  std::string big(5000, 'x');
  EXPECT_FALSE(r.feed(big + "\n", c.fn()));
  EXPECT_EQ(r.buffered(), 0u);
  EXPECT_TRUE(c.lines.empty());
}
