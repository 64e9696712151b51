// The warm pool's configuration (`--warm-pool`, GUESTFLOW_WARM_POOL): what is read, every
// refusal, the embedded defaults; and the store's `pooled` mark, old stores included.
#include "controlplane/local/embedded.hpp"
#include "controlplane/local/service/warm_pool_spec.hpp"
#include "controlplane/local/store/record_store.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

namespace guestflow::local {
namespace {

warm_pool_spec parsed(std::string_view text) {
  auto s = parse_warm_pool_spec(text, "--warm-pool");
  EXPECT_TRUE(s) << text << ": " << s.error().message;
  return s ? *s : warm_pool_spec{};
}

/// The refusal of `text`: bad_request, naming the source, containing `needle`.
void expect_refused(std::string_view text, const std::string& needle) {
  auto s = parse_warm_pool_spec(text, "GUESTFLOW_WARM_POOL");
  ASSERT_FALSE(s) << "'" << text << "' was accepted as " << to_string(*s);
  EXPECT_EQ(s.error().code, ec::bad_request);
  EXPECT_EQ(s.error().message.rfind("GUESTFLOW_WARM_POOL: ", 0), 0u) << s.error().message;
  EXPECT_NE(s.error().message.find(needle), std::string::npos)
      << "expected '" << needle << "' in: " << s.error().message;
}

TEST(warm_pool_spec, reads_shapes_images_and_counts) {
  auto s = parsed(" s-1vcpu-256mb=4 , s-1vcpu-512mb@py-3.11:slim = 1,s-1vcpu-1gb=0");
  ASSERT_EQ(s.size(), 2u) << "an entry of 0 is dropped";
  EXPECT_EQ(s[0].key.shape, "s-1vcpu-256mb");
  EXPECT_EQ(s[0].key.image, "debian:12") << "no image: the built-in one";
  EXPECT_EQ(s[0].count, 4u);
  EXPECT_EQ(s[1].key.shape, "s-1vcpu-512mb");
  EXPECT_EQ(s[1].key.image, "py-3.11:slim");
  EXPECT_EQ(s[1].count, 1u);
  EXPECT_EQ(to_string(s), "s-1vcpu-256mb@debian:12=4,s-1vcpu-512mb@py-3.11:slim=1");
  EXPECT_EQ(to_string(parsed(to_string(s))), to_string(s)) << "the canonical form reads back";
}

TEST(warm_pool_spec, empty_zero_off_and_none_disable_it) {
  for (auto text : {"", "  ", "0", "off", "OFF", " none ", "s-1vcpu-256mb=0"})
    EXPECT_TRUE(parsed(text).empty()) << "'" << text << "'";
  EXPECT_EQ(to_string(warm_pool_spec{}), "off");
}

TEST(warm_pool_spec, refuses_what_it_cannot_read) {
  expect_refused("s-1vcpu-256mb", "no '=N'");
  expect_refused("s-1vcpu-256mb:4", "no '=N'");
  expect_refused("=2", "no shape");
  expect_refused("@debian:12=2", "no shape");
  expect_refused("s-9vcpu-1tb=1", "unknown shape 's-9vcpu-1tb'");
  expect_refused("S-1VCPU-256MB=1", "unknown shape");
  expect_refused("s-1vcpu-256mb@=1", "image:");
  expect_refused("s-1vcpu-256mb@Debian=1", "image:");
  expect_refused("s-1vcpu-256mb@../etc=1", "image:");
  expect_refused("s-1vcpu-256mb=", "N: expected an integer");
  expect_refused("s-1vcpu-256mb=-1", "N: expected an integer");
  expect_refused("s-1vcpu-256mb=two", "N: expected an integer");
  expect_refused("s-1vcpu-256mb=1.5", "N: expected an integer");
  expect_refused("s-1vcpu-256mb=65", "N: expected an integer in 0..64");
  expect_refused("s-1vcpu-256mb=1,s-1vcpu-256mb@debian:12=2", "named twice");
  expect_refused("s-1vcpu-256mb=40,s-1vcpu-512mb=30", "70 guests in all; at most 64");
  expect_refused("s-1vcpu-256mb=1,oops", "'oops': no '=N'");
}

TEST(warm_pool_spec, the_host_default_follows_available_memory) {
  EXPECT_TRUE(default_host_warm_pool(std::nullopt).empty()) << "unknown: no pool";
  EXPECT_TRUE(default_host_warm_pool(2047).empty());
  auto one = default_host_warm_pool(2048);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 1u);
  EXPECT_EQ(one[0].key.shape, "s-1vcpu-256mb");
  EXPECT_EQ(default_host_warm_pool(4095)[0].count, 1u);
  EXPECT_EQ(default_host_warm_pool(4096)[0].count, 2u);
  EXPECT_EQ(default_host_warm_pool(1 << 20)[0].count, 2u) << "small, however big the host";
  EXPECT_TRUE(mem_available_mib().has_value()) << "this host has /proc/meminfo";
}

TEST(warm_pool_spec, each_command_gets_its_embedded_pool) {
  auto set = std::optional<std::string>{"s-1vcpu-512mb=3"};
  auto host = embedded_warm_pool(std::nullopt, warm_pool_default::host);
  ASSERT_TRUE(host);
  EXPECT_EQ(to_string(*host), to_string(default_host_warm_pool(mem_available_mib())));
  auto one_shot = embedded_warm_pool(std::nullopt, warm_pool_default::none);
  ASSERT_TRUE(one_shot);
  EXPECT_TRUE(one_shot->empty()) << "code/run/component: no pool unless asked for";
  EXPECT_TRUE(embedded_warm_pool(std::string{"  "}, warm_pool_default::none)->empty())
      << "blank is unset";
  for (auto d : {warm_pool_default::none, warm_pool_default::host})
    EXPECT_EQ(to_string(*embedded_warm_pool(set, d)), "s-1vcpu-512mb@debian:12=3");
  EXPECT_TRUE(embedded_warm_pool(std::string{"0"}, warm_pool_default::host)->empty());
  EXPECT_TRUE(embedded_warm_pool(set, warm_pool_default::off)->empty()) << "reap builds none";
  auto bad = embedded_warm_pool(std::string{"nope"}, warm_pool_default::none);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("GUESTFLOW_WARM_POOL"), std::string::npos);
}

