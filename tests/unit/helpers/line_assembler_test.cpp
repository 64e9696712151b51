// common/line_assembler: the one line splitter for chunked byte streams (a guest's stdout
// in frame_translator, an NDJSON response body): chunk boundaries anywhere, CRLF, the cap.

#include "common/line_assembler.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace guestflow {
namespace {

std::vector<std::string> lines_of(line_assembler& a,
                                  std::initializer_list<std::string> chunks) {
  std::vector<std::string> out;
  for (auto& c : chunks)
    a.feed(c, [&](std::string_view l) { out.emplace_back(l); });
  return out;
}

TEST(line_assembler, joins_lines_across_any_chunk_boundaries) {
  line_assembler a{64};
  auto got = lines_of(a, {"ab", "c\nde", "f\n\ng", "h\r\n", "\n"});
  EXPECT_EQ(got, (std::vector<std::string>{"abc", "def", "", "gh", ""}));
  EXPECT_EQ(a.pending(), 0u);
}

TEST(line_assembler, byte_by_byte_equals_one_chunk) {
  std::string text = "{\"t\":\"note\"}\nhello\n{\"t\":\"done\"}\n";
  line_assembler whole{64}, bytes{64};
  std::vector<std::string> a, b;
  whole.feed(text, [&](std::string_view l) { a.emplace_back(l); });
  for (char c : text)
    bytes.feed(std::string_view{&c, 1}, [&](std::string_view l) { b.emplace_back(l); });
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 3u);
}

TEST(line_assembler, a_line_over_the_cap_stops_it_without_buffering_it) {
  line_assembler a{8};
  std::vector<std::string> got;
  auto on = [&](std::string_view l) { got.emplace_back(l); };
  EXPECT_TRUE(a.feed("12345678\n1234", on)); // exactly the cap is fine
  EXPECT_FALSE(a.feed("56789", on));         // 9 bytes without a newline: over
  EXPECT_TRUE(a.overflowed());
  EXPECT_EQ(a.pending(), 0u);         // nothing kept
  EXPECT_FALSE(a.feed("\nok\n", on)); // and nothing more is delivered
  EXPECT_EQ(got, std::vector<std::string>{"12345678"});
}

TEST(line_assembler, a_partial_last_line_is_pending) {
  line_assembler a{64};
  lines_of(a, {"one\ntw"});
  EXPECT_EQ(a.pending(), 2u);
}

/// Feeds `stream` cut at `cuts`, then finishes; every call must succeed.
std::vector<std::string> reassemble(const std::string& stream, const std::vector<size_t>& cuts,
                                    size_t max_line = 1 << 20) {
  line_assembler a{max_line};
  std::vector<std::string> out;
  auto on = [&](std::string_view l) { out.emplace_back(l); };
  size_t at = 0;
  for (auto cut : cuts) {
    EXPECT_TRUE(a.feed(std::string_view{stream}.substr(at, cut - at), on));
    at = cut;
  }
  EXPECT_TRUE(a.feed(std::string_view{stream}.substr(at), on));
  EXPECT_TRUE(a.finish(on));
  return out;
}

TEST(line_assembler, random_chunkings_and_crlf_reassemble_exactly) {
  std::vector<std::string> expected;
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    auto line = std::string(static_cast<size_t>(i % 37), 'x') + std::to_string(i);
    expected.push_back(line);
    stream += line + (i % 3 == 0 ? "\r\n" : "\n");
  }
  std::mt19937 rng{12345};
  for (int round = 0; round < 300; ++round) {
    std::vector<size_t> cuts;
    std::uniform_int_distribution<size_t> pos(0, stream.size());
    for (int k = 0, n = std::uniform_int_distribution<int>(0, 60)(rng); k < n; ++k)
      cuts.push_back(pos(rng));
    std::sort(cuts.begin(), cuts.end());
    ASSERT_EQ(reassemble(stream, cuts), expected) << "round " << round;
  }
  std::vector<size_t> every; // every single-byte chunking, '\r' | '\n' splits included
  for (size_t i = 1; i < stream.size(); ++i)
    every.push_back(i);
  EXPECT_EQ(reassemble(stream, every), expected);
}

TEST(line_assembler, only_the_cr_before_a_newline_or_the_end_is_a_terminator) {
  EXPECT_EQ(reassemble("a\r\n\r\n\nb\rc\r\n\r", {2, 3}),
            (std::vector<std::string>{"a", "", "", "b\rc", ""}));
}

TEST(line_assembler, finish_delivers_an_unterminated_last_line) {
  line_assembler a{64};
  std::vector<std::string> got;
  auto on = [&](std::string_view l) { got.emplace_back(l); };
  ASSERT_TRUE(a.feed("{\"a\":1}\n{\"exit_co", on));
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(a.pending(), 9u);
  ASSERT_TRUE(a.feed("de\":3}\r", on));
  ASSERT_TRUE(a.finish(on));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], "{\"exit_code\":3}");
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_TRUE(a.finish(on)); // nothing left: nothing more delivered
  EXPECT_EQ(got.size(), 2u);
}

TEST(line_assembler, the_cap_counts_the_line_not_its_terminator) {
  line_assembler a{8};
  std::vector<std::string> got;
  auto on = [&](std::string_view l) { got.emplace_back(l); };
  EXPECT_TRUE(a.feed("12345678\r", on)); // the cap plus a '\r' whose '\n' is still to come
  EXPECT_EQ(a.pending(), 9u);
  EXPECT_TRUE(a.feed("\n", on));
  EXPECT_TRUE(a.feed("12345678\r\n", on));
  EXPECT_EQ(got, (std::vector<std::string>{"12345678", "12345678"}));
  EXPECT_FALSE(a.feed("12345678\rx", on)); // the '\r' was content after all: 10 bytes
  EXPECT_TRUE(a.overflowed());
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_FALSE(a.finish(on));
  EXPECT_EQ(got.size(), 2u);
}

TEST(line_assembler, a_long_line_in_one_chunk_is_refused_without_buffering_it) {
  line_assembler a{1024};
  std::vector<std::string> got;
  EXPECT_FALSE(
      a.feed(std::string(5000, 'x') + "\n", [&](std::string_view l) { got.emplace_back(l); }));
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_TRUE(got.empty());
}

TEST(line_assembler, a_cr_at_the_very_end_is_a_terminator_too) {
  line_assembler a{8};
  std::vector<std::string> got;
  auto on = [&](std::string_view l) { got.emplace_back(l); };
  EXPECT_TRUE(a.feed("12345678\r", on)); // 9 bytes pending: the cap and a '\r'
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(a.finish(on));
  EXPECT_EQ(got, std::vector<std::string>{"12345678"});
}

} // namespace
} // namespace guestflow
