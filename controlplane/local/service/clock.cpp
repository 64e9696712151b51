#include "controlplane/local/service/clock.hpp"

#include "messages/base64.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <sys/random.h>

namespace guestflow::local {

std::string now_rfc3339() {
  using namespace std::chrono;
  auto now = system_clock::now();
  auto secs = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms));
  return buf;
}

namespace {

template<size_t N>
void random_bytes(unsigned char (&bytes)[N]) {
  size_t got = 0;
  while (got < N) {
    auto n = ::getrandom(bytes + got, N - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
}

} // namespace

std::string new_ingress_secret() {
  unsigned char bytes[32];
  random_bytes(bytes);
  auto text = base64_encode({reinterpret_cast<const char*>(bytes), sizeof bytes});
  for (auto& c : text)
    c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!text.empty() && text.back() == '=')
    text.pop_back();
  return text;
}

std::string new_guest_id() {
  unsigned char bytes[8];
  random_bytes(bytes);
  static const char hex[] = "0123456789abcdef";
  std::string id = "sb-";
  for (auto b : bytes) {
    id.push_back(hex[b >> 4]);
    id.push_back(hex[b & 15]);
  }
  return id;
}

} // namespace guestflow::local
