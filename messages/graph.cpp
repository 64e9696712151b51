#include "messages/graph.hpp"

#include "messages/json_codec.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>

namespace guestflow {

namespace {

/// Langflow stores some handles as JSON text with "œ" standing in for '"'.
std::string handle_from_text(std::string s, std::string_view name) {
  static const std::string oe = "\xC5\x93"; // U+0153 œ
  for (auto pos = s.find(oe); pos != std::string::npos; pos = s.find(oe, pos + 1))
    s.replace(pos, oe.size(), "\"");
  codec::document doc;
  decode_limits limits{s.size(), 32};
  if (codec::parse(s, limits, doc) || !doc.IsObject()) return {};
  for (auto& m : doc.GetObject())
    if (std::string_view{m.name.GetString(), m.name.GetStringLength()} == name)
      return m.value.IsString() ? std::string{m.value.GetString(), m.value.GetStringLength()}
                                : std::string{};
  return {};
}

std::string handle_name(const object_view& data, std::string_view key, std::string_view name) {
  auto h = data.find(key);
  if (h == nullptr) return {};
  if (h->IsString())
    return handle_from_text(std::string{h->GetString(), h->GetStringLength()}, name);
  object_view ho{*h, data.at(key)};
  return ho.str_or(name, "");
}

/// Canvas notes (`"type": "noteNode"`) and other nodes that are no component (no
/// `data.type` and no `data.node.template`) are part of real exports but not vertices:
/// Langflow's graph skips them, and so does this decoder.
bool is_vertex(const value& v) {
  if (!v.IsObject()) return true; // node_of reports the shape
  auto top = v.FindMember("type");
  if (top != v.MemberEnd() && top->value.IsString() &&
      std::string_view{top->value.GetString(), top->value.GetStringLength()} == "noteNode")
    return false;
  auto data = v.FindMember("data");
  if (data == v.MemberEnd() || !data->value.IsObject()) return true;
  auto& d = data->value;
  auto type = d.FindMember("type");
  if (type != d.MemberEnd() && !type->value.IsNull()) return true;
  auto node = d.FindMember("node");
  return node != d.MemberEnd() && node->value.IsObject() &&
         node->value.FindMember("template") != node->value.MemberEnd();
}

/// The node's fields and shape checks; its template values and outputs come from
/// `write_vertex`, which writes them anyway.
graph_node node_of(const value& v, const path& p) {
  object_view n{v, p};
  graph_node x;
  x.id = n.str("id");
  if (x.id.empty()) codec::raise(n.at("id"), "must not be empty");
  codec::no_nul(x.id, n.at("id"));
  object_view data{n.need("data"), n.at("data")};
  x.type = data.str("type");
  x.display_name = x.type;
  if (auto nd = data.find("node")) {
    object_view node{*nd, data.at("node")};
    if (auto dn = node.opt_str("display_name")) x.display_name = std::move(*dn);
    if (auto t = node.find("template")) codec::expect_object(*t, node.at("template"));
    if (auto outs = node.find("outputs")) codec::expect_array(*outs, node.at("outputs"));
  }
  return x;
}

/// Where `write_vertex` is inside a node: the levels that lead to what it keeps.
enum class vertex_level { node, data, inner, template_, entry, other };

/// Writes `v` (at `level` of a vertex checked by node_of) canonically into `w`, keeping in
/// `x` the text of `data.node.template.<field>.value` (null too) and of a non-null
/// `data.node.outputs` as written: the payload and the fields share one serialization.
void write_vertex(json_writer& w, const value& v, const path& p, vertex_level level,
                  graph_node& x, std::string_view field = {}) {
  if (level == vertex_level::other || !v.IsObject()) {
    w.canonical(v, p);
    return;
  }
  w.begin_object();
  for (auto& m : v.GetObject()) {
    std::string_view k{m.name.GetString(), m.name.GetStringLength()};
    w.document_key(k);
    auto at = p.field(k);
    auto begin = w.size() + 1; // after the ':'
    auto next = vertex_level::other;
    switch (level) {
    case vertex_level::node:
      if (k == "data") next = vertex_level::data;
      break;
    case vertex_level::data:
      if (k == "node") next = vertex_level::inner;
      break;
    case vertex_level::inner:
      if (k == "template") next = vertex_level::template_;
      break;
    case vertex_level::template_:
      next = vertex_level::entry;
      break;
    default:
      break;
    }
    write_vertex(w, m.value, at, next, x, level == vertex_level::template_ ? k : field);
    if ((level == vertex_level::entry && k == "value") ||
        (level == vertex_level::inner && k == "outputs" && !m.value.IsNull())) {
      auto text = w.since(begin);
      (level == vertex_level::entry ? x.template_values[std::string{field}] : x.outputs) =
          raw_json{std::string{text}};
    }
  }
  w.end_object();
}

graph_edge edge_of(const value& v, const path& p) {
  object_view e{v, p};
  graph_edge x;
  x.source = e.str("source");
  codec::no_nul(x.source, e.at("source"));
  x.target = e.str("target");
  codec::no_nul(x.target, e.at("target"));
  if (auto d = e.find("data")) {
    object_view data{*d, e.at("data")};
    x.source_output = handle_name(data, "sourceHandle", "name");
    // A target handle with `name` is Langflow's loop target handle (an edge back into one
    // of the target's outputs, e.g. a Loop's `item`); lfx takes its field from `name`.
    x.target_field = handle_name(data, "targetHandle", "name");
    if (x.target_field.empty()) x.target_field = handle_name(data, "targetHandle", "fieldName");
  }
  return x;
}

std::string payload_from_structs(const flow_graph& g) {
  json_writer w;
  w.begin_object().key("nodes").begin_array();
  for (auto& n : g.nodes) {
    w.begin_object()
        .field("id", n.id)
        .key("data")
        .begin_object()
        .field("type", n.type)
        .key("node")
        .begin_object()
        .field("display_name", n.display_name)
        .key("template")
        .begin_object();
    for (auto& [k, v] : n.template_values)
      w.key(k).begin_object().field("value", v).end_object();
    w.end_object().raw_field_if("outputs", n.outputs).end_object().end_object().end_object();
  }
  w.end_array().key("edges").begin_array();
  for (auto& e : g.edges) {
    w.begin_object()
        .field("source", e.source)
        .field("target", e.target)
        .key("data")
        .begin_object()
        .key("sourceHandle")
        .begin_object()
        .field("name", e.source_output)
        .end_object()
        .key("targetHandle")
        .begin_object()
        .field("fieldName", e.target_field)
        .end_object()
        .end_object()
        .end_object();
  }
  w.end_array().end_object();
  return w.take();
}

/// Whether JSON `text` holds `"allows_loop"` then `true` (whitespace allowed): nearly every
/// Langflow output says `"allows_loop": false`, and parsing every edge's target outputs
/// (twice per decode) only to find that out cost serve ~5% more CPU per 20-vertex run.
bool says_allows_loop(std::string_view text) {
  constexpr std::string_view key = "\"allows_loop\"";
  auto ws = [&](size_t i) {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
      ++i;
    return i;
  };
  for (auto at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
    auto i = ws(at + key.size());
    if (i < text.size() && text[i] == ':' && text.substr(ws(i + 1), 4) == "true") return true;
  }
  return false;
}

/// Whether `outputs` (a node's `data.node.outputs` JSON text) has an output named `name`
/// with `allows_loop: true` (lfx's Loop `item`).
bool allows_loop(const raw_json& outputs, std::string_view name) {
  if (outputs.text.empty() || name.empty() || !says_allows_loop(outputs.text)) return false;
  codec::document doc;
  decode_limits limits{outputs.text.size(), 256};
  if (codec::parse(outputs.text, limits, doc) || !doc.IsArray()) return false;
  for (auto& o : doc.GetArray()) {
    if (!o.IsObject()) continue;
    auto n = o.FindMember("name");
    auto loop = o.FindMember("allows_loop");
    if (n != o.MemberEnd() && n->value.IsString() && loop != o.MemberEnd() &&
        loop->value.IsBool() && loop->value.GetBool() &&
        std::string_view{n->value.GetString(), n->value.GetStringLength()} == name)
      return true;
  }
  return false;
}

/// Which edges are a Loop's feedback edge: into one of the target's own outputs that
/// allows loops. lfx builds these as cycle edges (`CycleEdge`) and does not wait on them,
/// so the order and the cycle check leave them out; every other cycle stays refused.
std::vector<bool> feedback_edges(const flow_graph& g) {
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    index.emplace(g.nodes[i].id, i);
  std::vector<bool> out(g.edges.size(), false);
  for (size_t i = 0; i < g.edges.size(); ++i) {
    auto t = index.find(g.edges[i].target);
    out[i] =
        t != index.end() && allows_loop(g.nodes[t->second].outputs, g.edges[i].target_field);
  }
  return out;
}

/// Kahn's algorithm, ready vertices taken smallest index first. Edges with unknown
/// endpoints and Loop feedback edges are ignored (validation reports the former first).
/// Returns a partial order when the graph has a cycle.
std::vector<size_t> kahn(const flow_graph& g) {
  auto n = g.nodes.size();
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < n; ++i)
    index.emplace(g.nodes[i].id, i);
  std::vector<std::vector<size_t>> out(n);
  std::vector<size_t> indegree(n, 0);
  auto feedback = feedback_edges(g);
  for (size_t k = 0; k < g.edges.size(); ++k) {
    if (feedback[k]) continue;
    auto& e = g.edges[k];
    auto s = index.find(e.source);
    auto t = index.find(e.target);
    if (s == index.end() || t == index.end()) continue;
    out[s->second].push_back(t->second);
    ++indegree[t->second];
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    auto i = ready.top();
    ready.pop();
    order.push_back(i);
    for (auto j : out[i])
      if (--indegree[j] == 0) ready.push(j);
  }
  return order;
}

/// One cycle among the vertices Kahn could not order, as "a -> b -> a", starting at its
/// lowest-index vertex so the message is deterministic.
std::string describe_cycle(const flow_graph& g, const std::vector<size_t>& order) {
  auto n = g.nodes.size();
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < n; ++i)
    index.emplace(g.nodes[i].id, i);
  std::vector<bool> remaining(n, true);
  for (auto i : order)
    remaining[i] = false;
  // Every remaining vertex has a remaining predecessor: walk backwards until one repeats.
  std::vector<size_t> pred(n, n);
  auto feedback = feedback_edges(g);
  for (size_t k = 0; k < g.edges.size(); ++k) {
    if (feedback[k]) continue;
    auto& e = g.edges[k];
    auto s = index.find(e.source);
    auto t = index.find(e.target);
    if (s == index.end() || t == index.end()) continue;
    if (remaining[s->second] && remaining[t->second] && pred[t->second] == n)
      pred[t->second] = s->second;
  }
  size_t start = 0;
  while (start < n && !remaining[start])
    ++start;
  if (start == n) return {};
  std::vector<size_t> seen_at(n, n);
  std::vector<size_t> walk;
  for (auto v = start; seen_at[v] == n; v = pred[v]) {
    seen_at[v] = walk.size();
    walk.push_back(v);
    if (pred[v] == n) return {};
  }
  auto v = pred[walk.back()];
  std::vector<size_t> cycle(walk.begin() + static_cast<std::ptrdiff_t>(seen_at[v]), walk.end());
  std::reverse(cycle.begin(), cycle.end()); // walked against the edges
  auto lowest = std::min_element(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), lowest, cycle.end());
  std::string out;
  for (auto i : cycle) {
    out += g.nodes[i].id;
    out += " -> ";
  }
  out += g.nodes[cycle.front()].id;
  return out;
}

