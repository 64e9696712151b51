#pragma once

// How guestflow speaks TLS to a control plane: one place for the context (TLS 1.2+, peer
// verification against the system store — SSL_CERT_FILE / SSL_CERT_DIR — plus the
// endpoint's ca_pem) and the per-connection peer check (SNI for names, host-name or
// IP-address verification). The client's transport uses it, and so does serve when it
// forwards a service URL to an https control plane (bridge/server/connection.cpp).

#include "controlplane/client/client.hpp"

#include <boost/asio/ssl/context.hpp>
#include <openssl/ssl.h>
#include <string>

namespace guestflow::cp {

/// The client context for control plane `ep` (`origin` names it in messages and the
/// warning logged when ep.verify_tls is off); unavailable when it cannot be set up (a bad
/// ca_pem).
result<boost::asio::ssl::context> tls_client_context(const endpoint& ep,
                                                     const std::string& origin);

/// Prepares one connection's `ssl` for `host`: SNI (names only, RFC 6066) and, when
/// `verify`, the host-name or IP-address check of the peer's certificate.
void set_tls_peer(SSL* ssl, const std::string& host, bool verify);

} // namespace guestflow::cp
