#pragma once

#include "messages/json.hpp"

#include <map>
#include <string>
#include <vector>

namespace guestflow {

/// One vertex of a Langflow graph (`Graph.dump()` node).
struct graph_node {
  std::string id;                                  ///< node `id`
  std::string type;                                ///< `data.type` ("ChatInput", "Prompt", …)
  std::string display_name;                        ///< `data.node.display_name`, else `type`
  std::map<std::string, raw_json> template_values; ///< `data.node.template.<field>.value`
  raw_json outputs; ///< `data.node.outputs` (array), empty when absent
  friend bool operator==(const graph_node& a, const graph_node& b) {
    return a.id == b.id && a.type == b.type && a.display_name == b.display_name &&
           a.template_values == b.template_values && a.outputs == b.outputs;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, graph_node& x) {
  return f(x.id, x.type, x.display_name, x.template_values, x.outputs);
}

/// One edge: `source`, `target`, `data.sourceHandle.name`, `data.targetHandle.fieldName`.
struct graph_edge {
  std::string source;
  std::string target;
  std::string source_output; ///< sourceHandle.name (may be empty)
  std::string
      target_field; ///< targetHandle.fieldName, or a loop handle's `name` (may be empty)
  friend bool operator==(const graph_edge& a, const graph_edge& b) {
    return a.source == b.source && a.target == b.target && a.source_output == b.source_output &&
           a.target_field == b.target_field;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, graph_edge& x) {
  return f(x.source, x.target, x.source_output, x.target_field);
}

/// A validated flow graph. Accepts every shape Langflow writes: an exported flow file or
/// `Graph.dump()` (`{data:{nodes,edges}, name, …}`) and a bare `{nodes,edges}`. Canvas notes
/// and other nodes that are no component are dropped (from `nodes` and the payload). The
/// decoder checks unique node ids, existing edge endpoints, no self-edge and no cycle (a
/// cycle is reported as `bad_request` naming its vertices "a -> b -> a"). The one cycle
/// Langflow runs is allowed: a Loop's feedback edge, into one of the target's own outputs
/// marked `allows_loop` (the Loop's `item`); it is left out of `topological_order`.
struct flow_graph {
  std::vector<graph_node> nodes;
  std::vector<graph_edge> edges;
  raw_json payload; ///< canonical `{"nodes":…,"edges":…}` exactly as received, for the guest
  friend bool operator==(const flow_graph& a, const flow_graph& b) {
    return a.nodes == b.nodes && a.edges == b.edges && a.payload == b.payload;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, flow_graph& x) {
  return f(x.nodes, x.edges, x.payload);
}

template<>
result<flow_graph> decode<flow_graph>(std::string_view, const decode_limits&);

/// Re-checks the invariants above on an already-built graph (used after edits in code).
result<flow_graph> validate(flow_graph g);

/// Node indices in a deterministic topological order (ties by position in `nodes`).
/// Precondition: `g` passed validation.
std::vector<size_t> topological_order(const flow_graph& g);

/// The canonical payload `{"nodes":[…],"edges":[…]}` (== `g.payload`).
std::string encode(const flow_graph& g);

} // namespace guestflow
