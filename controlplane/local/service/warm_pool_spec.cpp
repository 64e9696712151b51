#include "controlplane/local/service/warm_pool_spec.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "controlplane/local/service/shapes.hpp"
#include "messages/image.hpp"

#include <algorithm>
#include <fstream>
#include <set>

namespace guestflow::local {
namespace {

failure refused(std::string_view source, std::string_view entry, const std::string& why) {
  return fail(ec::bad_request,
              std::string{source} + ": '" + std::string{entry} + "': " + why +
                  " (expected SHAPE[@IMAGE][#EGRESS][+ISOLATION]=N or =MIN..MAX[,…], e.g. "
                  "s-1vcpu-256mb=2)");
}

/// `none` (deny-all), `*` (allow all) or rules joined by `|`.
result<egress_policy> parse_pool_egress(std::string_view text) {
  auto t = lower(trim(text));
  if (t == "none") return egress_policy::deny_all();
  if (t.empty()) return fail(ec::bad_request, "egress: empty after '#'");
  return parse_egress(split(text, "|"), "egress");
}

std::string egress_text(const egress_policy& p) {
  if (p.mode == egress_policy::kind::allow_all) return "*";
  std::string out;
  for (const auto& r : to_strings(p))
    out += (out.empty() ? "" : "|") + r;
  return out;
}

} // namespace

std::string to_string(const pool_key& key) {
  auto out = key.shape + "@" + key.image;
  if (key.egress.mode != egress_policy::kind::deny_all) out += "#" + egress_text(key.egress);
  if (key.isolation != guest_isolation::namespaces)
    out += std::string{"+"} + local::to_string(key.isolation);
  return out;
}

result<warm_pool_spec> parse_warm_pool_spec(std::string_view text, std::string_view source) {
  auto whole = lower(trim(text));
  if (whole.empty() || whole == "0" || whole == "off" || whole == "none")
    return warm_pool_spec{};
  warm_pool_spec out;
  std::set<pool_key> seen;
  uint64_t total = 0;
  for (const auto& entry : split(text, ",")) {
    // The last '=': none in an egress rule, but the count follows it.
    auto eq = entry.rfind('=');
    if (eq == std::string::npos) return refused(source, entry, "no '=N'");
    auto key_text = std::string{trim(std::string_view{entry}.substr(0, eq))};
    auto count_text = std::string_view{entry}.substr(eq + 1);
    pool_key key;
    // The last '+': none in a shape, an image or an egress rule.
    auto plus = key_text.rfind('+');
    if (plus != std::string::npos) {
      auto name = lower(trim(std::string_view{key_text}.substr(plus + 1)));
      auto kind = isolation_from_string(name);
      if (!kind)
        return refused(source, entry,
                       "isolation '" + name + "' is none of namespaces and gvisor");
      key.isolation = *kind;
      key_text.resize(plus);
    }
    auto hash = key_text.find('#');
    if (hash != std::string::npos) {
      auto egress = parse_pool_egress(std::string_view{key_text}.substr(hash + 1));
      if (!egress) return refused(source, entry, egress.error().message);
      key.egress = std::move(*egress);
      key_text.resize(hash);
    }
    auto at = key_text.find('@');
    key.shape = std::string{trim(std::string_view{key_text}.substr(0, at))};
    key.image = at == std::string::npos
                    ? std::string{builtin_image}
                    : std::string{trim(std::string_view{key_text}.substr(at + 1))};
    if (key.shape.empty()) return refused(source, entry, "no shape");
    if (auto s = resolve_shape(key.shape); !s) return refused(source, entry, s.error().message);
    if (auto why = image_name_problem(key.image); !why.empty())
      return refused(source, entry, "image: " + why);
    // N, or MIN..MAX.
    auto dots = count_text.find("..");
    auto floor_text = count_text.substr(0, dots);
    auto cap_text = dots == std::string_view::npos ? floor_text : count_text.substr(dots + 2);
    auto floor = parse_uint_as<uint32_t>(floor_text, 0, max_warm_pool_guests);
    if (!floor)
      return refused(source, entry,
                     uint_refusal(dots == std::string_view::npos ? "N" : "MIN", floor_text, 0,
                                  max_warm_pool_guests));
    auto cap = parse_uint_as<uint32_t>(cap_text, 0, max_warm_pool_guests);
    if (!cap)
      return refused(source, entry, uint_refusal("MAX", cap_text, 0, max_warm_pool_guests));
    if (*floor > *cap)
      return refused(source, entry,
                     "MIN " + std::to_string(*floor) + " is above MAX " + std::to_string(*cap));
    if (!seen.insert(key).second)
      return refused(source, entry, "pool " + to_string(key) + " is named twice");
    total += *cap;
    if (total > max_warm_pool_guests)
      return fail(ec::bad_request, std::string{source} + ": " + std::to_string(total) +
                                       " guests in all; at most " +
                                       std::to_string(max_warm_pool_guests) + " are kept warm");
    if (*cap > 0) out.push_back({std::move(key), *floor, *cap});
  }
  return out;
}

std::string to_string(const warm_pool_spec& spec) {
  if (spec.empty()) return "off";
  std::string out;
  for (const auto& t : spec) {
    out += (out.empty() ? "" : ",") + to_string(t.key) + "=" + std::to_string(t.count);
    if (t.cap != t.count) out += ".." + std::to_string(t.cap);
  }
  return out;
}

warm_pool_spec default_host_warm_pool(std::optional<uint64_t> mem_available_mib) {
  if (!mem_available_mib || *mem_available_mib < 2048) return {};
  bool big = *mem_available_mib >= 4096;
  pool_key key;
  key.shape = "s-1vcpu-256mb";
  key.image = std::string{builtin_image};
  return {{std::move(key), big ? 2u : 1u, big ? 8u : 4u}};
}

std::optional<pool_target> default_executor_pool(pool_key key,
                                                 std::optional<uint64_t> mem_available_mib) {
  auto shp = find_shape(key.shape);
  if (!shp || !mem_available_mib || *mem_available_mib < 2048 || shp->mem_mib == 0)
    return std::nullopt;
  auto n = std::min<uint64_t>(*mem_available_mib / 2 / shp->mem_mib, 8);
  if (n == 0) return std::nullopt;
  return pool_target{std::move(key), 1, static_cast<uint32_t>(n)};
}

std::optional<uint64_t> mem_available_mib() {
  std::ifstream in{"/proc/meminfo"};
  for (std::string line; std::getline(in, line);) {
    constexpr std::string_view label = "MemAvailable:";
    if (line.rfind(label, 0) != 0) continue;
    auto rest = trim(std::string_view{line}.substr(label.size()));
    auto kb = parse_uint(rest.substr(0, rest.find(' ')));
    if (!kb) return std::nullopt;
    return *kb / 1024;
  }
  return std::nullopt;
}

} // namespace guestflow::local
