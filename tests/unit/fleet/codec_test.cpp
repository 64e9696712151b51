#include "fleet/etcd_client.hpp"
#include "messages/base64.hpp"
#include "messages/fleet.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

TEST(etcd_url, parses_one_or_more_endpoints_in_order) {
  auto eps = fleet::parse_etcd_url(" etcd://127.0.0.1:2379,localhost:2380 ,[::1]:2381");
  ASSERT_TRUE(eps) << eps.error().message;
  ASSERT_EQ(eps->size(), 3u);
  EXPECT_EQ((*eps)[0], (fleet::etcd_endpoint{"127.0.0.1", 2379}));
  EXPECT_EQ((*eps)[1], (fleet::etcd_endpoint{"localhost", 2380}));
  EXPECT_EQ((*eps)[2], (fleet::etcd_endpoint{"::1", 2381}));
}

TEST(etcd_url, refuses_what_is_not_etcd_host_port) {
  for (auto bad : {"", "http://127.0.0.1:2379", "etcd://", "etcd://127.0.0.1",
                   "etcd://127.0.0.1:0", "etcd://127.0.0.1:65536", "etcd://h:1,,h:2",
                   "etcd://h:x", "etcd://u@h:1", "etcd://[::1]2379"}) {
    auto eps = fleet::parse_etcd_url(bad);
    ASSERT_FALSE(eps) << bad;
    EXPECT_EQ(eps.error().code, ec::bad_request);
    EXPECT_NE(eps.error().message.find("etcd://HOST:PORT"), std::string::npos);
  }
}

TEST(base64, decodes_what_encode_wrote_for_every_tail_length) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    auto back = base64_decode(base64_encode(bytes));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, bytes);
    bytes.push_back(static_cast<char>(i * 37));
  }
}

TEST(base64, refuses_bad_length_characters_and_padding) {
  for (auto bad : {"YQ=", "YQ", "Y===", "YQ=a", "=QQQ", "Y Q=", "YQ==YQ==", "Y\xffQ="})
    EXPECT_FALSE(base64_decode(bad)) << bad;
}

TEST(etcd_codec, prefix_end_is_the_next_key_after_every_key_with_the_prefix) {
  EXPECT_EQ(etcd::prefix_end("/guestflow/nodes/"), "/guestflow/nodes0");
  EXPECT_EQ(etcd::prefix_end(std::string{"a\xff", 2}), "b");
  EXPECT_EQ(etcd::prefix_end(""), std::string(1, '\0'));
}

TEST(etcd_codec, reads_a_range_answer_with_int64_strings) {
  auto r = etcd::decode_kv_reply(
      R"({"header":{"cluster_id":"1","revision":"7"},"kvs":[{"key":"YQ==","create_revision":"2",)"
      R"("mod_revision":"5","version":"1","value":"Yg==","lease":"4111"}],"count":"1"})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->revision, 7);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "a");
  EXPECT_EQ(r->kvs[0].value, "b");
  EXPECT_EQ(r->kvs[0].create_revision, 2);
  EXPECT_EQ(r->kvs[0].mod_revision, 5);
  EXPECT_EQ(r->kvs[0].lease, 4111);
}

TEST(etcd_codec, reads_a_failed_txn_with_the_holder_and_a_delete_count) {
  auto r = etcd::decode_kv_reply(
      R"({"header":{"revision":"3"},"responses":[{"response_range":{"header":{},"kvs":)"
      R"([{"key":"eg==","value":"Yw==","create_revision":"3"}],"count":"1"}}]})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->succeeded);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "c");
  auto d = etcd::decode_kv_reply(
      R"({"header":{"revision":"4"},"succeeded":true,"responses":[{"response_delete_range":)"
      R"({"header":{"revision":"4"},"deleted":"1"}}]})");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->succeeded);
  EXPECT_EQ(d->deleted, 1);
}

TEST(etcd_codec, refuses_garbage_without_crashing) {
  for (auto bad : {"", "{", "[]", R"({"kvs":{}})", R"({"kvs":[{"key":"!!"}]})",
                   R"({"header":{"revision":"-1"}})", R"({"deleted":"1e3"})"})
    EXPECT_FALSE(etcd::decode_kv_reply(bad)) << bad;
}

TEST(etcd_codec, reads_lease_answers_plain_and_streamed_and_errors) {
  auto g = etcd::decode_lease_reply(R"({"header":{},"ID":"4111120385028873734","TTL":"5"})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->id, 4111120385028873734);
  EXPECT_EQ(g->ttl, 5);
  auto k = etcd::decode_lease_reply(R"({"result":{"header":{},"ID":"12"}})");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->id, 12);
  EXPECT_EQ(k->ttl, 0); // a lease that is gone
  auto e = etcd::decode_gateway_error(
      R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  EXPECT_EQ(e.code, 5);
  EXPECT_EQ(e.message, "etcdserver: requested lease not found");
  auto s = etcd::decode_gateway_error(R"({"error":{"grpc_code":14,"message":"no leader"}})");
  EXPECT_EQ(s.code, 14);
  EXPECT_EQ(etcd::decode_gateway_error(R"({"header":{}})").code, 0);
  EXPECT_EQ(etcd::decode_gateway_error("not json").code, 0);
}

TEST(etcd_codec, request_bodies_carry_keys_in_base64_and_ids_as_strings) {
  EXPECT_EQ(etcd::put_body("a", "b", 7), R"({"key":"YQ==","value":"Yg==","lease":"7"})");
  EXPECT_EQ(etcd::range_body("a", "b"), R"({"key":"YQ==","range_end":"Yg=="})");
  EXPECT_EQ(etcd::lease_grant_body(10), R"({"TTL":"10"})");
  auto txn = etcd::create_if_absent_body("a", "b", 0);
  EXPECT_NE(txn.find(R"("target":"CREATE","result":"EQUAL","create_revision":"0")"),
            std::string::npos);
}

TEST(node_capacity, round_trips_and_knows_when_a_shape_fits) {
  node_capacity c{"n1", 1024, 768, 3, 4, false, true, "http://127.0.0.1:9"};
  auto back = decode<node_capacity>(encode(c));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, c);
  EXPECT_TRUE(c.has_room_for(256));
  EXPECT_FALSE(c.has_room_for(257));
  c.guests = 4;
  EXPECT_FALSE(c.has_room_for(1)); // max_guests binds
  c.max_guests = 0;
  EXPECT_TRUE(c.has_room_for(1)); // 0: no count cap
  auto no_url = encode(node_capacity{"n", 1, 0, 0, 0, false, true, ""});
  EXPECT_EQ(no_url.find("url"), std::string::npos);
  EXPECT_FALSE(decode<node_capacity>(R"({"node":"n"})")); // budget and committed required
}

TEST(name_claim, round_trips) {
  name_claim c{"n2", "runtime-1"};
  auto back = decode<name_claim>(encode(c));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, c);
}

} // namespace
} // namespace guestflow
