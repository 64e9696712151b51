// Flow graphs: what the decoder extracts, validation of graphs built in code, and the
// deterministic topological order.

#include "messages/json_codec.hpp"
#include "tests/support/slurp.hpp"
#include "tests/unit/messages/samples.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

using namespace guestflow::test;

std::vector<std::string> ids_in_order(const flow_graph& g) {
  std::vector<std::string> out;
  for (auto i : topological_order(g))
    out.push_back(g.nodes.at(i).id);
  return out;
}

flow_graph chain(std::vector<std::string> ids, std::vector<std::pair<int, int>> edges) {
  flow_graph g;
  for (auto& id : ids)
    g.nodes.push_back(graph_node{id, "T", "T", {}, {}});
  for (auto [s, t] : edges)
    g.edges.push_back(graph_edge{ids[s], ids[t], "", ""});
  return g;
}

TEST(graph, extracts_nodes_from_a_langflow_export) {
  auto g = sample_graph();
  ASSERT_EQ(g.nodes.size(), 4u);
  auto& in = g.nodes[0];
  EXPECT_EQ(in.id, "ChatInput-1");
  EXPECT_EQ(in.type, "ChatInput");
  EXPECT_EQ(in.display_name, "Chat Input");
  ASSERT_EQ(in.template_values.size(), 2u) << "only template entries with a value member";
  EXPECT_EQ(in.template_values.at("input_value").text, R"("hello")");
  EXPECT_EQ(in.template_values.at("should_store").text, "true");
  EXPECT_EQ(in.outputs.text, R"([{"name":"message","types":["Message"]}])");
  auto& prompt = g.nodes[1];
  EXPECT_EQ(prompt.display_name, "Prompt") << "display_name defaults to the type";
  EXPECT_EQ(prompt.template_values.at("nums").text, "[1,2.5,-3,1e300]");
  EXPECT_TRUE(prompt.outputs.empty());
  EXPECT_EQ(g.nodes[3].display_name, "note");
}

std::string edge_json(const std::string& from, const std::string& to) {
  return R"({"source":")" + from + R"(","target":")" + to + R"("})";
}

/// Each template value and the outputs of every node of `text` (a flow), and the payload,
/// are what `codec::canonical` makes of them in the parsed document.
void expect_fields_as_canonical(const std::string& text) {
  auto g = decode<flow_graph>(text);
  ASSERT_TRUE(g) << g.error().message;
  codec::document doc;
  ASSERT_FALSE(codec::parse(text, decode_limits{}, doc));
  const codec::value& root = doc.HasMember("nodes") ? doc : doc["data"];
  size_t i = 0;
  std::string payload = R"({"nodes":[)";
  for (auto& n : root["nodes"].GetArray()) {
    if (i == g->nodes.size() || n["id"].GetString() != g->nodes[i].id) continue; // a note
    payload += (i ? "," : "") + codec::canonical(n, {}).text;
    auto& x = g->nodes[i++];
    auto& data = n["data"];
    if (!data.HasMember("node") || !data["node"].IsObject()) {
      EXPECT_TRUE(x.template_values.empty() && x.outputs.empty()) << x.id;
      continue;
    }
    auto& node = data["node"];
    std::map<std::string, raw_json> want;
    if (node.HasMember("template") && node["template"].IsObject())
      for (auto& m : node["template"].GetObject())
        if (m.value.IsObject() && m.value.HasMember("value"))
          want[m.name.GetString()] = codec::canonical(m.value["value"], codec::path{});
    EXPECT_EQ(x.template_values, want) << x.id;
    bool outs = node.HasMember("outputs") && !node["outputs"].IsNull();
    EXPECT_EQ(x.outputs.text, outs ? codec::canonical(node["outputs"], {}).text : "") << x.id;
  }
  EXPECT_EQ(i, g->nodes.size());
  EXPECT_EQ(g->payload.text,
            payload + R"(],"edges":)" + codec::canonical(root["edges"], {}).text + "}")
      << "the payload: each vertex and the edges, canonical";
}

