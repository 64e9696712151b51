#include "controlplane/client/error_mapping.hpp"
#include "messages/jsend.hpp"
#include "messages/sandbox.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::cp;

namespace {

struct row {
  unsigned status;
  std::string body;
  ec code;
  bool retryable;
  std::string message_part; ///< must appear in the message
};

const std::string what = "GET /v1/sandboxes/abc";

} // namespace

TEST(cp_client_error_mapping, success_envelope_yields_canonical_data) {
  auto o = map_response(200, R"({"status":"success","data":{"user_id":"u", "stats":{}}})",
                        body_kind::jsend, what);
  ASSERT_TRUE(o.value) << o.value.error().message;
  EXPECT_FALSE(o.retryable);
  auto again = parse_raw_json(R"({"user_id":"u","stats":{}})");
  ASSERT_TRUE(again);
  EXPECT_EQ(*o.value, again->text);
}

TEST(cp_client_error_mapping, raw_success_is_the_body_and_no_content_is_null) {
  auto raw = map_response(200, std::string("\x00\x01not json", 10), body_kind::raw, what);
  ASSERT_TRUE(raw.value);
  EXPECT_EQ(*raw.value, std::string("\x00\x01not json", 10));
  auto none = map_response(204, "", body_kind::jsend, what);
  ASSERT_TRUE(none.value);
  EXPECT_EQ(*none.value, "null");
}

TEST(cp_client_error_mapping, status_and_envelope_table) {
  const std::vector<row> table = {
      {200, R"({"status":"fail","data":{"message":"nope"}})", ec::transient, true, "nope"},
      {200, R"({"status":"error","message":"boom","code":500})", ec::transient, true, "boom"},
      {200, "<html>proxy</html>", ec::transient, true, "no JSend envelope"},
      {201, R"({"status":"fail","data":{"message":"x"}})", ec::transient, true, "201"},
      {429, R"({"status":"error","message":"slow down","code":429})", ec::transient, true,
       "429"},
      {500, "", ec::transient, true, "500 Internal Server Error"},
      {502, "bad gateway", ec::transient, true, "502"},
      {503, R"({"status":"error","message":"busy","code":503})", ec::transient, true, "busy"},
      {599, "", ec::transient, true, "599"},
      {404, R"({"status":"fail","data":{"message":"sandbox abc not found"}})", ec::not_found,
       false, "sandbox abc not found"},
      {404, "", ec::not_found, false, "not found"},
      {409, R"({"status":"fail","data":{"message":"sandbox is paused"}})", ec::paused, false,
       "sandbox is paused"},
      {409, R"({"status":"error","message":"Sandbox is paused","code":409})", ec::paused, false,
       "paused"},
      {409, R"({"status":"fail","data":{"message":"name already in use"}})", ec::bad_request,
       false, "name already in use"},
      {400, R"({"status":"fail","data":{"message":"shape is required"}})", ec::bad_request,
       false, "shape is required"},
      {413, R"({"status":"fail","data":{"message":"file too large"}})", ec::bad_request, false,
       "file too large"},
      {422, R"({"status":"fail","data":{"message":"bad egress rule"}})", ec::bad_request, false,
       "bad egress rule"},
      {401, R"({"status":"error","message":"invalid api key","code":401})", ec::unavailable,
       false, "401"},
      {403, "", ec::unavailable, false, "403 Forbidden"},
      {405, "", ec::unavailable, false, "405"},
      {302, "", ec::unavailable, false, "302"},
      {418, "", ec::unavailable, false, "418"},
  };
  for (const auto& r : table) {
    auto o = map_response(r.status, r.body, body_kind::jsend, what);
    ASSERT_FALSE(o.value) << r.status << " " << r.body;
    EXPECT_EQ(o.value.error().code, r.code)
        << r.status << " " << r.body << " → " << o.value.error().message;
    EXPECT_EQ(o.retryable, r.retryable) << r.status << " " << r.body;
    EXPECT_NE(o.value.error().message.find(r.message_part), std::string::npos)
        << r.status << " " << r.body << " → " << o.value.error().message;
  }
}

