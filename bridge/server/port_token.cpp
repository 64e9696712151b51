#include "bridge/server/port_token.hpp"

#include "common/numbers.hpp"
#include "messages/secret.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdexcept>

namespace guestflow::bridge {

namespace {

/// 128 bits of the HMAC: a forgery needs 2^128 tries, and the URL stays short.
constexpr size_t mac_bytes = 16;

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

failure refused(std::string why) {
  return fail(ec::policy_refused, "service URL token " + why);
}

} // namespace

bool token_safe_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-'))
      return false;
  return true;
}

port_signer::port_signer() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1)
    throw std::runtime_error("no random bytes for the service URL key");
  key_.assign(reinterpret_cast<const char*>(buf), sizeof buf);
}

port_signer::port_signer(std::string key)
    : key_(std::move(key)) {}

std::string port_signer::mac(std::string_view fields) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(fields.data()), fields.size(), out, &len);
  return hex(out, mac_bytes);
}

std::string port_signer::sign(const port_grant& g) const {
  auto fields = g.guest_id + "." + std::to_string(g.port) + "." + std::to_string(g.expires_at);
  return fields + "." + mac(fields);
}

result<port_grant> port_signer::verify(std::string_view token, int64_t now) const {
  auto last = token.rfind('.');
  if (last == std::string_view::npos) return refused("malformed");
  auto fields = token.substr(0, last);
  auto second = fields.rfind('.');
  auto first = second == std::string_view::npos ? second : fields.rfind('.', second - 1);
  if (second == std::string_view::npos || first == std::string_view::npos || first == 0)
    return refused("malformed");
  // The MAC first: nothing of an unsigned token is believed, not even its expiry.
  if (!same_secret(token.substr(last + 1), mac(fields))) return refused("is wrong");
  port_grant g;
  g.guest_id = std::string{fields.substr(0, first)};
  auto port = parse_uint_as<uint16_t>(fields.substr(first + 1, second - first - 1), 1);
  auto expiry = parse_uint(fields.substr(second + 1));
  if (!port || !expiry || !token_safe_id(g.guest_id)) return refused("malformed");
  g.port = *port;
  g.expires_at = static_cast<int64_t>(*expiry);
  if (g.expires_at <= now) return refused("expired");
  return g;
}

} // namespace guestflow::bridge
