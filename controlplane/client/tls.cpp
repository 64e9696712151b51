#include "controlplane/client/tls.hpp"

#include "controlplane/client/url.hpp"

#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>

namespace guestflow::cp {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;

result<ssl::context> tls_client_context(const endpoint& ep, const std::string& origin) {
  try {
    ssl::context ctx(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    if (ep.verify_tls) {
      ctx.set_verify_mode(ssl::verify_peer);
      ctx.set_default_verify_paths();
      if (!ep.ca_pem.empty()) ctx.add_certificate_authority(net::buffer(ep.ca_pem));
    } else {
      spdlog::warn("control plane {}: TLS peer verification is OFF", origin);
      ctx.set_verify_mode(ssl::verify_none);
    }
    return ctx;
  } catch (const boost::system::system_error& e) {
    return fail(ec::unavailable, "cannot set up TLS for " + origin + ": " + e.what());
  }
}

void set_tls_peer(SSL* ssl, const std::string& host, bool verify) {
  bool ip = is_ip_literal(host);
  if (!ip) // SNI carries names only (RFC 6066)
    SSL_set_tlsext_host_name(ssl, host.c_str());
  if (verify) {
    if (ip)
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
    else
      SSL_set1_host(ssl, host.c_str());
  }
}

} // namespace guestflow::cp
