#include "controlplane/local/http/fault_plan.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace guestflow::local {
namespace {

constexpr std::array<std::string_view, fault_op_count> op_names = {
    "create", "exec", "files", "delete", "pause", "resume", "list", "get", "other"};
constexpr std::array<std::string_view, fault_kind_count> kind_names = {"5xx", "429", "drop",
                                                                       "timeout", "lost"};
constexpr size_t any_index = fault_op_count;
constexpr uint32_t max_delay_ms = 60'000;
constexpr uint64_t max_hold_ms = 3'600'000;

/// splitmix64's finalizer: a well-mixed 64-bit value from any input (no state to share).
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

/// The `salt`-th draw of call `n` of `op`, uniform in [0, 2^64).
uint64_t draw(uint64_t seed, fault_op op, uint64_t n, uint64_t salt) {
  return mix(mix(mix(seed) ^ (static_cast<uint64_t>(op) << 56 | salt << 48)) ^ n);
}

double unit_interval(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// A share: a decimal in [0, 1] ("0.1", "1", ".25").
std::optional<double> parse_share(std::string_view text) {
  std::string s{trim(text)};
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !(v >= 0.0 && v <= 1.0)) return std::nullopt;
  return v;
}

/// `N`, `Nms` or `Ns` in milliseconds; `default_unit_s` when the unit is absent.
std::optional<uint64_t> parse_duration(std::string_view text, bool default_unit_s,
                                       uint64_t max_ms) {
  text = trim(text);
  bool seconds = default_unit_s;
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    text.remove_suffix(2);
    seconds = false;
  } else if (text.size() > 1 && text.back() == 's') {
    text.remove_suffix(1);
    seconds = true;
  }
  auto n = parse_uint(text, 0, max_ms);
  if (!n) return std::nullopt;
  auto ms = seconds ? *n * 1000 : *n;
  if (ms > max_ms) return std::nullopt;
  return ms;
}

/// Whether a duration is written in seconds (`Ns`; `Nms` and a bare `N` are not).
bool in_seconds(std::string_view text) {
  text = trim(text);
  return !text.empty() && text.back() == 's' &&
         (text.size() < 2 || text.substr(text.size() - 2) != "ms");
}

