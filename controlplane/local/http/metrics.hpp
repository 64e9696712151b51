#pragma once

#include "controlplane/local/service/capacity.hpp"
#include "controlplane/local/service/warm_pool_spec.hpp"

#include <cstdint>
#include <string>
#include <vector>

/// `GET /metrics`: the node's capacity and its warm pools in the Prometheus text format
/// (version 0.0.4), for the Grafana dashboard's pool and fleet-node panels
/// (docs/grafana/). The same numbers as `GET /v1/capacity` and `GET /v1/pool`, read the
/// same way: nothing more is computed or waited on for a scrape. A header alone: the
/// routes' sources are linked on their own too (tests/fuzz).
namespace guestflow::local {

namespace metrics_detail {

/// A label value as the text format spells it: backslash, double quote and newline escaped.
/// Node, shape and image names are validated and never hold them; the escape keeps a
/// scrape parseable whatever a future name allows.
inline std::string label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

inline void family(std::string& out, const char* name, const char* help,
                   const char* type = "gauge") {
  out += std::string{"# HELP "} + name + ' ' + help + "\n# TYPE " + name + ' ' + type + '\n';
}

inline void sample(std::string& out, const char* name, const std::string& labels,
                   uint64_t value) {
  out += std::string{name} + '{' + labels + "} " + std::to_string(value) + '\n';
}

/// Milliseconds as seconds with three decimals (the text format's unit of time).
inline void sample_ms(std::string& out, const char* name, const std::string& labels,
                      uint64_t ms) {
  auto frac = std::to_string(1000 + ms % 1000).substr(1);
  out +=
      std::string{name} + '{' + labels + "} " + std::to_string(ms / 1000) + '.' + frac + '\n';
}

} // namespace metrics_detail

/// Every sample carries `node` (the capacity's node name), so that one Prometheus scraping
/// a fleet's control planes tells their series apart by more than `instance`:
/// - `guestflow_pool_guests{node,shape,image[,egress][,preload][,isolation],state=…}`
///   (state "ready"|"creating"; egress when not deny-all, preload when not empty, isolation
///   when not namespaces),
///   `guestflow_pool_target{…}` (what demand sizes the pool to now), the counters
///   `guestflow_pool_takes_total{…}` (creates served), `guestflow_pool_misses_total{…}`
///   (creates of the pool's key that found it empty), `guestflow_pool_evicted_total{…}`
///   (guests lent to creates that needed room), and `guestflow_pool_fill_seconds{…}` (a
///   summary: `_sum` and `_count` of its guests' build times); no samples without a pool;
/// - `guestflow_node_ready` (1 while it takes creates; 0 fenced or draining),
///   `guestflow_node_draining`, `guestflow_node_guests`, `guestflow_node_max_guests`,
///   `guestflow_node_memory_committed_mib`, `guestflow_node_memory_budget_mib`.
inline std::string encode_metrics(const capacity_status& node,
                                  const std::vector<pool_status>& pools) {
  using namespace metrics_detail;
  const std::string on_node = "node=\"" + label_value(node.node) + '"';
  auto pool_labels = [&](const pool_status& p) {
    // egress and preload only when not the default (deny-all, nothing): the sandbox
    // pool's series stay what dashboards and scrapes already know.
    auto out = on_node + ",shape=\"" + label_value(p.key.shape) + "\",image=\"" +
               label_value(p.key.image) + '"';
    if (p.key.egress.mode != egress_policy::kind::deny_all)
      out += ",egress=\"" + label_value(fingerprint(p.key.egress)) + '"';
    if (!p.key.preload.empty()) out += ",preload=\"" + label_value(p.key.preload) + '"';
    if (p.key.isolation != guest_isolation::namespaces)
      out += ",isolation=\"" + std::string{to_string(p.key.isolation)} + '"';
    return out;
  };
  std::string out;
  family(out, "guestflow_pool_guests",
         "Warm-pool guests per shape and image: ready (built, never used, waiting for a "
         "create) or creating (being built now).");
  for (const auto& p : pools) {
    sample(out, "guestflow_pool_guests", pool_labels(p) + ",state=\"ready\"", p.ready);
    sample(out, "guestflow_pool_guests", pool_labels(p) + ",state=\"creating\"", p.creating);
  }
  family(out, "guestflow_pool_target",
         "Guests a warm pool aims to hold now: its demand (recent takes and misses) within "
         "its floor and cap (0: a pool being emptied).");
  for (const auto& p : pools)
    sample(out, "guestflow_pool_target", pool_labels(p), p.target);
  family(out, "guestflow_pool_takes_total", "Creates a warm pool served.", "counter");
  for (const auto& p : pools)
    sample(out, "guestflow_pool_takes_total", pool_labels(p), p.takes);
  family(out, "guestflow_pool_misses_total",
         "Creates of a warm pool's key that found it empty and built their own guest.",
         "counter");
  for (const auto& p : pools)
    sample(out, "guestflow_pool_misses_total", pool_labels(p), p.misses);
  family(out, "guestflow_pool_evicted_total",
         "Warm-pool guests deleted (or builds dropped) to make room for a create.", "counter");
  for (const auto& p : pools)
    sample(out, "guestflow_pool_evicted_total", pool_labels(p), p.evicted);
  family(out, "guestflow_pool_fill_seconds",
         "Time to build a warm-pool guest (its python waiter started and its preload "
         "imported).",
         "summary");
  for (const auto& p : pools) {
    sample_ms(out, "guestflow_pool_fill_seconds_sum", pool_labels(p), p.fill_ms);
    sample(out, "guestflow_pool_fill_seconds_count", pool_labels(p), p.fills);
  }
  // ready in /v1/capacity is "not fenced"; a draining node refuses creates as well, so the
  // gauge a dashboard counts ready nodes by is 0 for either.
  family(out, "guestflow_node_ready",
         "1 while the node takes creates; 0 when it is fenced (its fleet lease lost or not "
         "yet granted) or draining.");
  sample(out, "guestflow_node_ready", on_node, node.ready && !node.draining ? 1 : 0);
  family(out, "guestflow_node_draining",
         "1 while the node drains (creates refused, its guests run on).");
  sample(out, "guestflow_node_draining", on_node, node.draining ? 1 : 0);
  family(out, "guestflow_node_guests",
         "Guests on the node that are not destroyed or failed (creating ones and the warm "
         "pool's included).");
  sample(out, "guestflow_node_guests", on_node, node.guests);
  family(out, "guestflow_node_max_guests", "The node's guest cap (--max-guests).");
  sample(out, "guestflow_node_max_guests", on_node, node.max_guests);
  family(out, "guestflow_node_memory_committed_mib",
         "Memory the node's guests and warm-pool targets commit, in MiB.");
  sample(out, "guestflow_node_memory_committed_mib", on_node, node.memory_committed_mib);
  family(out, "guestflow_node_memory_budget_mib",
         "Memory the node lets its guests commit (--memory-budget-mb), in MiB.");
  sample(out, "guestflow_node_memory_budget_mib", on_node, node.memory_budget_mib);
  return out;
}

} // namespace guestflow::local
