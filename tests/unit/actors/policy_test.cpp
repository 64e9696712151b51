#include "actors/exit_classifier.hpp"
#include "actors/guest_names.hpp"
#include "actors/sandbox_policy.hpp"
#include "policy_fixtures.hpp"

#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::policy;
using namespace guestflow::test;

TEST(settings, defaults_match_the_seed) {
  auto s = settings_from_env({});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->timeout_seconds, 30u);
  EXPECT_EQ(s->memory_mb, 192u);
  EXPECT_FALSE(s->allow_network);
  EXPECT_TRUE(s->allowed_domains.empty());
  EXPECT_FALSE(s->accept_egress_exceptions);
  EXPECT_FALSE(s->pinned_shape);
}

TEST(settings, malformed_values_are_refused_naming_the_variable) {
  auto s = settings_from_env({{"LANGFLOW_SANDBOX_TIMEOUT_SECONDS", "abc"}});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ec::bad_request);
  EXPECT_NE(s.error().message.find("LANGFLOW_SANDBOX_TIMEOUT_SECONDS"), std::string::npos);
  auto b = settings_from_env({{"LANGFLOW_SANDBOX_ALLOW_NETWORK", "maybe"}});
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("LANGFLOW_SANDBOX_ALLOW_NETWORK"), std::string::npos);
  EXPECT_FALSE(settings_from_env({{"LANGFLOW_SANDBOX_TIMEOUT_SECONDS", "0"}}));
  EXPECT_FALSE(settings_from_env({{"LANGFLOW_SANDBOX_MEMORY_MB", "-5"}}));
}

TEST(settings, parses_lists_booleans_and_pins) {
  auto s = settings_from_env({{"LANGFLOW_SANDBOX_ALLOWED_DOMAINS", "pypi.org, example.com"},
                              {"LANGFLOW_SANDBOX_ALLOW_NETWORK", "TRUE"},
                              {"CREATEOS_SANDBOX_SHAPE", "auto"},
                              {"GUESTFLOW_SHAPE", "s-1vcpu-512mb"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->allowed_domains, (std::vector<std::string>{"pypi.org", "example.com"}));
  EXPECT_TRUE(s->allow_network);
  EXPECT_EQ(s->pinned_shape, "s-1vcpu-512mb"); // "auto" pins nothing
}

TEST(settings, public_ingress_is_off_on_createos_until_the_operator_opts_in) {
  auto s = settings_from_env({});
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->createos_public_ingress);
  EXPECT_FALSE(ingress_allowed(*s, createos_provider()));
  EXPECT_TRUE(ingress_allowed(*s, local_provider())); // secret-guarded there
  auto on = settings_from_env({{"GUESTFLOW_CREATEOS_PUBLIC_INGRESS", "1"}});
  ASSERT_TRUE(on);
  EXPECT_TRUE(ingress_allowed(*on, createos_provider()));
  EXPECT_TRUE(ingress_allowed(*on, local_provider()));
  auto off = settings_from_env({{"GUESTFLOW_CREATEOS_PUBLIC_INGRESS", "off"}});
  ASSERT_TRUE(off);
  EXPECT_FALSE(ingress_allowed(*off, createos_provider()));
  auto bad = settings_from_env({{"GUESTFLOW_CREATEOS_PUBLIC_INGRESS", "public"}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ec::bad_request);
  EXPECT_EQ(bad.error().message,
            "GUESTFLOW_CREATEOS_PUBLIC_INGRESS: expected true or false, got 'public'");
}

TEST(policy_gate, domain_allowlist_is_refused_on_every_provider_without_support) {
  sandbox_settings s;
  s.allowed_domains = {"pypi.org"};
  for (auto p : {local_provider(), createos_provider()}) {
    auto r = admit(s, p);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ec::policy_refused);
    EXPECT_NE(r.error().message.find("hostname"), std::string::npos);
  }
}

TEST(policy_gate, network_off_on_createos_needs_the_exception_flag) {
  sandbox_settings s;
  auto r = admit(s, createos_provider());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::policy_refused);
  EXPECT_NE(r.error().message.find("169.254"), std::string::npos);
  s.accept_egress_exceptions = true;
  auto ok = admit(s, createos_provider());
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, egress_policy::deny_all());
}

