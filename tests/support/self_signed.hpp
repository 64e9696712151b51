#pragma once

// A self-signed certificate for the tests' TLS servers (the client's loopback server, the
// https front of a control plane): link `test_certs`.

#include <string>

namespace guestflow::test_support {

/// A certificate (its own CA, so a client can be told to trust it) and its key, PEM.
struct self_signed {
  std::string cert_pem;
  std::string key_pem;
};

/// A fresh P-256 key and a certificate for `common_name` (distinct names: distinct issuers
/// for a verifier) with `subject_alt_names` ("DNS:localhost,IP:127.0.0.1"), valid from an
/// hour ago for a day. Throws std::runtime_error when OpenSSL fails.
self_signed make_self_signed(const std::string& subject_alt_names,
                             const std::string& common_name = "guestflow test");

} // namespace guestflow::test_support
