#include "tests/integration/client/client_fixture.hpp"

#include "messages/jsend.hpp"

namespace gft {

void cp_client::SetUp() {
  srv = std::make_unique<loopback_server>();
  cl = make_client(fast_config());
}

void cp_client::TearDown() {
  if (cl) cl->shutdown();
  cl.reset();
  if (srv) srv->stop();
}

guestflow::cp::client_config cp_client::fast_config() const {
  guestflow::cp::client_config cfg;
  cfg.retry_initial = 10ms;
  cfg.retry_max = 40ms;
  cfg.default_timeout = 10s;
  return cfg;
}

std::shared_ptr<guestflow::cp::client>
cp_client::make_client(guestflow::cp::endpoint ep, guestflow::cp::client_config cfg) {
  auto c = guestflow::cp::client::make(std::move(ep), cfg);
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? *c : nullptr;
}

std::shared_ptr<guestflow::cp::client>
cp_client::make_client(guestflow::cp::client_config cfg) {
  guestflow::cp::endpoint ep;
  ep.base_url = srv->url();
  ep.api_key = "test-key";
  return make_client(ep, cfg);
}

guestflow::cp::endpoint at(std::string url, std::string key, bool verify) {
  guestflow::cp::endpoint ep;
  ep.base_url = std::move(url);
  ep.api_key = std::move(key);
  ep.verify_tls = verify;
  return ep;
}

std::string fail_body(std::string_view message) {
  return guestflow::jsend_fail(message);
}

std::string error_body(std::string_view message, int code) {
  return guestflow::jsend_error(message, code);
}

std::string view_json(std::string_view id, std::string_view status) {
  return R"({"id":")" + std::string(id) + R"(","name":"gf-b-abc123-0123456789","status":")" +
         std::string(status) +
         R"(","shape":"s-1vcpu-256mb","egress":["*"],"envs":["A"],)"
         R"("created_at":"2025-01-02T03:04:05Z","auto_pause_after_seconds":300})";
}

} // namespace gft