TEST(policy_gate, network_off_on_local_is_enforced_deny_all) {
  auto r = admit(sandbox_settings{}, local_provider());
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, egress_policy::deny_all());
}

TEST(policy_gate, network_on_is_unrestricted) {
  sandbox_settings s;
  s.allow_network = true;
  auto r = admit(s, createos_provider());
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, egress_policy::allow_all());
}

TEST(policy_gate, timeout_above_the_provider_cap_is_refused) {
  sandbox_settings s;
  s.timeout_seconds = 7200;
  auto r = admit(s, local_provider());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::policy_refused);
  EXPECT_NE(r.error().message.find("3600"), std::string::npos);
}

TEST(policy_gate, an_isolation_is_given_where_offered_and_refused_elsewhere) {
  auto s = *settings_from_env({{"GUESTFLOW_ISOLATION", "gvisor"}});
  EXPECT_EQ(s.isolation, "gvisor");
  EXPECT_FALSE(default_local_guest(s));
  auto local = local_provider();
  local.caps.isolations = {"namespaces", "gvisor"};
  auto where = place(s, local, catalog());
  ASSERT_TRUE(where) << where.error().message;
  EXPECT_EQ(where->isolation, "gvisor");
  // A local control plane without runsc, and CreateOS (which lists none and is what it is):
  // refused, never run on a weaker guest.
  local.caps.isolations = {"namespaces"};
  s.accept_egress_exceptions = true; // CreateOS's deny-all hole is not what this is about
  for (const auto& p : {local, createos_provider()}) {
    auto r = place(s, p, catalog());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ec::policy_refused);
    EXPECT_NE(r.error().message.find("GUESTFLOW_ISOLATION=gvisor"), std::string::npos);
  }
  // Unset: the provider's default, nothing asked for.
  EXPECT_FALSE(place(sandbox_settings{}, local, catalog())->isolation);
}

TEST(shapes, smallest_shape_at_or_above_the_floor_never_rounding_down) {
  auto c = catalog();
  EXPECT_EQ(pick_shape(c, 192, 4096, std::nullopt)->id, "s-2vcpu-4gb");  // CreateOS floor
  EXPECT_EQ(pick_shape(c, 192, 256, std::nullopt)->id, "s-1vcpu-256mb"); // local floor
  EXPECT_EQ(pick_shape(c, 300, 256, std::nullopt)->id, "s-1vcpu-512mb");
  EXPECT_EQ(pick_shape(c, 5000, 256, std::nullopt)->id, "s-4vcpu-8gb");
  auto none = pick_shape(c, 20000, 256, std::nullopt);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ec::capacity);
}

TEST(shapes, a_pinned_shape_must_exist) {
  auto c = catalog();
  EXPECT_EQ(pick_shape(c, 99999, 4096, std::string{"s-1vcpu-256mb"})->id, "s-1vcpu-256mb");
  auto bad = pick_shape(c, 192, 256, std::string{"s-9vcpu-1tb"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ec::bad_request);
  EXPECT_NE(bad.error().message.find("s-9vcpu-1tb"), std::string::npos);
}

TEST(guest_names, ephemeral_names_are_22_chars_and_parse_back) {
  std::mt19937_64 rng{42};
  auto owner = names::owner_id("", "host-a", "/var/lib/gf");
  ASSERT_EQ(owner.size(), 6u);
  auto n = names::ephemeral(names::guest_kind::backend, owner, rng);
  EXPECT_EQ(n.size(), 22u);
  auto p = names::parse(n);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, names::guest_kind::backend);
  EXPECT_EQ(p->owner, owner);
  EXPECT_NE(n, names::ephemeral(names::guest_kind::backend, owner, rng));
}

