// The warm pool's configuration (`--warm-pool`, GUESTFLOW_WARM_POOL): what is read, every
// refusal, the embedded defaults; and the store's `pooled` mark, old stores included.
#include "controlplane/local/embedded.hpp"
#include "controlplane/local/service/warm_pool_spec.hpp"
#include "controlplane/local/store/record_store.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <set>
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

TEST(warm_pool_spec, reads_egress_and_demand_bounds) {
  auto s = parsed("s-1vcpu-1gb@lfx#*=1..4, s-1vcpu-256mb#1.2.3.4 | 10.0.0.0/8:443=2,"
                  "s-1vcpu-256mb#none=0..3");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].key.image, "lfx");
  EXPECT_EQ(s[0].key.egress, egress_policy::allow_all()) << "'*': what allow_network asks";
  EXPECT_EQ(s[0].count, 1u) << "the floor";
  EXPECT_EQ(s[0].cap, 4u);
  EXPECT_EQ(s[1].key.egress.mode, egress_policy::kind::rules);
  EXPECT_EQ(s[1].key.egress.rules.size(), 2u);
  EXPECT_EQ(s[1].count, 2u) << "=N: a fixed pool";
  EXPECT_EQ(s[1].cap, 2u);
  EXPECT_EQ(s[2].key.egress, egress_policy::deny_all()) << "none: the default";
  EXPECT_EQ(s[2].count, 0u) << "a floor of 0: built on demand only";
  EXPECT_EQ(s[2].cap, 3u);
  for (const auto& t : s)
    EXPECT_TRUE(t.key.preload.empty()) << "never named in a spec: the image's";
  EXPECT_EQ(to_string(s), "s-1vcpu-1gb@lfx#*=1..4,s-1vcpu-256mb@debian:12#1.2.3.4|10.0.0.0/"
                          "8:443=2,s-1vcpu-256mb@debian:12=0..3");
  EXPECT_EQ(to_string(parsed(to_string(s))), to_string(s)) << "the canonical form reads back";
  EXPECT_EQ(to_string(parsed("s-1vcpu-256mb=2")), "s-1vcpu-256mb@debian:12=2")
      << "an old spec reads as before";
  EXPECT_EQ(parsed("s-1vcpu-256mb=2,s-1vcpu-256mb#*=2").size(), 2u)
      << "another egress is another pool";
}

TEST(warm_pool_spec, reads_isolation) {
  auto s = parsed("s-1vcpu-256mb+gvisor=1, s-1vcpu-256mb=2, s-1vcpu-1gb@lfx#*+GVisor=0..2,"
                  "s-1vcpu-512mb#10.0.0.0/8:443 + namespaces =1");
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].key.isolation, guest_isolation::gvisor);
  EXPECT_EQ(s[0].key.image, "debian:12");
  EXPECT_EQ(s[0].key.egress, egress_policy::deny_all());
  EXPECT_EQ(s[1].key.isolation, guest_isolation::namespaces) << "none named: namespaces";
  EXPECT_EQ(s[2].key.isolation, guest_isolation::gvisor) << "case-insensitive, after #EGRESS";
  EXPECT_EQ(s[2].key.image, "lfx");
  EXPECT_EQ(s[2].key.egress, egress_policy::allow_all());
  EXPECT_EQ(s[2].cap, 2u);
  EXPECT_EQ(s[3].key.isolation, guest_isolation::namespaces);
  EXPECT_EQ(s[3].key.egress.rules.size(), 1u) << "'+' ends the egress rules";
  EXPECT_EQ(to_string(s), "s-1vcpu-256mb@debian:12+gvisor=1,s-1vcpu-256mb@debian:12=2,"
                          "s-1vcpu-1gb@lfx#*+gvisor=0..2,s-1vcpu-512mb@debian:12#10.0.0.0/"
                          "8:443=1");
  EXPECT_EQ(to_string(parsed(to_string(s))), to_string(s)) << "the canonical form reads back";
  EXPECT_EQ(parsed("s-1vcpu-256mb+namespaces=2")[0].key, parsed("s-1vcpu-256mb=2")[0].key);
}

TEST(warm_pool_spec, refuses_isolations_it_does_not_know) {
  expect_refused("s-1vcpu-256mb+=1", "isolation '' is none of namespaces and gvisor");
  expect_refused("s-1vcpu-256mb+kvm=1", "isolation 'kvm' is none of namespaces and gvisor");
  expect_refused("s-1vcpu-256mb+gvisor+gvisor=1", "unknown shape");
  expect_refused("s-1vcpu-256mb+gvisor@debian:12=1", "isolation 'gvisor@debian:12'");
  expect_refused("s-1vcpu-256mb+gvisor=1,s-1vcpu-256mb@debian:12+GVISOR=1", "named twice");
}

