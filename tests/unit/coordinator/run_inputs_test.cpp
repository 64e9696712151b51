// Caller input normalization: every accepted form, both sources, the
// forwarded / dropped / ignored runtime options, and the refusals.

#include "actors/run_inputs.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

raw_json json(const std::string& text) {
  auto r = parse_raw_json(text);
  EXPECT_TRUE(r) << text;
  return r ? *r : raw_json{};
}

run_input value(std::string v, std::string type = "chat") {
  run_input x;
  x.input_value = std::move(v);
  x.type = std::move(type);
  return x;
}

normalized_inputs ok(const std::string& inputs, const std::string& options) {
  auto r = run_inputs::normalize(inputs.empty() ? raw_json{} : json(inputs),
                                 options.empty() ? raw_json{} : json(options));
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : normalized_inputs{};
}

failure refused(const std::string& inputs, const std::string& options) {
  auto r = run_inputs::normalize(inputs.empty() ? raw_json{} : json(inputs),
                                 options.empty() ? raw_json{} : json(options));
  EXPECT_FALSE(r) << "accepted " << inputs << " / " << options;
  return r ? failure{} : r.error();
}

TEST(run_inputs, nothing_given_means_no_inputs_and_empty_options) {
  auto n = ok("", "");
  EXPECT_TRUE(n.inputs.empty());
  EXPECT_EQ(n.runtime_options.text, "{}");
  EXPECT_EQ(n.inputs_from, "");
}

TEST(run_inputs, a_string_is_one_chat_input) {
  auto n = ok(R"("hi")", "");
  ASSERT_EQ(n.inputs.size(), 1u);
  EXPECT_EQ(n.inputs[0], value("hi"));
  EXPECT_TRUE(n.inputs[0].components.empty());
  EXPECT_EQ(n.inputs_from, "inputs");
}

TEST(run_inputs, an_object_keeps_type_session_and_components) {
  auto n = ok(
      R"({"input_value":"hi","type":"chat","session":"s1","components":["ChatInput-a"]})", "");
  ASSERT_EQ(n.inputs.size(), 1u);
  auto want = value("hi", "chat");
  want.session = "s1";
  want.components = {"ChatInput-a"};
  EXPECT_EQ(n.inputs[0], want);
}

TEST(run_inputs, input_type_is_an_alias_for_type_and_null_value_stays_null) {
  auto n = ok(R"({"input_value":null,"input_type":"text"})", "");
  ASSERT_EQ(n.inputs.size(), 1u);
  EXPECT_FALSE(n.inputs[0].input_value);
  EXPECT_EQ(n.inputs[0].type, "text");
}

TEST(run_inputs, a_list_of_objects_is_one_input_each_in_order) {
  auto n = ok(R"([{"input_value":"a","components":["x"]},{"input_value":"b"}])", "");
  ASSERT_EQ(n.inputs.size(), 2u);
  EXPECT_EQ(*n.inputs[0].input_value, "a");
  EXPECT_EQ(n.inputs[0].components, std::vector<std::string>{"x"});
  EXPECT_EQ(*n.inputs[1].input_value, "b");
}

TEST(run_inputs, initial_inputs_in_runtime_options_are_used_when_inputs_is_empty) {
  // Coordinator.stream passes inputs=[] and the real inputs in runtime_options.
  for (auto seam : {"", "[]", "null"}) {
    auto n = ok(seam, R"({"initial_inputs":{"input_value":"hi"}})");
    ASSERT_EQ(n.inputs.size(), 1u) << seam;
    EXPECT_EQ(*n.inputs[0].input_value, "hi");
    EXPECT_EQ(n.inputs_from, "runtime_options.initial_inputs");
  }
  auto n = ok("", R"({"initial_inputs":"plain"})");
  ASSERT_EQ(n.inputs.size(), 1u);
  EXPECT_EQ(*n.inputs[0].input_value, "plain");
  n = ok("", R"({"initial_inputs":[{"input_value":"a"},{"input_value":"b"}]})");
  EXPECT_EQ(n.inputs.size(), 2u);
}

TEST(run_inputs, both_sources_are_fine_when_they_agree_and_refused_when_they_differ) {
  auto n = ok(R"("hi")", R"({"initial_inputs":{"input_value":"hi"}})");
  EXPECT_EQ(n.inputs.size(), 1u);
  auto f = refused(R"("hi")", R"({"initial_inputs":"bye"})");
  EXPECT_EQ(f.code, ec::bad_request);
  EXPECT_NE(f.message.find("differ"), std::string::npos) << f.message;
}

TEST(run_inputs, forwards_exactly_the_four_lfx_options) {
  auto n = ok("", R"({"max_iterations":5,"config":{"a":1},"reset_output_values":true,)"
                  R"("fallback_to_env_vars":false,"initial_inputs":"x"})");
  EXPECT_EQ(n.runtime_options.text,
            R"({"max_iterations":5,"config":{"a":1},)"
            R"("reset_output_values":true,"fallback_to_env_vars":false})");
  EXPECT_TRUE(n.dropped.empty());
  EXPECT_TRUE(n.ignored.empty());
}