TEST(guest_names, owner_is_stable_per_runtime_and_differs_between_runtimes) {
  EXPECT_EQ(names::owner_id("", "host-a", "/s1"), names::owner_id("", "host-a", "/s1"));
  EXPECT_NE(names::owner_id("", "host-a", "/s1"), names::owner_id("", "host-a", "/s2"));
  EXPECT_NE(names::owner_id("", "host-a", "/s1"), names::owner_id("", "host-b", "/s1"));
  EXPECT_EQ(names::owner_id("Farm01", "x", "y"), "farm01");
  EXPECT_EQ(names::owner_id("ab", "x", "y").size(), 6u);
}

TEST(guest_names, foreign_names_do_not_parse) {
  EXPECT_FALSE(names::parse("my-sandbox"));
  EXPECT_FALSE(names::parse("gf-q-abc123-aaaaaaaaaa"));
  EXPECT_FALSE(names::parse("gf-b-abc123-AAAAAAAAAA"));
  EXPECT_FALSE(names::parse("gf-b-abc123-aaaaaaaaa"));
}

TEST(exit_classifier, maps_timeout_and_oom) {
  EXPECT_EQ(classify_exit(0, false).exit_code, 0);
  EXPECT_EQ(classify_exit(1, false).outcome, std::nullopt);
  auto t = classify_exit(124, false); // the guest's timeout(1) TERMed the program
  EXPECT_EQ(t.exit_code, -1);
  EXPECT_EQ(t.outcome, ec::timeout);
  auto m = classify_exit(137, true); // the memory cgroup counted an OOM kill
  EXPECT_EQ(m.exit_code, 137);
  EXPECT_EQ(m.outcome, ec::oom);
}

TEST(exit_classifier, a_sigkill_the_memory_cgroup_did_not_count_is_killed_not_oom_or_timeout) {
  // sys.exit(137), kill -9 of itself or of its timeout(1) parent: whatever the host's clock
  // measured around the exec (a stalled control plane makes it long), never a timeout.
  auto o = classify_exit(137, false);
  EXPECT_EQ(o.exit_code, 137);
  EXPECT_EQ(o.outcome, ec::killed);
}

TEST(exit_classifier, wraps_commands_in_timeout_term_then_kill) {
  auto r = with_timeout(7, "python3", {"/workspace/main_ab.py"});
  EXPECT_EQ(r.cmd, "timeout");
  EXPECT_EQ(r.args, (std::vector<std::string>{"--kill-after=5", "7", "python3",
                                              "/workspace/main_ab.py"}));
}

TEST(settings, integer_settings_are_unset_when_blank_and_refused_when_malformed) {
  EXPECT_EQ(*env_uint({}, "X", 0, 10), std::nullopt);
  EXPECT_EQ(*env_uint({{"X", "  "}}, "X", 0, 10), std::nullopt);
  EXPECT_EQ(*env_uint({{"X", " 7 "}}, "X", 0, 10), std::optional<uint64_t>{7});
  for (auto bad : {"abc", "7x", "-1", "11"}) {
    auto r = env_uint({{"X", bad}}, "X", 0, 10);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find("X: expected an integer in 0..10"), std::string::npos);
  }
}

TEST(settings, only_default_settings_name_the_default_warm_pools_guest) {
  auto with = [](policy::env_map env) {
    auto s = policy::settings_from_env(env);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s && policy::default_local_guest(*s);
  };
  EXPECT_TRUE(with({}));
  EXPECT_TRUE(
      with({{"LANGFLOW_SANDBOX_MEMORY_MB", "256"}, {"CREATEOS_SANDBOX_ROOTFS", "debian:12"}}));
  EXPECT_FALSE(with({{"LANGFLOW_SANDBOX_ALLOW_NETWORK", "true"}}));
  EXPECT_FALSE(with({{"LANGFLOW_SANDBOX_MEMORY_MB", "257"}}));
  EXPECT_FALSE(with({{"GUESTFLOW_SHAPE", "s-1vcpu-256mb"}}));
  EXPECT_FALSE(with({{"CREATEOS_SANDBOX_ROOTFS", "py311"}}));
}
