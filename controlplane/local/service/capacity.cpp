#include "controlplane/local/service/capacity.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "messages/json.hpp"

#include <fstream>
#include <unistd.h>

namespace guestflow::local {

std::string encode_capacity(const capacity_status& s, const std::string& url) {
  auto flag = [](bool b) { return b ? "true" : "false"; };
  std::string out = R"({"node":)" + quote_json(s.node) + R"(,"memory_budget_mib":)" +
                    std::to_string(s.memory_budget_mib) + R"(,"memory_committed_mib":)" +
                    std::to_string(s.memory_committed_mib) + R"(,"guests":)" +
                    std::to_string(s.guests) + R"(,"max_guests":)" +
                    std::to_string(s.max_guests) + R"(,"draining":)" + flag(s.draining) +
                    R"(,"ready":)" + flag(s.ready);
  if (!url.empty()) out += R"(,"url":)" + quote_json(url);
  return out + "}";
}

std::optional<uint64_t> default_memory_budget_mib() {
  std::ifstream in{"/proc/meminfo"};
  for (std::string line; std::getline(in, line);) {
    constexpr std::string_view label = "MemTotal:";
    if (line.rfind(label, 0) != 0) continue;
    auto rest = trim(std::string_view{line}.substr(label.size()));
    auto kib = parse_uint(rest.substr(0, rest.find(' ')));
    if (!kib) return std::nullopt;
    return *kib / 1024 * 8 / 10;
  }
  return std::nullopt;
}

std::string host_node_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !parse_node_name(name, "hostname"))
    return "localhost";
  return name;
}

result<std::string> parse_node_name(std::string_view name, std::string_view flag) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  bool ok = !name.empty() && name.size() <= 63 && alnum(name.front());
  for (char c : name)
    ok = ok && (alnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok)
    return fail(ec::bad_request, std::string{flag} +
                                     ": expected 1 to 63 of A-Z a-z 0-9 . _ - starting with a "
                                     "letter or digit, got '" +
                                     std::string{name} + "'");
  return std::string{name};
}

capacity_gate::capacity_gate(std::string node, capacity_limits limits)
    : node_(std::move(node))
    , limits_(limits) {}

std::optional<failure> capacity_gate::admit(const capacity_usage& now, const shape& s) const {
  auto refuse = [&](const std::string& why) {
    return failure{ec::capacity, "node " + node_ + " " + why};
  };
  if (!ready_)
    return refuse("is fenced: it cannot renew its fleet lease (etcd unreachable), so it "
                  "takes no new sandboxes until it registers again");
  if (draining_)
    return refuse("is draining: it takes no new sandboxes (DELETE /v1/drain ends the drain)");
  if (now.guests >= limits_.max_guests)
    return refuse("is full: " + std::to_string(now.guests) + " of " +
                  std::to_string(limits_.max_guests) + " sandboxes (--max-guests)");
  if (now.memory_mib + s.mem_mib > limits_.memory_budget_mib)
    return refuse("is full: " + s.id + " needs " + std::to_string(s.mem_mib) + " MiB and " +
                  std::to_string(now.memory_mib) + " of " +
                  std::to_string(limits_.memory_budget_mib) +
                  " MiB are committed (--memory-budget-mb)");
  return std::nullopt;
}

capacity_status capacity_gate::status(const capacity_usage& now) const {
  capacity_status s;
  s.node = node_;
  s.memory_budget_mib = limits_.memory_budget_mib;
  s.memory_committed_mib = now.memory_mib;
  s.guests = now.guests;
  s.max_guests = limits_.max_guests;
  s.draining = draining_;
  s.ready = ready_;
  return s;
}

bool capacity_gate::set_draining(bool on) {
  bool changed_now = draining_.exchange(on) != on;
  if (changed_now) changed();
  return changed_now;
}

bool capacity_gate::set_ready(bool on) {
  bool changed_now = ready_.exchange(on) != on;
  if (changed_now) changed();
  return changed_now;
}

void capacity_gate::changed() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    ++version_;
  }
  cv_.notify_all();
}

uint64_t capacity_gate::version() const {
  std::lock_guard<std::mutex> lock{mu_};
  return version_;
}

uint64_t capacity_gate::wait_change(uint64_t seen,
                                    std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock{mu_};
  auto wakes = wakes_;
  cv_.wait_until(lock, until, [&] { return version_ != seen || wakes_ != wakes; });
  return version_;
}

void capacity_gate::wake() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    ++wakes_;
  }
  cv_.notify_all();
}

} // namespace guestflow::local
