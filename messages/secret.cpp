#include "messages/secret.hpp"

namespace guestflow {

bool same_secret(std::string_view offered, std::string_view expected) noexcept {
  unsigned char diff = offered.size() != expected.size() ? 1 : 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto o = i < offered.size() ? static_cast<unsigned char>(offered[i]) : 0;
    diff |= static_cast<unsigned char>(o ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

} // namespace guestflow
