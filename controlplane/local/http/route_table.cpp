#include "controlplane/local/http/route_table.hpp"

#include "controlplane/local/http/fault_injection.hpp"

#include <algorithm>

namespace guestflow::local {
namespace {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 1; // path starts with '/'
  while (i <= path.size()) {
    auto j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

constexpr std::string_view id_segment = "{id}";

} // namespace

void route_table::add(std::string_view method, std::string_view pattern, endpoint name,
                      handler h) {
  std::vector<std::string> segments;
  for (auto s : split_path(pattern))
    segments.emplace_back(s);
  auto same = [&](const path_pattern& p) { return p.segments == segments; };
  auto it = std::find_if(patterns_.begin(), patterns_.end(), same);
  if (it == patterns_.end()) it = patterns_.insert(patterns_.end(), {std::move(segments), {}});
  // Every handler consults the installed fault injector (none outside soaks and tests).
  it->rows.push_back({std::string{method}, name, with_faults(name, std::move(h))});
}

route route_table::match(std::string_view method, std::string_view path) const {
  auto segs = split_path(path);
  if (!segs.empty() && segs.back().empty()) segs.pop_back(); // tolerate one trailing slash
  for (const auto& p : patterns_) {
    if (p.segments.size() != segs.size()) continue;
    route r;
    bool same = true;
    for (size_t i = 0; i < segs.size() && same; ++i) {
      if (p.segments[i] == id_segment) {
        same = !segs[i].empty();
        r.id = std::string{segs[i]};
      } else {
        same = p.segments[i] == segs[i];
      }
    }
    if (!same) continue;
    for (const auto& row : p.rows) {
      if (!r.allow.empty()) r.allow += ", ";
      r.allow += row.method;
      if (row.method == method) {
        r.kind = route::outcome::found;
        r.ep = row.name;
        r.target = &row.h;
        return r;
      }
    }
    r.kind = route::outcome::method_not_allowed;
    return r;
  }
  return {};
}

} // namespace guestflow::local
