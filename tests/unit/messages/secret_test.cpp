// messages/secret.hpp: a run's variables print redacted everywhere, and the scrubber
// replaces every secret value in text that leaves the host.

#include "messages/json.hpp"
#include "messages/run.hpp"
#include "messages/secret.hpp"

#include <caf/deep_to_string.hpp>
#include <gtest/gtest.h>
#include <sstream>

namespace guestflow {
namespace {

secret_vars vars(secret_vars::map_type m) {
  return secret_vars{std::move(m)};
}

TEST(secret_vars, every_printed_form_hides_the_values) {
  auto v = vars({{"API_KEY", "sk-0123456789"}, {"B", "hunter22"}});
  EXPECT_EQ(to_string(v), R"({"API_KEY":"********","B":"********"})");
  std::ostringstream os;
  os << v;
  EXPECT_EQ(os.str(), to_string(v));
  auto shown = caf::deep_to_string(v);
  EXPECT_EQ(shown.find("sk-0123456789"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("hunter22"), std::string::npos) << shown;
  EXPECT_NE(shown.find("API_KEY"), std::string::npos) << shown;
  EXPECT_EQ(v.names(), (std::vector<std::string>{"API_KEY", "B"}));
  EXPECT_EQ(v.reveal().at("B"), "hunter22");
}

TEST(secret_scrubber, replaces_each_occurrence_of_each_value) {
  secret_scrubber s{vars({{"A", "sk-0123456789"}, {"B", "hunter22"}})};
  std::string text = "key sk-0123456789, pw hunter22; again sk-0123456789";
  EXPECT_TRUE(s.found_in(text));
  EXPECT_TRUE(s.scrub(text));
  EXPECT_EQ(text, "key ********, pw ********; again ********");
  EXPECT_FALSE(s.found_in(text));
  EXPECT_FALSE(s.scrub(text)); // nothing left: untouched
}

TEST(secret_scrubber, overlapping_and_adjacent_matches_become_one_mask) {
  secret_scrubber s{vars({{"A", "abab"}, {"B", "babx"}, {"C", "zzzz"}})};
  std::string text = "<ababab><ababx><zzzzzzzz>";
  EXPECT_TRUE(s.scrub(text));
  EXPECT_EQ(text, "<********><********><********>");
}

TEST(secret_scrubber, a_value_inside_another_is_covered_by_the_longer) {
  secret_scrubber s{vars({{"A", "sk-12"}, {"B", "prefix-sk-12-suffix"}})};
  std::string text = "x prefix-sk-12-suffix y sk-12 z";
  EXPECT_TRUE(s.scrub(text));
  EXPECT_EQ(text, "x ******** y ******** z");
}

TEST(secret_scrubber, short_values_and_no_variables_scrub_nothing) {
  secret_scrubber none;
  EXPECT_TRUE(none.empty());
  std::string text = "abc yes 1";
  EXPECT_FALSE(none.scrub(text));
  secret_scrubber shorts{vars({{"A", "abc"}, {"B", "yes"}, {"C", ""}})};
  EXPECT_TRUE(shorts.empty()) << "values under 4 bytes are not looked for";
  EXPECT_FALSE(shorts.scrub(text));
  EXPECT_EQ(text, "abc yes 1");
}

TEST(secret_scrubber, binary_and_multibyte_text) {
  secret_scrubber s{vars({{"A", "p\xC3\xA4ss\n\x01"}})};
  std::string text = std::string{"\0lead p\xC3\xA4ss\n\x01 tail", 18};
  EXPECT_TRUE(s.scrub(text));
  EXPECT_EQ(text, std::string("\0lead ******** tail", 19));
  std::string at_edges = "p\xC3\xA4ss\n\x01p\xC3\xA4ss\n\x01";
  EXPECT_TRUE(s.scrub(at_edges));
  EXPECT_EQ(at_edges, "********");
}

TEST(secret_scrubber, json_stays_json_with_every_secret_masked) {
  secret_scrubber s{vars({{"A", "sk-0123456789"},
                          {"Q", "has \"quote\" and\nnewline"},
                          {"N", "12345678"},
                          {"T", "true"}})};
  auto text = R"({"k":"key=sk-0123456789","sk-0123456789":[1,12345678,123456789,true],)"
              R"("q":"has \"quote\" and\nnewline!","n":{"deep":["x sk-0123456789 y"]},)"
              R"("plain":"nothing"})";
  auto raw = parse_raw_json(text);
  ASSERT_TRUE(raw) << raw.error().message;
  EXPECT_TRUE(s.scrub_json(*raw));
  EXPECT_EQ(raw->text, R"({"k":"key=********","********":[1,"********","********","********"],)"
                       R"("q":"********!","n":{"deep":["x ******** y"]},"plain":"nothing"})");
  EXPECT_TRUE(parse_raw_json(raw->text)) << "still JSON";
  auto clean = parse_raw_json(R"({"a":"fine","b":[1,2]})");
  ASSERT_TRUE(clean);
  auto before = clean->text;
  EXPECT_FALSE(s.scrub_json(*clean));
  EXPECT_EQ(clean->text, before);
}

TEST(secret_scrubber, an_event_leaves_with_no_secret_in_any_field) {
  const std::string secret = "sk-live-0123456789";
  secret_scrubber s{vars({{"OPENAI_API_KEY", secret}})};
  run_event e;
  e.type = run_event::kind::error;
  e.id = "v " + secret;
  e.name = "n " + secret;
  e.logs = "l " + secret;
  e.line = "printed " + secret;
  e.message = "Error building Component X: \n\nbad key " + secret;
  e.failed = {"id-" + secret};
  e.outputs = raw_json{R"({"o":")" + secret + R"("})"};
  e.extras.edit().result = raw_json{R"({"results":{"r":")" + secret + R"("}})"};
  e.extras.edit().types = raw_json{R"({")" + secret + R"(":"str"})"};
  e.extras.edit().data = raw_json{R"({"chunk":")" + secret + R"("})"};
  e.extras.edit().context = raw_json{R"({"c":[")" + secret + R"("]})"};
  result_data r;
  r.results = raw_json{R"({"x":")" + secret + R"("})"};
  r.artifacts = r.outputs = r.logs = r.messages = r.results;
  r.duration = secret;
  r.component_display_name = secret;
  r.component_id = secret;
  run_outputs ro;
  ro.inputs = raw_json{R"({"input_value":")" + secret + R"("})"};
  ro.outputs = {r, std::nullopt};
  e.run_outputs_list = {ro};
  // Every kind encodes different fields: check each one's wire form.
  for (auto k : {run_event::kind::vertex_built, run_event::kind::vertex_failed,
                 run_event::kind::stdout_line, run_event::kind::complete,
                 run_event::kind::error, run_event::kind::token}) {
    auto x = e;
    x.type = k;
    scrub(x, s);
    auto line = encode(x);
    EXPECT_EQ(line.find(secret), std::string::npos) << line;
    EXPECT_NE(line.find("********"), std::string::npos) << line;
    EXPECT_TRUE(decode<run_event>(line)) << line;
  }
  auto untouched = e;
  scrub(untouched, secret_scrubber{});
  EXPECT_EQ(untouched, e) << "a run without variables: nothing changes";
}

TEST(secret_scrubber, the_unfinished_tail_is_the_longest_end_that_begins_a_secret) {
  secret_scrubber s{vars({{"A", "sk-abcdef"}, {"B", "xyzw"}})};
  EXPECT_EQ(s.unfinished_tail("hello"), 0u);
  EXPECT_EQ(s.unfinished_tail("key: sk-ab"), 5u);
  EXPECT_EQ(s.unfinished_tail("key: s"), 1u);
  EXPECT_EQ(s.unfinished_tail("sk-abcde"), 8u);
  EXPECT_EQ(s.unfinished_tail("sk-abcdef"), 0u) << "a whole secret is the scrubber's, not held";
  EXPECT_EQ(s.unfinished_tail("..xyz"), 3u);
  EXPECT_EQ(s.unfinished_tail(""), 0u);
}

run_event token(const std::string& id, const std::string& chunk) {
  run_event e;
  e.type = run_event::kind::token;
  e.id = id;
  e.extras.edit().data = raw_json{R"({"chunk":)" + quote_json(chunk) + R"(,"id":"m-1"})"};
  return e;
}

std::string chunks_of(const std::vector<run_event>& evs) {
  std::string out;
  for (auto& e : evs)
    if (e.type == run_event::kind::token) {
      auto at = e.data().text.find(R"("chunk":")") + 9;
      out += e.data().text.substr(at, e.data().text.find('"', at) - at) + "|";
    }
  return out;
}

TEST(event_scrubber, a_secret_split_across_token_chunks_is_masked_whole) {
  const std::string secret = "sk-live-0123456789";
  event_scrubber s{secret_scrubber{vars({{"K", secret}})}};
  std::vector<run_event> out;
  for (auto c : {"the key is sk-li", "ve-0123", "456789 and", " more sk-", "no"})
    s.feed(token("LLM-1", c), out);
  run_event built;
  built.type = run_event::kind::vertex_built;
  built.id = "LLM-1";
  s.feed(built, out);
  // Joined, the chunks are the stream with the secret masked; a chunk that only began a
  // secret waited for the next one.
  EXPECT_EQ(chunks_of(out), "the key is |******** and| more |sk-no|") << chunks_of(out);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out.back().type, run_event::kind::vertex_built);
  for (auto& e : out) {
    EXPECT_EQ(encode(e).find("sk-li"), std::string::npos) << encode(e);
    if (e.type == run_event::kind::token)
      EXPECT_NE(e.data().text.find(R"("id":"m-1")"), std::string::npos) << "other members kept";
  }
}

TEST(event_scrubber, what_is_held_goes_out_before_the_next_other_event) {
  event_scrubber s{secret_scrubber{vars({{"K", "sk-live-0123456789"}})}};
  std::vector<run_event> out;
  s.feed(token("A", "ends with sk-"), out);
  ASSERT_EQ(out.size(), 1u);
  s.feed(token("B", "another stream"), out); // another vertex: A's held end first
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].id, "A");
  EXPECT_EQ(chunks_of(out), "ends with |sk-|another stream|");
  run_event done;
  done.type = run_event::kind::complete;
  s.feed(done, out);
  EXPECT_EQ(out.back().type, run_event::kind::complete);
}

TEST(event_scrubber, without_variables_events_pass_unchanged) {
  event_scrubber s;
  EXPECT_TRUE(s.empty());
  std::vector<run_event> out;
  s.feed(token("A", "sk-"), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], token("A", "sk-"));
}

} // namespace
} // namespace guestflow
