#include "actors/guest_names.hpp"

#include "common/text.hpp"

namespace guestflow::names {
namespace {

constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";

/// FNV-1a: stable across builds and platforms (std::hash is not).
uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool valid_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

} // namespace

std::string owner_id(std::string_view env_owner, std::string_view host_name,
                     std::string_view state_dir) {
  std::string out;
  for (char c : lower(env_owner))
    if (valid_char(c) && out.size() < 6) out.push_back(c);
  if (!env_owner.empty() && out.size() == 6) return out;
  // A short or odd GUESTFLOW_OWNER still yields 6 valid chars, derived from what was given.
  auto h = env_owner.empty() ? fnv1a(state_dir, fnv1a(host_name)) : fnv1a(env_owner);
  out.clear();
  for (int i = 0; i < 6; ++i) {
    out.push_back(alphabet[h % alphabet.size()]);
    h /= alphabet.size();
  }
  return out;
}

std::string ephemeral(guest_kind kind, std::string_view owner, std::mt19937_64& rng) {
  std::string out = "gf-";
  out.push_back(static_cast<char>(kind));
  out.push_back('-');
  out.append(owner);
  out.push_back('-');
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  for (int i = 0; i < 10; ++i)
    out.push_back(alphabet[pick(rng)]);
  return out;
}

std::optional<parsed_name> parse(std::string_view name) {
  // gf-K-OOOOOO-RRRRRRRRRR
  if (name.size() != 22 || name.substr(0, 3) != "gf-" || name[4] != '-' || name[11] != '-')
    return std::nullopt;
  auto k = name[3];
  if (k != 'b' && k != 'x' && k != 'c') return std::nullopt;
  for (size_t i = 5; i < 22; ++i)
    if (i != 11 && !valid_char(name[i])) return std::nullopt;
  return parsed_name{static_cast<guest_kind>(k), std::string{name.substr(5, 6)}};
}

std::string reusable(std::string_view flow_id, std::string_view component_id,
                     std::string_view egress_fingerprint) {
  // FNV-1a 128 (offset basis and prime from the FNV spec); each part length-prefixed so
  // ("ab","c") and ("a","bc") differ. Versioned: a new scheme must never adopt old guests.
  using u128 = unsigned __int128;
  const u128 prime = (u128{1} << 88) + 0x13b;
  u128 h = (u128{0x6c62272e07bb0142ull} << 64) | 0x62b821756295c58dull;
  auto feed = [&](std::string_view s) {
    auto mix = [&](unsigned char c) {
      h ^= c;
      h *= prime;
    };
    auto n = s.size();
    for (int i = 0; i < 8; ++i)
      mix(static_cast<unsigned char>(n >> (8 * i)));
    for (unsigned char c : s)
      mix(c);
  };
  feed("gf-c/v1");
  feed(flow_id);
  feed(component_id);
  feed(egress_fingerprint);
  std::string out = "gf-c-";
  for (int i = 0; i < 17; ++i) {
    out.push_back(alphabet[static_cast<size_t>(h % alphabet.size())]);
    h /= alphabet.size();
  }
  return out;
}

bool is_reusable(std::string_view name) {
  if (name.size() != 22 || name.substr(0, 5) != "gf-c-") return false;
  for (size_t i = 5; i < name.size(); ++i)
    if (!valid_char(name[i])) return false;
  return true;
}

} // namespace guestflow::names
