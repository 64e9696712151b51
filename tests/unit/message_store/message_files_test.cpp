// The message store's files (actors/message_store): order, escaping, the caps, a torn
// line after a crash, trimming, and appends from several writers at once.

#include "actors/message_store.hpp"
#include "messages/flow_run.hpp"
#include "tests/support/temp_dir.hpp"

#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace guestflow;
namespace fs = std::filesystem;

namespace {

raw_json message(const std::string& text) {
  auto v = parse_raw_json(R"({"text":)" + quote_json(text) + R"(,"sender":"User"})");
  EXPECT_TRUE(v);
  return *v;
}

std::vector<std::string> texts(const std::vector<raw_json>& ms) {
  std::vector<std::string> out;
  for (auto& m : ms) {
    auto at = m.text.find(R"("text":")");
    auto end = m.text.find('"', at + 8);
    out.push_back(m.text.substr(at + 8, end - at - 8));
  }
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

class message_files_test : public ::testing::Test {
protected:
  test_support::temp_dir tmp{"guestflow-messages"};
  fs::path dir = tmp.path() / "messages";
};

} // namespace

TEST_F(message_files_test, a_new_session_has_no_messages_and_creates_nothing) {
  message_files store{dir};
  auto h = store.load("s1");
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_TRUE(h->empty());
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(message_files_test, messages_come_back_oldest_first_per_session) {
  message_files store{dir};
  ASSERT_TRUE(store.append("s1", message("one")));
  ASSERT_TRUE(store.append("s2", message("other")));
  ASSERT_TRUE(store.append("s1", message("two")));
  EXPECT_EQ(texts(*store.load("s1")), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(texts(*store.load("s2")), (std::vector<std::string>{"other"}));
  // A second store on the same directory (another process, a restart) sees the same.
  message_files again{dir};
  EXPECT_EQ(texts(*again.load("s1")), (std::vector<std::string>{"one", "two"}));
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(store.file_of("s1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(message_files_test, a_session_id_is_never_a_path) {
  message_files store{dir};
  for (std::string id : {"../escape", "a/b", ".", "..", "/etc/passwd", "x y%z"}) {
    ASSERT_TRUE(store.append(id, message(id))) << id;
    auto file = store.file_of(id);
    EXPECT_EQ(file.parent_path(), dir) << id;
    EXPECT_EQ(file.filename().string().find('/'), std::string::npos);
    EXPECT_NE(file.filename().string()[0], '.') << id;
    EXPECT_EQ(texts(*store.load(id)), (std::vector<std::string>{id})) << id;
  }
  EXPECT_EQ(store.file_of("../escape").filename(), "%2E%2E%2Fescape.ndjson");
  EXPECT_EQ(store.file_of("0b6e-Chat_1").filename(), "0b6e-Chat_1.ndjson");
  size_t files = 0;
  for (auto& e : fs::directory_iterator{dir}) {
    EXPECT_TRUE(e.is_regular_file());
    ++files;
  }
  EXPECT_EQ(files, 6u);
  EXPECT_FALSE(fs::exists(tmp.path() / "escape.ndjson"));
}

TEST_F(message_files_test, bad_session_ids_are_refused_and_change_nothing) {
  message_files store{dir};
  for (std::string id : {std::string{}, std::string(81, 'a'), std::string{"a\nb"},
                         std::string{"tab\there"}, std::string{"del\x7f"}}) {
    auto r = store.append(id, message("x"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find("session_id"), std::string::npos) << r.error().message;
    auto l = store.load(id);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().code, ec::bad_request);
  }
  EXPECT_TRUE(store.append(std::string(80, 'a'), message("x")));
  EXPECT_TRUE(store.append("Ünïcode session", message("x")));
}

TEST_F(message_files_test, only_objects_within_the_cap_are_stored) {
  message_files store{dir, {100, 4096, 10}};
  auto list = parse_raw_json("[1,2]");
  auto r = store.append("s", *list);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::bad_request);
  r = store.append("s", message(std::string(200, 'x')));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::capacity);
  EXPECT_TRUE(store.load("s")->empty());
}

TEST_F(message_files_test, a_torn_last_line_is_skipped_and_closed_off) {
  message_files store{dir};
  ASSERT_TRUE(store.append("s", message("one")));
  {
    // A crash in the middle of the second append.
    std::ofstream out{store.file_of("s"), std::ios::app | std::ios::binary};
    out << R"({"text":"tw)";
  }
  EXPECT_EQ(texts(*store.load("s")), (std::vector<std::string>{"one"}));
  ASSERT_TRUE(store.append("s", message("three")));
  EXPECT_EQ(texts(*store.load("s")), (std::vector<std::string>{"one", "three"}));
}

TEST_F(message_files_test, a_full_session_keeps_its_newest_messages_in_order) {
  message_store_limits limits{1024, 2048, 10'000};
  message_files store{dir, limits};
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(store.append("s", message("m" + std::to_string(i))));
  auto size = fs::file_size(store.file_of("s"));
  EXPECT_LE(size, limits.session_bytes);
  auto kept = texts(*store.load("s"));
  ASSERT_GT(kept.size(), 20u);
  EXPECT_LT(kept.size(), 200u);
  EXPECT_EQ(kept.back(), "m199");
  for (size_t i = 1; i < kept.size(); ++i) // consecutive: the oldest went, nothing between
    EXPECT_EQ(std::stoi(kept[i].substr(1)), std::stoi(kept[i - 1].substr(1)) + 1);
  for (auto& e : fs::directory_iterator{dir}) // no temporary copy left behind
    EXPECT_EQ(e.path().filename(), store.file_of("s").filename());
}

TEST_F(message_files_test, a_run_gets_at_most_the_newest_loaded_messages) {
  message_files store{dir, {1024, 1 << 20, 3}};
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(store.append("s", message("m" + std::to_string(i))));
  EXPECT_EQ(texts(*store.load("s")), (std::vector<std::string>{"m2", "m3", "m4"}));
}

TEST_F(message_files_test, writers_at_once_lose_nothing_and_tear_nothing) {
  // Two stores (as serve and a CLI run on one state dir), each with its own descriptors,
  // appending to one session while it is trimmed.
  message_store_limits limits{1024, 8192, 100'000};
  auto write = [&](const std::string& who, int n) {
    message_files store{dir, limits};
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(store.append("shared", message(who + std::to_string(i))));
  };
  std::thread a{write, "a", 300};
  std::thread b{write, "b", 300};
  a.join();
  b.join();
  auto text = slurp(message_files{dir}.file_of("shared"));
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  size_t lines = 0;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1, ++lines)
    EXPECT_TRUE(parse_raw_json(text.substr(at, nl - at))) << text.substr(at, nl - at);
  auto kept = texts(*message_files{dir}.load("shared"));
  EXPECT_EQ(kept.size(), lines);
  // Each writer's messages stay in its own order, and its last one is there.
  for (std::string who : {"a", "b"}) {
    int last = -1;
    for (auto& t : kept)
      if (t[0] == who[0]) {
        EXPECT_GT(std::stoi(t.substr(1)), last);
        last = std::stoi(t.substr(1));
      }
    EXPECT_EQ(last, 299) << who;
  }
  // Without trimming, nothing at all is lost.
  std::thread c{[&] {
    message_files store{dir};
    for (int i = 0; i < 200; ++i)
      ASSERT_TRUE(store.append("whole", message("c" + std::to_string(i))));
  }};
  std::thread d{[&] {
    message_files store{dir};
    for (int i = 0; i < 200; ++i)
      ASSERT_TRUE(store.append("whole", message("d" + std::to_string(i))));
  }};
  c.join();
  d.join();
  EXPECT_EQ(message_files{dir}.load("whole")->size(), 400u);
}
