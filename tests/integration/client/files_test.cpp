// GET files under a byte cap that binds during the transfer: the read stops at the cap,
// the connection is closed (the server's writes fail), nothing past the cap is buffered.
#include "tests/integration/client/client_fixture.hpp"

using namespace gft;
using namespace guestflow;

namespace {

const std::string files_path = "/v1/sandboxes/sb-1/files";
constexpr size_t mib = size_t{1} << 20;

} // namespace

TEST_F(cp_client, get_file_cap_binds_during_a_chunked_transfer) {
  std::atomic<bool> finished_sending{false};
  srv->route("GET", files_path, [&](exchange& ex) {
    ex.begin_chunked(200, "application/octet-stream");
    std::string piece(256 * 1024, 'z');
    for (size_t sent = 0; sent < 20 * mib; sent += piece.size())
      if (!ex.chunk(piece)) return;
    ex.end_chunked();
    finished_sending = true;
  });
  auto o = expect<std::string>();
  cl->get_file("sb-1", "/workspace/artifacts.tar", 5 * mib, 20s, o->cb());
  auto r = o->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::artifact_too_large);
  EXPECT_NE(r.error().message.find(std::to_string(5 * mib)), std::string::npos);
  // The client hung up mid-transfer: the server could not send all 20 MiB.
  EXPECT_TRUE(srv->wait_until([&] { return srv->write_failures() >= 1; }));
  EXPECT_FALSE(finished_sending.load());
  EXPECT_EQ(srv->hits("GET", files_path), 1u); // a too-large file is not retried
}

TEST_F(cp_client, get_file_cap_checks_content_length_up_front) {
  std::atomic<bool> finished_sending{false};
  srv->route("GET", files_path, [&](exchange& ex) {
    ex.begin_sized(200, 20 * mib);
    std::string piece(mib, 'z');
    for (int i = 0; i < 20; ++i)
      if (!ex.raw(piece)) return;
    finished_sending = true;
  });
  auto o = expect<std::string>();
  cl->get_file("sb-1", "/workspace/big.bin", 5 * mib, 20s, o->cb());
  auto r = o->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::artifact_too_large);
  EXPECT_TRUE(srv->wait_until([&] { return srv->write_failures() >= 1; }));
  EXPECT_FALSE(finished_sending.load());
}

TEST_F(cp_client, get_file_at_exactly_the_cap_succeeds_and_keeps_the_connection) {
  std::string content(5 * mib, 'q');
  content[123] = '\0';
  srv->route("GET", files_path, [&](exchange& ex) {
    ex.begin_chunked(200, "application/octet-stream");
    for (size_t at = 0; at < content.size(); at += mib)
      ex.chunk(std::string_view(content).substr(at, mib));
    ex.end_chunked();
  });
  for (int i = 0; i < 2; ++i) {
    auto o = expect<std::string>();
    cl->get_file("sb-1", "/workspace/ok.bin", 5 * mib, 20s, o->cb());
    auto r = o->get();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, content);
  }
  EXPECT_EQ(srv->connections(), 1u);
}

TEST_F(cp_client, get_file_missing_is_not_found) {
  srv->route("GET", files_path,
             [](exchange& ex) { ex.respond(404, fail_body("no such file /workspace/x")); });
  auto o = expect<std::string>();
  cl->get_file("sb-1", "/workspace/x", 100, 5s, o->cb());
  auto r = o->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::not_found);
}

TEST_F(cp_client, oversized_json_reply_is_refused_during_the_read) {
  srv->route("GET", "/v1/sandboxes", [](exchange& ex) {
    ex.begin_chunked(200, "application/json");
    ex.chunk("{\"status\":\"success\",\"data\":{\"data\":[");
    std::string filler(64 * 1024, ' ');
    for (int i = 0; i < 64; ++i)
      if (!ex.chunk(filler)) return;
    ex.chunk("],\"pagination\":{\"total\":0}}}");
    ex.end_chunked();
  });
  auto cfg = fast_config();
  cfg.max_response_bytes = 1 * mib;
  auto small = make_client(cfg);
  auto o = expect<sandbox_list>();
  small->list("", 0, 0, 10s, o->cb());
  auto r = o->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
}
