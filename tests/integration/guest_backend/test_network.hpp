#pragma once

#include "tests/integration/guest_backend/test_guest.hpp"

#include <memory>
#include <string>

namespace guestflow::local::test {

/// A network namespace the test creates and deletes: `gft<N>` joined to the host by a veth
/// `gft<N>` (host side 10.250.a.b+1/29) with two addresses inside (`addr_a` = +2,
/// `addr_b` = +3) and a default route back to the host. N is claimed atomically by the
/// link name, so parallel test processes never share a subnet.
class test_netns {
public:
  static std::unique_ptr<test_netns> make();
  ~test_netns();

  /// A greeting TCP server listening on `address`:0 inside the namespace.
  std::unique_ptr<tcp_server> serve(const std::string& address, std::string greeting);

  std::string name;
  std::string host_if;
  std::string host_ip;
  std::string addr_a;
  std::string addr_b;
};

/// True when this host can run the egress tests (root, ip and nft present).
bool network_tests_possible();

} // namespace guestflow::local::test
