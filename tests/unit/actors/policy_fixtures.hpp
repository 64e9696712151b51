#pragma once

// What the policy and spec tests place guests with: a local provider and a shape catalog.

#include "actors/sandbox_policy.hpp"

namespace guestflow::test {

inline policy::provider_info local_provider() {
  policy::provider_info p;
  p.caps.isolation = "namespaces";
  p.caps.link_local_blocked = true;
  p.caps.max_timeout_seconds = 3600;
  return p;
}

inline shape_list catalog() {
  shape_list c;
  c.data = {{"s-1vcpu-256mb", 1, 256, 1024},   {"s-1vcpu-512mb", 1, 512, 1024},
            {"s-2vcpu-4gb", 2, 4096, 8192},    {"s-1vcpu-1gb", 1, 1024, 2048},
            {"s-4vcpu-16gb", 4, 16384, 32768}, {"s-4vcpu-8gb", 4, 8192, 16384}};
  c.total = c.data.size();
  return c;
}

} // namespace guestflow::test