/// The graph invariants; `prefix` locates nodes/edges in the document ("" or "data.").
std::optional<failure> check(const flow_graph& g, const std::string& prefix) {
  auto bad = [&](std::string msg) { return fail(ec::bad_request, prefix + msg); };
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto [it, fresh] = index.emplace(g.nodes[i].id, i);
    if (!fresh)
      return bad("nodes[" + std::to_string(i) + "].id: duplicate node id " +
                 quote_json(g.nodes[i].id) + " (first at nodes[" + std::to_string(it->second) +
                 "])");
  }
  for (size_t i = 0; i < g.edges.size(); ++i) {
    auto& e = g.edges[i];
    auto at = "edges[" + std::to_string(i) + "]";
    if (index.count(e.source) == 0)
      return bad(at + ".source: unknown node " + quote_json(e.source));
    if (index.count(e.target) == 0)
      return bad(at + ".target: unknown node " + quote_json(e.target));
    if (e.source == e.target) return bad(at + ": self-edge on node " + quote_json(e.source));
  }
  auto order = kahn(g);
  if (order.size() != g.nodes.size()) return bad("edges: cycle: " + describe_cycle(g, order));
  return std::nullopt;
}

} // namespace

namespace codec {

flow_graph flow_graph_of(const value& v, const path& p) {
  object_view root{v, p};
  std::optional<object_view> wrapped;
  if (root.raw("nodes") == nullptr && root.find("data") != nullptr)
    wrapped.emplace(*root.find("data"), root.at("data"));
  const object_view& g = wrapped ? *wrapped : root;
  auto& nodes = g.need("nodes");
  codec::expect_array(nodes, g.at("nodes"));
  auto& edges = g.need("edges");
  codec::expect_array(edges, g.at("edges"));
  flow_graph x;
  auto nodes_at = g.at("nodes");
  json_writer w;
  w.begin_object().key("nodes").begin_array();
  size_t i = 0;
  for (auto& n : nodes.GetArray()) {
    auto at = nodes_at.at(i++);
    if (!is_vertex(n)) continue;
    x.nodes.push_back(node_of(n, at));
    write_vertex(w, n, at, vertex_level::node, x.nodes.back());
  }
  w.end_array();
  auto edges_at = g.at("edges");
  i = 0;
  for (auto& e : edges.GetArray())
    x.edges.push_back(edge_of(e, edges_at.at(i++)));
  auto prefix = p.is_root() ? std::string{} : p.str() + ".";
  if (auto err = check(x, wrapped ? prefix + "data." : prefix))
    throw decode_error{std::move(err->message)};
  w.key("edges").canonical(edges, edges_at).end_object();
  x.payload = raw_json{w.take()};
  return x;
}

} // namespace codec

template<>
result<flow_graph> decode<flow_graph>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<flow_graph>(
      text, limits, [](const value& v, const path& p) -> result<flow_graph> {
        return codec::flow_graph_of(v, p);
      });
}

result<flow_graph> validate(flow_graph g) {
  return codec::guarded<flow_graph>([&]() -> result<flow_graph> {
    if (auto err = check(g, "")) return std::move(*err);
    if (g.payload.empty()) g.payload = raw_json{payload_from_structs(g)};
    return std::move(g);
  });
}

std::vector<size_t> topological_order(const flow_graph& g) {
  return kahn(g);
}

std::string encode(const flow_graph& g) {
  return g.payload.empty() ? payload_from_structs(g) : g.payload.text;
}

} // namespace guestflow