TEST(graph, template_values_and_outputs_are_their_canonical_text) {
  expect_fields_as_canonical(sample_graph_json());
  // Escapes the canonical form rewrites, null values, a null template and outputs, nested
  // "value" keys deeper than a template entry, entries that are not objects.
  expect_fields_as_canonical(
      R"({"nodes":[{"id":"a","data":{"type":"A","node":{"template":{)"
      R"("code":{"type":"code","value":"def f():\n\treturn \"\u00e9\/\"\n"},)"
      R"("nulled":{"value":null},"plain":"not an entry","deep":{"x":{"value":1}},)"
      R"("num":{"value":-0.5e-3},"obj":{"value":{"value":[true,{}]}}},"outputs":null}}},)"
      R"({"id":"b","data":{"type":"B","node":{"template":null,"outputs":[]}}},)"
      R"({"id":"c","data":{"type":"C","node":null}}],"edges":[]})");
  for (auto name : {"basic_prompting", "diamond", "hello", "prompt", "python", "slow"})
    expect_fields_as_canonical(test_support::slurp(
        std::string{GUESTFLOW_SOURCE_DIR "/examples/flows/"} + name + ".json"));
}

TEST(graph, a_graph_far_bigger_than_a_document_chunk_decodes_whole) {
  // 400 nodes in a chain, the first with a 3,000-entry template: its member array alone
  // (~96 KB) is bigger than any chunk of the document's pool, the document many chunks.
  std::string nodes, edges;
  for (int i = 0; i < 400; ++i) {
    std::string tpl;
    for (int f = 0; f < (i == 0 ? 3000 : 3); ++f)
      tpl +=
          (f ? ",\"f" : "\"f") + std::to_string(f) + R"(":{"value":)" + std::to_string(f) + "}";
    nodes += (i ? "," : "") + std::string{R"({"id":"n)"} + std::to_string(i) +
             R"(","data":{"type":"T","node":{"template":{)" + tpl + "}}}}";
    if (i)
      edges +=
          (i > 1 ? "," : "") + edge_json("n" + std::to_string(i - 1), "n" + std::to_string(i));
  }
  expect_fields_as_canonical(R"({"nodes":[)" + nodes + R"(],"edges":[)" + edges + "]}");
  auto g = decode<flow_graph>(R"({"nodes":[)" + nodes + R"(],"edges":[)" + edges + "]}");
  ASSERT_TRUE(g) << g.error().message;
  ASSERT_EQ(g->nodes.size(), 400u);
  EXPECT_EQ(g->nodes[0].template_values.size(), 3000u);
  EXPECT_EQ(g->nodes[0].template_values.at("f2999").text, "2999");
  EXPECT_EQ(ids_in_order(*g).back(), "n399");
}

TEST(graph, handles_may_be_objects_or_oe_encoded_strings) {
  auto g = sample_graph();
  ASSERT_EQ(g.edges.size(), 3u);
  EXPECT_EQ(g.edges[0].source_output, "message");
  EXPECT_EQ(g.edges[0].target_field, "text");
  EXPECT_EQ(g.edges[1].source_output, "prompt") << "decoded from the œ string";
  EXPECT_EQ(g.edges[1].target_field, "input_value");
  EXPECT_EQ(g.edges[2].source_output, "");
  EXPECT_EQ(g.edges[2].target_field, "");
}

TEST(graph, unparseable_handle_strings_leave_names_empty) {
  auto g = decode<flow_graph>(
      R"({"nodes":[{"id":"a","data":{"type":"A"}},{"id":"b","data":{"type":"B"}}],)"
      R"("edges":[{"source":"a","target":"b","data":{"sourceHandle":"{œnameœ:",)"
      R"("targetHandle":"[1,2]"}}]})");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->edges[0].source_output, "");
  EXPECT_EQ(g->edges[0].target_field, "");
}