guest_record pool_record(const std::string& id) {
  guest_record r;
  r.id = id;
  r.name = id;
  r.status = sandbox_status::running;
  r.shape = "s-1vcpu-256mb";
  r.rootfs = "debian:12";
  r.egress = egress_policy::deny_all();
  r.created_at = "2026-12-02T00:00:00.000Z";
  r.runtime.id = id;
  r.pooled = true;
  return r;
}

TEST(warm_pool_store, keeps_the_pooled_mark_across_reopen) {
  test_support::temp_dir d{"guestflow-pool-store"};
  auto file = d.path() / "control-plane.db";
  {
    auto store = record_store::open(file);
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->put(pool_record("sb-pooled")));
    auto taken = pool_record("sb-taken");
    taken.pooled = false;
    ASSERT_TRUE((*store)->put(taken));
  }
  auto store = record_store::open(file);
  ASSERT_TRUE(store);
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  for (const auto& r : *all)
    EXPECT_EQ(r.pooled, r.id == "sb-pooled") << r.id;
}

TEST(warm_pool_store, a_store_from_before_the_pool_gains_the_column) {
  test_support::temp_dir d{"guestflow-pool-store"};
  auto file = d.path() / "control-plane.db";
  {
    // The schema as it was, with one guest in it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    const char* old = R"sql(
      CREATE TABLE guests (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, name TEXT NOT NULL,
        status TEXT NOT NULL, shape TEXT NOT NULL, rootfs TEXT NOT NULL, egress TEXT NOT NULL,
        auto_pause INTEGER, ingress INTEGER NOT NULL, created_at TEXT NOT NULL,
        paused_at TEXT, last_resumed_at TEXT, note TEXT NOT NULL, init_pid INTEGER NOT NULL,
        init_start_time INTEGER NOT NULL, cgroup_dirs TEXT NOT NULL, netns TEXT NOT NULL,
        workspace TEXT NOT NULL, ip TEXT NOT NULL);
      INSERT INTO guests VALUES ('sb-old', 1, 'old', 'running', 's-1vcpu-256mb', 'debian:12',
        '240.0.0.0/4', NULL, 0, '2026-12-01T00:00:00.000Z', NULL, NULL, '', 42, 7, '', '',
        '', '');)sql";
    ASSERT_EQ(sqlite3_exec(db, old, nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = record_store::open(file);
  ASSERT_TRUE(store) << store.error().message;
  auto all = (*store)->load_all();
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].id, "sb-old");
  EXPECT_FALSE((*all)[0].pooled) << "an old guest is nobody's pool guest";
  ASSERT_TRUE((*store)->put(pool_record("sb-new")));
  auto again = (*store)->load_all();
  ASSERT_TRUE(again);
  ASSERT_EQ(again->size(), 2u);
  for (const auto& r : *again)
    EXPECT_EQ(r.pooled, r.id == "sb-new") << r.id;
}

} // namespace
} // namespace guestflow::local
