#pragma once

// A TLS-terminating front for a real local control plane, on 127.0.0.1: the local control
// plane serves plain HTTP only (a fleet reaches its nodes over TLS through such a front), so
// serve's https path is tested against the real control plane behind this. Each connection's
// handshake uses the certificate presented at its accept; after it, bytes are relayed as they
// are to the control plane's port, both ways.

#include "tests/support/self_signed.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace guestflow::testing {

/// A self-signed certificate (its own CA) and its key, PEM.
using test_cert = test_support::self_signed;

/// A certificate for `common_name` (distinct names: distinct issuers for the verifier) with
/// `subject_alt_names` ("DNS:localhost,IP:127.0.0.1").
test_cert make_test_cert(const std::string& common_name, const std::string& subject_alt_names);

class tls_front {
public:
  tls_front(uint16_t upstream_port, const test_cert& cert);
  ~tls_front();
  tls_front(const tls_front&) = delete;
  tls_front& operator=(const tls_front&) = delete;

  uint16_t port() const;

  /// Connections accepted from now on present `cert`.
  void present(const test_cert& cert);

  /// Connections whose handshake passed and that were relayed to the control plane.
  size_t relayed() const;
  /// Handshakes that failed (the client refused the certificate, or went away).
  size_t refused() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace guestflow::testing
