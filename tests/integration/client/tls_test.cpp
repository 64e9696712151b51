// https: peer verification, SNI and host-name checks are on by default; a self-signed
// loopback server is refused unless its certificate is trusted explicitly.
#include "tests/integration/client/client_fixture.hpp"

using namespace gft;
using namespace guestflow;

namespace {

const std::string who_json =
    R"({"user_id":"tls","stats":{"running":0,"paused":0,"other":0,"total":0}})";

class cp_client_tls : public cp_client {
protected:
  void serve(const self_signed& cert) {
    loopback_server::options opts;
    opts.tls = true;
    opts.cert_pem = cert.cert_pem;
    opts.key_pem = cert.key_pem;
    tls_srv = std::make_unique<loopback_server>(opts);
    tls_srv->route("GET", "/v1/whoami", [](exchange& ex) { ex.success(who_json); });
  }

  void TearDown() override {
    cp_client::TearDown();
    if (tls_srv) tls_srv->stop();
  }

  result<whoami> who(cp::endpoint ep) {
    auto c = make_client(std::move(ep), fast_config());
    if (!c) return fail(ec::bad_request, "no client");
    auto o = expect<whoami>();
    c->who(5s, o->cb());
    return o->get();
  }

  std::string https(const std::string& host) const {
    return "https://" + host + ":" + std::to_string(tls_srv->port());
  }

  std::unique_ptr<loopback_server> tls_srv;
};

} // namespace

TEST_F(cp_client_tls, self_signed_certificate_is_refused_by_default) {
  serve(make_self_signed("DNS:localhost,IP:127.0.0.1"));
  auto r = who(at(https("127.0.0.1")));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_NE(r.error().message.find("TLS handshake"), std::string::npos) << r.error().message;
  EXPECT_EQ(tls_srv->hits("GET", "/v1/whoami"), 0u);
  EXPECT_EQ(tls_srv->connections(), 1u); // a verification failure is not retried
}

TEST_F(cp_client_tls, a_trusted_certificate_works_by_ip_and_by_name) {
  auto cert = make_self_signed("DNS:localhost,IP:127.0.0.1");
  serve(cert);
  cp::endpoint by_ip = at(https("127.0.0.1"), "k");
  by_ip.ca_pem = cert.cert_pem;
  auto r = who(by_ip);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->user_id, "tls");
  cp::endpoint by_name = at(https("localhost"), "k");
  by_name.ca_pem = cert.cert_pem;
  auto n = who(by_name);
  ASSERT_TRUE(n) << n.error().message;
  // SNI names the host asked for; an IP literal is never sent as one (RFC 6066).
  EXPECT_EQ(tls_srv->server_names(), (std::vector<std::string>{"", "localhost"}));
}

TEST_F(cp_client_tls, a_trusted_certificate_for_another_host_is_refused) {
  auto cert = make_self_signed("DNS:cp.example.com");
  serve(cert);
  cp::endpoint ep = at(https("127.0.0.1"));
  ep.ca_pem = cert.cert_pem;
  auto r = who(ep);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  cp::endpoint named = at(https("localhost"));
  named.ca_pem = cert.cert_pem;
  auto n = who(named);
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ec::unavailable);
  EXPECT_EQ(tls_srv->hits("GET", "/v1/whoami"), 0u);
}

TEST_F(cp_client_tls, verification_can_be_turned_off_explicitly) {
  serve(make_self_signed("DNS:cp.example.com"));
  auto r = who(at(https("127.0.0.1"), "", false));
  ASSERT_TRUE(r) << r.error().message;
}

TEST_F(cp_client_tls, tls_connections_are_pooled_too) {
  auto cert = make_self_signed("IP:127.0.0.1");
  serve(cert);
  cp::endpoint ep = at(https("127.0.0.1"));
  ep.ca_pem = cert.cert_pem;
  auto c = make_client(ep, fast_config());
  for (int i = 0; i < 3; ++i) {
    auto o = expect<whoami>();
    c->who(5s, o->cb());
    ASSERT_TRUE(o->get());
  }
  EXPECT_EQ(tls_srv->connections(), 1u);
}

TEST_F(cp_client_tls, a_bad_ca_pem_fails_make) {
  auto ep = at("https://127.0.0.1:1");
  ep.ca_pem = "-----BEGIN CERTIFICATE-----\nnope\n";
  auto c = cp::client::make(ep);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ec::unavailable);
}