TEST(warm_pool_spec, a_key_differs_in_each_field_that_shapes_a_guest) {
  pool_key base{"s-1vcpu-256mb", "debian:12", egress_policy::deny_all(), ""};
  auto rules = parse_egress({"10.0.0.0/8:443"});
  ASSERT_TRUE(rules);
  std::vector<pool_key> others(4, base);
  others[0].shape = "s-1vcpu-512mb";
  others[1].image = "lfx";
  others[2].egress = *rules;
  others[3].preload = "pandas";
  auto gvisor = base;
  gvisor.isolation = guest_isolation::gvisor;
  others.push_back(gvisor);
  auto allow = base;
  allow.egress = egress_policy::allow_all();
  others.push_back(allow);
  std::set<pool_key> keys{base};
  for (const auto& k : others) {
    EXPECT_FALSE(k == base) << to_string(k);
    EXPECT_TRUE(k != base) << to_string(k);
    EXPECT_TRUE(base < k || k < base) << to_string(k) << ": ordered apart";
    EXPECT_TRUE(keys.insert(k).second) << to_string(k);
  }
  EXPECT_TRUE(pool_key(base) == base);
  EXPECT_FALSE(base < base);
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
  expect_refused("s-1vcpu-256mb=3..1", "MIN 3 is above MAX 1");
  expect_refused("s-1vcpu-256mb=1..x", "MAX: expected an integer");
  expect_refused("s-1vcpu-256mb=..2", "MIN: expected an integer");
  expect_refused("s-1vcpu-256mb=0..65", "MAX: expected an integer in 0..64");
  expect_refused("s-1vcpu-256mb#=1", "egress");
  expect_refused("s-1vcpu-256mb#example.com=1", "hostname");
  expect_refused("s-1vcpu-256mb#*|1.2.3.4=1", "egress");
  expect_refused("s-1vcpu-256mb=1,s-1vcpu-256mb#none=1", "named twice");
  expect_refused("s-1vcpu-256mb=0..40,s-1vcpu-512mb=0..30", "70 guests in all; at most 64");
}

TEST(warm_pool_spec, the_host_default_follows_available_memory) {
  EXPECT_TRUE(default_host_warm_pool(std::nullopt).empty()) << "unknown: no pool";
  EXPECT_TRUE(default_host_warm_pool(2047).empty());
  auto one = default_host_warm_pool(2048);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 1u);
  EXPECT_EQ(one[0].cap, 4u);
  EXPECT_EQ(default_host_warm_pool(4096)[0].cap, 8u);
  EXPECT_EQ(one[0].key.shape, "s-1vcpu-256mb");
  EXPECT_EQ(default_host_warm_pool(4095)[0].count, 1u);
  EXPECT_EQ(default_host_warm_pool(4096)[0].count, 2u);
  EXPECT_EQ(default_host_warm_pool(1 << 20)[0].count, 2u) << "small, however big the host";
  EXPECT_TRUE(mem_available_mib().has_value()) << "this host has /proc/meminfo";
}

TEST(warm_pool_spec, the_executor_default_follows_available_memory) {
  pool_key ex{"s-1vcpu-1gb", "lfx", egress_policy::allow_all(), ""};
  EXPECT_FALSE(default_executor_pool(ex, std::nullopt)) << "unknown: no pool";
  EXPECT_FALSE(default_executor_pool(ex, 2047));
  auto small = default_executor_pool(ex, 2048);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->key, ex) << "the executor's guest, egress included";
  EXPECT_EQ(small->count, 1u);
  EXPECT_EQ(small->cap, 1u) << "half of 2 GiB holds one 1 GiB guest";
  EXPECT_EQ(default_executor_pool(ex, 6 * 1024)->cap, 3u);
  EXPECT_EQ(default_executor_pool(ex, 1 << 20)->cap, 8u) << "at most 8";
  ex.shape = "s-4vcpu-8gb";
  EXPECT_FALSE(default_executor_pool(ex, 12 * 1024)) << "half does not hold one";
  EXPECT_EQ(default_executor_pool(ex, 16 * 1024)->cap, 1u);
}

TEST(warm_pool_spec, serve_pools_its_sandbox_and_executor_guests) {
  auto avail = mem_available_mib();
  ASSERT_TRUE(avail && *avail >= 4096) << "this test wants a host with 4 GiB available";
  host_guests g;
  g.executor = pool_key{"s-1vcpu-512mb", "debian:12", egress_policy::allow_all(), ""};
  auto both = embedded_warm_pool(std::nullopt, warm_pool_default::host, g);
  ASSERT_TRUE(both);
  ASSERT_EQ(both->size(), 2u) << to_string(*both);
  EXPECT_EQ((*both)[0].key.shape, "s-1vcpu-256mb");
  EXPECT_FALSE((*both)[0].optional);
  EXPECT_EQ((*both)[1].key, *g.executor);
  EXPECT_TRUE((*both)[1].optional) << "dropped at start if its image is missing";
  g.sandbox = false;
  auto executor_only = embedded_warm_pool(std::nullopt, warm_pool_default::host, g);
  ASSERT_EQ(executor_only->size(), 1u) << "settings that give runs another sandbox guest";
  EXPECT_EQ((*executor_only)[0].key, *g.executor);
  // The executor in the sandbox guest: one pool, the larger bounds.
  g.sandbox = true;
  g.executor = pool_key{"s-1vcpu-256mb", "debian:12", egress_policy::deny_all(), ""};
  auto one = embedded_warm_pool(std::nullopt, warm_pool_default::host, g);
  ASSERT_EQ(one->size(), 1u) << to_string(*one);
  EXPECT_EQ((*one)[0].cap, 8u);
  EXPECT_TRUE(embedded_warm_pool(std::nullopt, warm_pool_default::none, g)->empty())
      << "a one-shot command keeps none";
  EXPECT_EQ(to_string(*embedded_warm_pool(std::string{"s-1vcpu-512mb=3"},
                                          warm_pool_default::host, g)),
            "s-1vcpu-512mb@debian:12=3")
      << "the variable replaces every default";
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
