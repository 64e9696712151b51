#include "controlplane/local/service/warm_pool_spec.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "controlplane/local/service/shapes.hpp"
#include "messages/image.hpp"

#include <fstream>
#include <set>

namespace guestflow::local {
namespace {

failure refused(std::string_view source, std::string_view entry, const std::string& why) {
  return fail(ec::bad_request, std::string{source} + ": '" + std::string{entry} + "': " + why +
                                   " (expected SHAPE[@IMAGE]=N[,…], e.g. s-1vcpu-256mb=2)");
}

} // namespace

result<warm_pool_spec> parse_warm_pool_spec(std::string_view text, std::string_view source) {
  auto whole = lower(trim(text));
  if (whole.empty() || whole == "0" || whole == "off" || whole == "none")
    return warm_pool_spec{};
  warm_pool_spec out;
  std::set<pool_key> seen;
  uint64_t total = 0;
  for (const auto& entry : split(text, ",")) {
    auto eq = entry.find('=');
    if (eq == std::string::npos) return refused(source, entry, "no '=N'");
    auto key_text = std::string{trim(std::string_view{entry}.substr(0, eq))};
    auto count_text = std::string_view{entry}.substr(eq + 1);
    pool_key key;
    auto at = key_text.find('@');
    key.shape = std::string{trim(std::string_view{key_text}.substr(0, at))};
    key.image = at == std::string::npos
                    ? std::string{builtin_image}
                    : std::string{trim(std::string_view{key_text}.substr(at + 1))};
    if (key.shape.empty()) return refused(source, entry, "no shape");
    if (auto s = resolve_shape(key.shape); !s) return refused(source, entry, s.error().message);
    if (auto why = image_name_problem(key.image); !why.empty())
      return refused(source, entry, "image: " + why);
    auto count = parse_uint_as<uint32_t>(count_text, 0, max_warm_pool_guests);
    if (!count)
      return refused(source, entry, uint_refusal("N", count_text, 0, max_warm_pool_guests));
    if (!seen.insert(key).second)
      return refused(source, entry, "pool " + key.shape + "@" + key.image + " is named twice");
    total += *count;
    if (total > max_warm_pool_guests)
      return fail(ec::bad_request, std::string{source} + ": " + std::to_string(total) +
                                       " guests in all; at most " +
                                       std::to_string(max_warm_pool_guests) + " are kept warm");
    if (*count > 0) out.push_back({std::move(key), *count});
  }
  return out;
}

std::string to_string(const warm_pool_spec& spec) {
  if (spec.empty()) return "off";
  std::string out;
  for (const auto& t : spec)
    out += (out.empty() ? "" : ",") + t.key.shape + "@" + t.key.image + "=" +
           std::to_string(t.count);
  return out;
}

warm_pool_spec default_host_warm_pool(std::optional<uint64_t> mem_available_mib) {
  if (!mem_available_mib || *mem_available_mib < 2048) return {};
  uint32_t n = *mem_available_mib >= 4096 ? 2 : 1;
  return {{{"s-1vcpu-256mb", std::string{builtin_image}}, n}};
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