TEST(graph, payload_keeps_everything_the_guest_needs) {
  auto g = sample_graph();
  auto payload = parse_raw_json(g.payload.text);
  ASSERT_TRUE(payload);
  EXPECT_EQ(payload->text, g.payload.text) << "payload is canonical";
  EXPECT_EQ(g.payload.text.rfind(R"({"nodes":[{"id":"ChatInput-1","type":"genericNode",)", 0),
            0u)
      << g.payload.text.substr(0, 80);
  EXPECT_NE(g.payload.text.find(R"("_type":"Component")"), std::string::npos);
  EXPECT_EQ(g.payload.text.find("viewport"), std::string::npos)
      << "only nodes and edges travel";
}

TEST(graph, unknown_extra_fields_are_ignored) {
  auto g = decode<flow_graph>(
      R"({"nodes":[{"id":"a","data":{"type":"A","extra":{"deep":[1]}},"position":{"x":1}}],)"
      R"("edges":[],"viewport":null,"is_component":false})");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->nodes.size(), 1u);
}

TEST(graph, canvas_notes_and_other_non_component_nodes_are_dropped) {
  // An exported flow file: the graph under "data", beside name and description; a note
  // has no data.type (the shape Langflow's starter projects carry).
  auto g = decode<flow_graph>(
      R"({"name":"Basic Prompting","description":"d","data":{"nodes":[)"
      R"({"id":"ChatInput-1","type":"genericNode","data":{"type":"ChatInput","node":{"template":{}}}},)"
      R"({"id":"note-a","type":"noteNode","data":{"id":"note-a","node":{"description":"# Hi",)"
      R"("display_name":""},"type":"note"}},)"
      R"({"id":"note-b","data":{"node":{"description":"no type, no template"}}},)"
      R"({"id":"ChatOutput-2","type":"genericNode","data":{"type":"ChatOutput","node":{"template":{}}}}],)"
      R"("edges":[{"source":"ChatInput-1","target":"ChatOutput-2"}],"viewport":{"x":0}}})");
  ASSERT_TRUE(g) << g.error().message;
  ASSERT_EQ(g->nodes.size(), 2u);
  EXPECT_EQ(g->nodes[0].id, "ChatInput-1");
  EXPECT_EQ(g->nodes[1].id, "ChatOutput-2");
  EXPECT_EQ(g->payload.text.find("note-"), std::string::npos) << "notes do not reach the guest";
}

TEST(graph, a_node_with_a_template_but_no_type_is_still_refused) {
  auto g = decode<flow_graph>(
      R"({"nodes":[{"id":"a","data":{"node":{"template":{}}}}],"edges":[]})");
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().message, "nodes[0].data.type: required");
}

TEST(graph, empty_graph_is_valid) {
  auto g = decode<flow_graph>(R"({"nodes":[],"edges":[]})");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_TRUE(topological_order(*g).empty());
}

TEST(graph, topological_order_breaks_ties_by_index) {
  // d -> a, c -> a, b standalone: ready set {b, c, d} taken in index order.
  auto g = chain({"a", "b", "c", "d"}, {{3, 0}, {2, 0}});
  ASSERT_TRUE(validate(g));
  EXPECT_EQ(ids_in_order(g), (std::vector<std::string>{"b", "c", "d", "a"}));
}

TEST(graph, topological_order_of_the_sample) {
  auto g = sample_graph();
  EXPECT_EQ(ids_in_order(g),
            (std::vector<std::string>{"ChatInput-1", "Prompt-2", "ChatOutput-3", "Note-4"}));
}

TEST(graph, topological_order_is_deterministic_on_a_diamond) {
  auto g = chain({"sink", "left", "right", "src"}, {{3, 1}, {3, 2}, {1, 0}, {2, 0}});
  ASSERT_TRUE(validate(g));
  auto first = topological_order(g);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(topological_order(g), first);
  EXPECT_EQ(ids_in_order(g), (std::vector<std::string>{"src", "left", "right", "sink"}));
}

TEST(graph, multi_edges_between_the_same_pair_are_allowed) {
  auto g = chain({"a", "b"}, {{0, 1}, {0, 1}});
  auto v = validate(g);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(ids_in_order(*v), (std::vector<std::string>{"a", "b"}));
}