std::string format_share(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace

std::string_view to_string(fault_op op) {
  return op_names[static_cast<size_t>(op)];
}

std::string_view to_string(fault_kind kind) {
  return kind_names[static_cast<size_t>(kind)];
}

result<fault_plan> fault_plan::parse(std::string_view spec, std::string_view source) {
  fault_plan plan;
  auto refuse = [&](const std::string& item, const std::string& why) {
    return fail(ec::bad_request, std::string{source} + ": '" + item + "': " + why);
  };
  auto whole = lower(trim(spec));
  if (whole.empty() || whole == "off" || whole == "none") return plan;
  bool seen_seed = false, seen_hold = false;
  for (const auto& item : split(whole, ",")) {
    auto eq = item.find('=');
    if (eq == std::string::npos)
      return refuse(item, "expected OP:KIND=SHARE, OP:delay=LO-HI, seed=N or hold=D");
    auto key = std::string{trim(std::string_view{item}.substr(0, eq))};
    auto value = std::string_view{item}.substr(eq + 1);
    auto colon = key.find(':');
    if (colon == std::string::npos) {
      if (key == "seed") {
        auto n = parse_uint(value);
        if (!n) return refuse(item, "seed: expected an unsigned integer");
        if (std::exchange(seen_seed, true)) return refuse(item, "seed given twice");
        plan.seed_ = *n;
      } else if (key == "hold") {
        auto ms = parse_duration(value, true, max_hold_ms);
        if (!ms || *ms == 0) return refuse(item, "hold: expected a duration of 1ms to 3600s");
        if (std::exchange(seen_hold, true)) return refuse(item, "hold given twice");
        plan.hold_ = std::chrono::milliseconds{*ms};
      } else {
        return refuse(item, "unknown setting '" + key + "'; use seed, hold or OP:KIND");
      }
      continue;
    }
    auto op_name = std::string_view{key}.substr(0, colon);
    auto kind_name = trim(std::string_view{key}.substr(colon + 1));
    size_t op = any_index;
    if (trim(op_name) != "any") {
      op = 0;
      while (op < fault_op_count - 1 && op_names[op] != trim(op_name))
        ++op;
      if (op == fault_op_count - 1)
        return refuse(item, "unknown operation '" + std::string{trim(op_name)} +
                                "'; use create, exec, files, delete, pause, resume, list, "
                                "get or any");
    }
    auto& rules = plan.rules_[op];
    if (kind_name == "delay") {
      auto at = value.find('@');
      auto range = value.substr(0, at);
      double share = 1.0;
      if (at != std::string_view::npos) {
        auto s = parse_share(value.substr(at + 1));
        if (!s) return refuse(item, "delay: the share after '@' must be a number in [0, 1]");
        share = *s;
      }
      auto dash = range.find('-');
      auto hi_text = dash == std::string_view::npos ? range : range.substr(dash + 1);
      auto hi = parse_duration(hi_text, false, max_delay_ms);
      auto lo = dash == std::string_view::npos
                    ? hi
                    : parse_duration(range.substr(0, dash), in_seconds(hi_text), max_delay_ms);
      if (!lo || !hi)
        return refuse(item, "delay: expected LO-HI or N, each Nms or Ns, at most 60s");
      if (*lo > *hi) return refuse(item, "delay: LO is greater than HI");
      if (rules.delay_share) return refuse(item, "delay given twice for this operation");
      rules.delay_share = share;
      rules.delay_lo_ms = static_cast<uint32_t>(*lo);
      rules.delay_hi_ms = static_cast<uint32_t>(*hi);
      continue;
    }
    size_t kind = 0;
    while (kind < fault_kind_count && kind_names[kind] != kind_name)
      ++kind;
    if (kind == fault_kind_count)
      return refuse(item, "unknown fault '" + std::string{kind_name} +
                              "'; use 5xx, 429, drop, timeout, lost or delay");
    auto share = parse_share(value);
    if (!share) return refuse(item, "the share must be a number in [0, 1]");
    if (rules.share[kind]) return refuse(item, "given twice");
    rules.share[kind] = *share;
  }
  for (size_t op = 0; op < fault_op_count; ++op) {
    double sum = 0;
    for (size_t k = 0; k < fault_kind_count; ++k)
      sum += plan.share(static_cast<fault_op>(op), static_cast<fault_kind>(k));
    if (sum > 1.0 + 1e-9)
      return fail(ec::bad_request, std::string{source} + ": the shares of " +
                                       std::string{op_names[op]} + " add up to " +
                                       format_share(sum) + ", more than 1");
  }
  return plan;
}

double fault_plan::share(fault_op op, fault_kind kind) const {
  auto k = static_cast<size_t>(kind);
  const auto& own = rules_[static_cast<size_t>(op)].share[k];
  return own ? *own : rules_[any_index].share[k].value_or(0.0);
}

const fault_plan::op_rules& fault_plan::delay_rules(fault_op op) const {
  const auto& own = rules_[static_cast<size_t>(op)];
  return own.delay_share ? own : rules_[any_index];
}

fault_decision fault_plan::decide(fault_op op, uint64_t n) const {
  fault_decision d;
  double u = unit_interval(draw(seed_, op, n, 0));
  double edge = 0;
  for (size_t k = 0; k < fault_kind_count; ++k) {
    edge += share(op, static_cast<fault_kind>(k));
    if (u < edge) {
      d.kind = static_cast<fault_kind>(k);
      break;
    }
  }
  const auto& delay = delay_rules(op);
  if (delay.delay_share && unit_interval(draw(seed_, op, n, 1)) < *delay.delay_share) {
    uint64_t span = uint64_t{delay.delay_hi_ms} - delay.delay_lo_ms + 1;
    d.delay = std::chrono::milliseconds{delay.delay_lo_ms + draw(seed_, op, n, 2) % span};
  }
  return d;
}

bool fault_plan::empty() const noexcept {
  for (const auto& r : rules_) {
    if (r.delay_share && *r.delay_share > 0 && r.delay_hi_ms > 0) return false;
    for (const auto& s : r.share)
      if (s && *s > 0) return false;
  }
  return true;
}

std::string fault_plan::to_string() const {
  if (empty()) return "off";
  std::string out =
      "seed=" + std::to_string(seed_) + ",hold=" + std::to_string(hold_.count()) + "ms";
  for (size_t op = 0; op <= fault_op_count; ++op) {
    if (op == fault_op_count - 1) continue; // `other` is only ever `any`'s
    const auto& r = rules_[op];
    std::string name = op == any_index ? "any" : std::string{op_names[op]};
    for (size_t k = 0; k < fault_kind_count; ++k)
      if (r.share[k])
        out += "," + name + ":" + std::string{kind_names[k]} + "=" + format_share(*r.share[k]);
    if (r.delay_share)
      out += "," + name + ":delay=" + std::to_string(r.delay_lo_ms) + "-" +
             std::to_string(r.delay_hi_ms) + "ms@" + format_share(*r.delay_share);
  }
  return out;
}

} // namespace guestflow::local
