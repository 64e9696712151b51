// Randomized robustness: thousands of mutated and random byte strings through every
// decoder (deterministic seed). Each must return a value or a bad_request, never crash or
// throw, and whatever decodes must re-encode to something that decodes to the same value.

#include "tests/unit/messages/samples.hpp"

#include <gtest/gtest.h>
#include <random>

namespace guestflow {
namespace {

using namespace guestflow::test;

std::vector<std::string> corpus() {
  using k = guest_frame::kind;
  std::vector<std::string> out{
      encode(sample_shape_list()),
      encode(sample_create()),
      encode(sample_created()),
      encode(sample_view()),
      encode(sample_list()),
      encode(sample_deleted()),
      encode(sample_whoami()),
      encode(sample_egress_body()),
      encode(sample_exec_request()),
      encode(sample_exec_result()),
      encode(sample_stream_line(exec_stream_line::kind::exit_code)),
      encode(sample_capabilities()),
      encode(sample_jsend(jsend::kind::fail)),
      encode(sample_jsend(jsend::kind::error)),
      sample_graph_json(true),
      sample_graph_json(false),
      encode(event_of(run_event::kind::complete)),
      encode(event_of(run_event::kind::vertex_built)),
      encode(event_of(run_event::kind::token)),
      encode(event_of(run_event::kind::message)),
      encode(sample_sandbox_result()),
      encode(std::vector<run_outputs>{sample_run_outputs()}),
      R"({"egress":["1.2.3.4","[::1]:80","10.0.0.0/8:443"],"shape":"s","name":"ab"})",
      R"([1e400,-1e-400,"\ud83d\ude00",{"a":null}])",
  };
  for (auto kind : {k::note, k::vertex_start, k::step, k::outputs, k::done, k::fatal, k::token,
                    k::message, k::state})
    out.push_back(encode(frame_of(kind)));
  return out;
}

std::string mutate(std::string s, std::mt19937& rng) {
  static const std::string tokens[] = {"{",
                                       "}",
                                       "[",
                                       "]",
                                       "\"",
                                       ":",
                                       ",",
                                       "null",
                                       "true",
                                       "1e400",
                                       "-1",
                                       "\\u0000",
                                       "\\ud800",
                                       "\xff",
                                       "\xc0\xaf",
                                       "\0",
                                       "18446744073709551616",
                                       "[[[[[[[[",
                                       "\"t\":\"step\""};
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : rng() % n; };
  auto rounds = 1 + rng() % 4;
  for (size_t r = 0; r < rounds; ++r) {
    switch (rng() % 7) {
    case 0: // flip a byte
      if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
      break;
    case 1: // insert a random byte
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)),
               static_cast<char>(rng()));
      break;
    case 2: { // delete a range
      if (s.empty()) break;
      auto at = pick(s.size());
      s.erase(at, 1 + pick(std::min<size_t>(16, s.size() - at)));
      break;
    }
    case 3: // truncate
      s.resize(pick(s.size() + 1));
      break;
    case 4: { // duplicate a range
      if (s.empty()) break;
      auto at = pick(s.size());
      auto len = 1 + pick(std::min<size_t>(32, s.size() - at));
      s.insert(at, s.substr(at, len));
      break;
    }
    default: { // insert a JSON-ish token
      auto& t = tokens[pick(std::size(tokens))];
      auto tok = &t == &tokens[15] ? std::string(1, '\0') : t;
      s.insert(pick(s.size() + 1), tok);
      break;
    }
    }
  }
  return s;
}

/// How many (input, decoder) pairs decoded successfully: proves the mutations keep
/// reaching past the parser into the field decoders and the re-encode check.
size_t accepted = 0;

/// Whatever decodes must survive encode → decode unchanged.
template<class T>
void check_stable(std::string_view input) {
  auto r = decode<T>(input);
  accepted += r ? 1 : 0;
  if (!r) {
    ASSERT_EQ(r.error().code, ec::bad_request);
    ASSERT_FALSE(r.error().message.empty());
    return;
  }
  auto bytes = encode(*r);
  auto back = decode<T>(bytes);
  ASSERT_TRUE(back) << back.error().message << "\ninput: " << input << "\nencoded: " << bytes;
  ASSERT_EQ(*back, *r) << bytes;
}