TEST(graph, validate_refuses_edits_that_break_invariants) {
  auto g = sample_graph();
  g.edges.push_back(graph_edge{"ChatOutput-3", "ChatInput-1", "", ""});
  auto v = validate(g);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ec::bad_request);
  EXPECT_EQ(v.error().message,
            "edges: cycle: ChatInput-1 -> Prompt-2 -> ChatOutput-3 -> ChatInput-1");
  auto dup = chain({"a", "a"}, {});
  ASSERT_FALSE(validate(dup));
  EXPECT_EQ(validate(dup).error().message,
            R"(nodes[1].id: duplicate node id "a" (first at nodes[0]))");
}

/// A Langflow Loop flow: the body's result goes back into the Loop's `item` output (loop
/// target handle `{name: "item", …}`, an output with `allows_loop`), as lfx's
/// `LoopComponent` and `Edge` (`TargetHandle.from_loop_target_handle`) have it.
std::string loop_flow(bool allows_loop, const char* back_handle) {
  std::string loop_outputs = std::string{R"([{"name":"item","types":["Data"],"allows_loop":)"} +
                             (allows_loop ? "true" : "false") +
                             R"(},{"name":"done","types":["DataFrame"]}])";
  return std::string{R"({"nodes":[)"} +
         R"({"id":"in","data":{"type":"ChatInput","node":{"template":{}}}},)" +
         R"({"id":"loop","data":{"type":"LoopComponent","node":{"template":{},"outputs":)" +
         loop_outputs + R"(}}},)" +
         R"({"id":"body","data":{"type":"Body","node":{"template":{}}}},)" +
         R"({"id":"out","data":{"type":"ChatOutput","node":{"template":{}}}}],"edges":[)" +
         R"({"source":"in","target":"loop","data":{"sourceHandle":{"name":"message"},)"
         R"("targetHandle":{"fieldName":"data"}}},)" +
         R"({"source":"loop","target":"body","data":{"sourceHandle":{"name":"item"},)"
         R"("targetHandle":{"fieldName":"x"}}},)" +
         R"({"source":"body","target":"loop","data":{"sourceHandle":{"name":"r"},)"
         R"("targetHandle":)" +
         back_handle + R"(}},)" +
         R"({"source":"loop","target":"out","data":{"sourceHandle":{"name":"done"},)"
         R"("targetHandle":{"fieldName":"input_value"}}}]})";
}

TEST(graph, a_cycle_through_a_loop_output_is_accepted) {
  auto g = decode<flow_graph>(loop_flow(true, R"({"name":"item","output_types":["Data"]})"));
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->edges.at(2).target_field, "item");
  EXPECT_EQ(ids_in_order(*g), (std::vector<std::string>{"in", "loop", "body", "out"}));
  // Still accepted once rebuilt in code (the handle written back as a fieldName).
  auto v = validate(*g);
  ASSERT_TRUE(v) << v.error().message;
  // The old textual handle form (œ for quotes) names the output the same way.
  auto text =
      decode<flow_graph>(loop_flow(true, "\"{\xC5\x93name\xC5\x93:\xC5\x93item\xC5\x93}\""));
  ASSERT_TRUE(text) << text.error().message;
}

TEST(graph, other_cycles_through_a_loop_stay_refused) {
  // Into an input field of the Loop: an ordinary cycle.
  auto field = decode<flow_graph>(loop_flow(true, R"({"fieldName":"data"})"));
  ASSERT_FALSE(field);
  EXPECT_EQ(field.error().code, ec::bad_request);
  EXPECT_EQ(field.error().message, "edges: cycle: loop -> body -> loop");
  // Into an output that does not allow loops.
  auto closed = decode<flow_graph>(loop_flow(false, R"({"name":"item"})"));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().message, "edges: cycle: loop -> body -> loop");
  // Into an output the target does not have.
  auto unknown = decode<flow_graph>(loop_flow(true, R"({"name":"nope"})"));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "edges: cycle: loop -> body -> loop");
}

TEST(graph, validate_keeps_an_existing_payload) {
  auto g = sample_graph();
  auto v = validate(g);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->payload, g.payload);
}

} // namespace
} // namespace guestflow