TEST(cp_client_error_mapping, bad_request_carries_the_server_message_verbatim) {
  auto o = map_response(400, R"({"status":"fail","data":{"message":"name: at most 22 chars"}})",
                        body_kind::jsend, what);
  ASSERT_FALSE(o.value);
  EXPECT_EQ(o.value.error().message, "name: at most 22 chars");
}

TEST(cp_client_error_mapping, raw_errors_are_mapped_like_json_ones) {
  auto o = map_response(409, R"({"status":"fail","data":{"message":"sandbox is paused"}})",
                        body_kind::raw, what);
  ASSERT_FALSE(o.value);
  EXPECT_EQ(o.value.error().code, ec::paused);
}

TEST(cp_client_error_mapping, transport_errors) {
  namespace net = boost::asio;
  const std::string origin = "http://127.0.0.1:1";
  auto refused = map_transport(phase::connect, net::error::connection_refused, origin, what);
  ASSERT_FALSE(refused.value);
  EXPECT_EQ(refused.value.error().code, ec::unavailable);
  EXPECT_TRUE(refused.retryable);
  EXPECT_NE(refused.value.error().message.find("control plane at " + origin + " unreachable"),
            std::string::npos);

  auto unresolved = map_transport(phase::resolve, net::error::host_not_found, origin, what);
  EXPECT_EQ(unresolved.value.error().code, ec::unavailable);
  EXPECT_TRUE(unresolved.retryable);

  auto timed_out = map_transport(phase::read, boost::beast::error::timeout, origin, what);
  EXPECT_EQ(timed_out.value.error().code, ec::transient);
  EXPECT_TRUE(timed_out.retryable);
  EXPECT_NE(timed_out.value.error().message.find("timed out"), std::string::npos);

  auto connect_timeout = map_transport(phase::connect, net::error::timed_out, origin, what);
  EXPECT_EQ(connect_timeout.value.error().code, ec::transient);

  auto reset = map_transport(phase::read, net::error::connection_reset, origin, what);
  EXPECT_EQ(reset.value.error().code, ec::transient);
  EXPECT_TRUE(reset.retryable);

  auto tls = map_transport(phase::handshake, net::ssl::error::stream_truncated, origin, what);
  EXPECT_EQ(tls.value.error().code, ec::unavailable);
  EXPECT_FALSE(tls.retryable);
  EXPECT_NE(tls.value.error().message.find("TLS handshake"), std::string::npos);
}

TEST(cp_client_error_mapping, undecodable_success_data_is_unavailable_not_bad_request) {
  auto r = decode_reply<whoami>(R"({"user_id":17})", "GET /v1/whoami");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_NE(r.error().message.find("GET /v1/whoami"), std::string::npos);
}

TEST(cp_client_error_mapping, deadline_failure_is_transient) {
  auto f = deadline_failure(what, std::chrono::milliseconds{250});
  EXPECT_EQ(f.code, ec::transient);
  EXPECT_NE(f.message.find("250 ms"), std::string::npos);
}

TEST(cp_client_error_mapping, success_data_of_only_takes_the_exact_envelope_form) {
  auto d = success_data_of(R"({"status":"success","data":{"id":"sb-1"}})");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, R"({"id":"sb-1"})");
  // Unvalidated: the caller must decode it whole and fall back to map_response.
  auto extra = success_data_of(R"({"status":"success","data":{"id":"sb-1"},"x":1})");
  ASSERT_TRUE(extra);
  EXPECT_EQ(*extra, R"({"id":"sb-1"},"x":1)");
  for (std::string_view body :
       {R"({"data":{"id":"sb-1"},"status":"success"})", R"({ "status":"success","data":1})",
        R"({"status":"success","data":)", R"({"status":"success","data":})",
        R"({"status":"fail","data":{"message":"m"}})", R"({"status":"success","data":1} )", ""})
    EXPECT_FALSE(success_data_of(body)) << body;
}