void check_all(std::string_view input) {
  check_stable<shape_list>(input);
  check_stable<sandbox_create_request>(input);
  check_stable<sandbox_created>(input);
  check_stable<sandbox_view>(input);
  check_stable<sandbox_list>(input);
  check_stable<sandbox_deleted>(input);
  check_stable<whoami>(input);
  check_stable<egress_body>(input);
  check_stable<exec_request>(input);
  check_stable<exec_result>(input);
  check_stable<exec_stream_line>(input);
  check_stable<capabilities>(input);
  check_stable<jsend>(input);
  check_stable<flow_graph>(input);
  check_stable<run_event>(input);
  check_stable<sandbox_result>(input);
  if (auto raw = parse_raw_json(input)) {
    auto again = parse_raw_json(raw->text);
    ASSERT_TRUE(again) << raw->text;
    ASSERT_EQ(*again, *raw);
  }
  if (auto f = decode_frame(input)) {
    auto back = decode_frame(encode(*f));
    ASSERT_TRUE(back) << encode(*f);
    ASSERT_EQ(*back, *f) << encode(*f);
  } else {
    ASSERT_EQ(f.error().code, ec::bad_request);
  }
  if (auto body = decode_run_outputs(input)) {
    auto back = decode_run_outputs(encode(*body));
    ASSERT_TRUE(back);
    ASSERT_EQ(*back, *body);
  }
  // Egress rules straight from bytes.
  auto rule = parse_egress_rule(input);
  if (rule) {
    auto again = parse_egress_rule(to_string(*rule));
    ASSERT_TRUE(again) << to_string(*rule);
    ASSERT_EQ(*again, *rule);
  }
}

TEST(fuzz, mutated_documents_never_crash_and_stay_stable) {
  std::mt19937 rng{20240501};
  auto seeds = corpus();
  for (auto& s : seeds)
    ASSERT_NO_FATAL_FAILURE(check_all(s));
  accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    auto input = mutate(seeds[rng() % seeds.size()], rng);
    ASSERT_NO_FATAL_FAILURE(check_all(input)) << "iteration " << i;
  }
  EXPECT_GT(accepted, 400u) << "mutations no longer reach the field decoders";
}

TEST(fuzz, random_bytes_never_crash) {
  std::mt19937 rng{7};
  static const char alphabet[] = "{}[]\":,.-+eE0123456789 tfnrul\\a\xff\x80\x00";
  for (int i = 0; i < 1500; ++i) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s)
      c = (rng() % 2) ? alphabet[rng() % (sizeof(alphabet) - 1)] : static_cast<char>(rng());
    ASSERT_NO_FATAL_FAILURE(check_all(s)) << "iteration " << i;
  }
}

TEST(fuzz, egress_rules_from_noise) {
  std::mt19937 rng{99};
  static const char alphabet[] = "0123456789abcdef:./[]*%x ";
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 24, ' ');
    for (auto& c : s)
      c = alphabet[rng() % (sizeof(alphabet) - 1)];
    auto r = parse_egress_rule(s);
    if (r) {
      auto again = parse_egress_rule(to_string(*r));
      ASSERT_TRUE(again) << s << " -> " << to_string(*r);
      ASSERT_EQ(*again, *r) << s;
    } else {
      ASSERT_EQ(r.error().code, ec::bad_request);
    }
  }
}

TEST(fuzz, pathological_shapes_are_refused_quickly) {
  decode_limits limits;
  for (auto depth : {127u, 128u, 129u, 100000u}) {
    std::string arr(depth, '[');
    arr += std::string(depth, ']');
    auto r = parse_raw_json(arr, limits);
    EXPECT_EQ(static_cast<bool>(r), depth <= 128) << depth;
  }
  std::string unbalanced(1 << 20, '{');
  EXPECT_FALSE(decode<flow_graph>(unbalanced));
  std::string long_string = "\"" + std::string(1 << 22, 'a');
  EXPECT_FALSE(parse_raw_json(long_string));
}

} // namespace
} // namespace guestflow
