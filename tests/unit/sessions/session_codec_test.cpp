#include "messages/base64.hpp"
#include "messages/session.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

TEST(SessionCodec, CommandEnvKeysMustBeShellNames) {
  auto ok = decode<session_command>(
      R"({"command":"echo $A_1","env":{"A_1":"x","_b":"y"},"cwd":"/tmp","timeout_seconds":5})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->env.at("A_1"), "x");
  EXPECT_EQ(ok->timeout_seconds, 5u);
  for (auto bad :
       {R"({"command":"x","env":{"1A":"x"}})", R"({"command":"x","env":{"A-B":"x"}})",
        R"({"command":"x","env":{"A B":"x"}})", R"({"command":"x","env":{"":"x"}})",
        R"({"command":"x","cwd":"rel"})", R"({"command":"x","timeout_seconds":0})"}) {
    auto r = decode<session_command>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
  }
}

TEST(SessionCodec, RequestNeedsUserAndThread) {
  EXPECT_TRUE(decode<session_request>(R"({"user_id":"u","thread_id":"t"})"));
  EXPECT_FALSE(decode<session_request>(R"({"user_id":"","thread_id":"t"})"));
  EXPECT_FALSE(decode<session_request>(R"({"user_id":"u"})"));
  EXPECT_FALSE(decode<session_request>("{\"user_id\":\"u\",\"thread_id\":\"" +
                                       std::string(257, 'x') + "\"}"));
}

TEST(SessionCodec, RequestTakesDeerFlowsMountsAndAThreadDir) {
  auto ok = decode<session_request>(
      R"({"user_id":"u","thread_id":"t","thread_dir":"/srv/t/user-data","mounts":[)"
      R"({"host_path":"/srv/data","container_path":"/mnt/data","read_only":true},)"
      R"({"host_path":"/srv/rw","container_path":"/mnt/rw"}]})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->thread_dir, "/srv/t/user-data");
  ASSERT_EQ(ok->mounts.size(), 2u);
  EXPECT_EQ(ok->mounts[0], (sandbox_mount{"/srv/data", "", "/mnt/data", true}));
  EXPECT_EQ(ok->mounts[1], (sandbox_mount{"/srv/rw", "", "/mnt/rw", false}));
  for (auto bad : {R"({"user_id":"u","thread_id":"t","thread_dir":"rel"})",
                   R"({"user_id":"u","thread_id":"t","mounts":[{"host_path":"/a"}]})",
                   R"({"user_id":"u","thread_id":"t","mounts":[{"host_path":"a",)"
                   R"("container_path":"/mnt/a"}]})",
                   R"({"user_id":"u","thread_id":"t","mounts":[{"host_path":"/a
b",)"
                   R"("container_path":"/mnt/a"}]})",
                   R"({"user_id":"u","thread_id":"t","mounts":{}})"}) {
    auto r = decode<session_request>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
  }
}

TEST(SessionCodec, RequestTakesDeerFlowsIdleTimeoutMemoryAndCpus) {
  auto ok = decode<session_request>(
      R"({"user_id":"u","thread_id":"t","idle_timeout_seconds":0,"memory_mib":1024,"cpus":2})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->idle_timeout_seconds, std::optional<uint32_t>{0});
  EXPECT_EQ(ok->memory_mib, std::optional<uint64_t>{1024});
  EXPECT_EQ(ok->cpus, std::optional<uint32_t>{2});
  auto absent = decode<session_request>(
      R"({"user_id":"u","thread_id":"t","idle_timeout_seconds":null,"memory_mib":null})");
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_FALSE(absent->idle_timeout_seconds);
  EXPECT_FALSE(absent->memory_mib);
  EXPECT_FALSE(absent->cpus);
  struct refused {
    const char* body;
    const char* says;
  };
  for (auto [body, says] : {
           refused{R"("idle_timeout_seconds":604801)", "idle_timeout_seconds: 604801 out of "
                                                       "range (expected 0..604800)"},
           refused{R"("idle_timeout_seconds":-1)", "idle_timeout_seconds"},
           refused{R"("idle_timeout_seconds":1.5)", "idle_timeout_seconds"},
           refused{R"("memory_mib":0)", "memory_mib: 0 out of range (expected 1..1048576)"},
           refused{R"("memory_mib":"1g")", "memory_mib"},
           refused{R"("cpus":0)", "cpus: 0 out of range (expected 1..1024)"},
           refused{R"("cpus":true)", "cpus"},
       }) {
    auto r =
        decode<session_request>(std::string{R"({"user_id":"u","thread_id":"t",)"} + body + "}");
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  }
}

TEST(SessionCodec, TheStateSaysStoppedAndTheSyncIsCounted) {
  session_info x;
  x.session_id = "gf-s-x";
  x.stopped = true;
  EXPECT_NE(encode(x).find(R"("state":"stopped")"), std::string::npos) << encode(x);
  EXPECT_EQ(encode(x).find("synced_files"), std::string::npos);
  x.stopped = false;
  x.warm = true;
  x.synced_files = 3;
  EXPECT_NE(encode(x).find(R"("state":"warm")"), std::string::npos);
  EXPECT_NE(encode(x).find(R"("synced_files":3)"), std::string::npos);
}

TEST(SessionCodec, AListingNamesEachEntryByItsExactBytes) {
  bool cut = true;
  auto xs =
      decode_listing(R"({"entries":[{"path":"/o/a","type":"file","size":3},)"
                     R"({"path":"/o/�","path_b64":"L28v/w==","type":"symlink","size":1}],)"
                     R"("truncated":false})",
                     cut);
  ASSERT_TRUE(xs) << xs.error().message;
  EXPECT_FALSE(cut);
  ASSERT_EQ(xs->size(), 2u);
  EXPECT_EQ((*xs)[0].path, "/o/a");
  EXPECT_EQ((*xs)[0].size, 3u);
  EXPECT_EQ((*xs)[1].path, std::string("/o/\xff"));
  EXPECT_EQ((*xs)[1].type, "symlink");
  EXPECT_FALSE(decode_listing(R"({"entries":[{"path_b64":"!!","type":"file"}]})", cut));
}

TEST(SessionCodec, OutputKeepsTheOrderOfBothStreams) {
  command_outcome x;
  x.chunks = {{false, "a"}, {true, "b"}, {false, "c"}};
  auto json = encode(x);
  EXPECT_NE(json.find(R"("stdout":"ac")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("stderr":"b")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("output":"abc")"), std::string::npos) << json;
  EXPECT_EQ(encode_command_lines(x),
            "{\"stdout\":\"a\"}\n{\"stderr\":\"b\"}\n{\"stdout\":\"c\"}\n"
            "{\"exit_code\":0,\"timed_out\":false}\n");
}

TEST(SessionCodec, Base64RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i)
    all.push_back(static_cast<char>(i));
  for (size_t n : {0, 1, 2, 3, 4, 255, 256}) {
    auto s = all.substr(0, n);
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(base64_decode("abc"));
  EXPECT_FALSE(base64_decode("a=bc"));
  EXPECT_FALSE(base64_decode("ab\ncd=="));
}

} // namespace
} // namespace guestflow