TEST(run_inputs, drops_event_manager_and_session_id_and_ignores_the_rest) {
  auto n = ok("", R"({"event_manager":{"q":1},"session_id":"s","_private":1,"stream":true,)"
                  R"("max_iterations":null})");
  EXPECT_EQ(n.runtime_options.text, "{}");
  EXPECT_EQ(n.dropped, (std::vector<std::string>{"event_manager", "session_id"}));
  EXPECT_EQ(n.ignored, (std::vector<std::string>{"_private", "stream"}));
}

TEST(run_inputs, refuses_malformed_inputs_naming_the_field) {
  struct bad_case {
    const char* inputs;
    const char* options;
    const char* mentions;
  };
  for (auto& c : std::initializer_list<bad_case>{
           {"42", "", "inputs: expected a string, an object or a list"},
           {R"(["a"])", "", "inputs[0]: expected object"},
           {R"({"input_value":1})", "", "inputs.input_value"},
           {R"({"input_value":"x","type":"voice"})", "", "inputs.type: expected"},
           {R"({"input_value":"x","components":"ChatInput"})", "", "inputs.components"},
           {R"({"input_value":"x","components":[1]})", "", "inputs.components[0]"},
           {"", R"({"initial_inputs":[{"input_value":"a"},7]})",
            "runtime_options.initial_inputs[1]"},
           {"", R"([1])", "runtime_options: expected object"},
           {"", R"({"max_iterations":"5"})", "runtime_options.max_iterations"},
           {"", R"({"max_iterations":-1})", "runtime_options.max_iterations"},
           {"", R"({"max_iterations":0})", "runtime_options.max_iterations"},
           {"", R"({"max_iterations":1.5})", "runtime_options.max_iterations"},
           {"", R"({"config":[]})", "runtime_options.config"},
           {"", R"({"reset_output_values":"yes"})", "runtime_options.reset_output_values"},
           {"", R"({"fallback_to_env_vars":1})", "runtime_options.fallback_to_env_vars"},
       }) {
    auto f = refused(c.inputs, c.options);
    EXPECT_EQ(f.code, ec::bad_request);
    EXPECT_NE(f.message.find(c.mentions), std::string::npos)
        << c.inputs << " / " << c.options << " → " << f.message;
  }
}

TEST(guest_spec, encodes_what_the_runner_reads) {
  guest_run_spec g;
  g.graph = json(R"({"nodes":[],"edges":[]})");
  auto in = value("hi", "chat");
  in.components = {"a"};
  g.inputs = {in, run_input{}};
  g.outputs = {"ChatOutput-1"};
  g.install_lfx = true;
  g.pip = {"langchain-experimental"};
  EXPECT_EQ(encode(g),
            R"({"graph":{"nodes":[],"edges":[]},"inputs":[)"
            R"({"input_value":"hi","type":"chat","components":["a"]},)"
            R"({"input_value":null,"type":"chat","components":[]}],)"
            R"("outputs":["ChatOutput-1"],"runtime_options":{},)"
            R"("install_lfx":true,"pip":["langchain-experimental"],"executor":"auto"})");
  g.session_id = "s";
  g.user_id = "u";
  g.context = json(R"({"a":1})");
  g.tweaks = json(R"({"ChatInput-1":{"input_value":"t"}})");
  g.history = std::vector<raw_json>{};
  auto text = encode(g);
  EXPECT_EQ(text.substr(text.find(R"("executor")")),
            R"("executor":"auto","session_id":"s","user_id":"u","context":{"a":1},)"
            R"("tweaks":{"ChatInput-1":{"input_value":"t"}},"history":[]})");
}

TEST(guest_spec, variables_json_is_the_one_encoding_with_the_values) {
  secret_vars v;
  v.set("B_KEY", "two \"quoted\"");
  v.set("A_KEY", "sk-one");
  EXPECT_EQ(encode_variables(v), R"({"A_KEY":"sk-one","B_KEY":"two \"quoted\""})");
  EXPECT_EQ(encode_variables(secret_vars{}), "{}");
}

TEST(json_helpers, type_of_and_error_member) {
  EXPECT_EQ(type_of(raw_json{}), json_type::absent);
  EXPECT_EQ(type_of(json("null")), json_type::null);
  EXPECT_EQ(type_of(json("true")), json_type::boolean);
  EXPECT_EQ(type_of(json("-3")), json_type::integer);
  EXPECT_EQ(type_of(json("3.5")), json_type::number);
  EXPECT_EQ(type_of(json("1e3")), json_type::number);
  EXPECT_EQ(type_of(json(R"("s")")), json_type::string);
  EXPECT_EQ(type_of(json("[]")), json_type::array);
  EXPECT_EQ(type_of(json("{}")), json_type::object);
  EXPECT_EQ(error_member(json(R"({"error":"boom","x":1})")),
            std::optional<std::string>{"boom"});
  EXPECT_FALSE(error_member(json(R"({"error":1})")));
  EXPECT_FALSE(error_member(json(R"(["error"])")));
}

} // namespace
} // namespace guestflow
