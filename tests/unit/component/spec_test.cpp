// Reusable guest names and the component spec builder: plain functions, no scheduler.

#include "actors/component_spec.hpp"
#include "actors/egress_guard.hpp"
#include "actors/guest_names.hpp"
#include "actors/guest_registry.hpp"

#include <gtest/gtest.h>

using namespace guestflow;

namespace {

shape_list catalog() {
  shape_list c;
  c.data = {{"s-1vcpu-256mb", 1, 256, 2048}, {"s-1vcpu-512mb", 1, 512, 4096}};
  c.total = 2;
  return c;
}

policy::provider_info local() {
  policy::provider_info p;
  p.caps.isolation = "namespaces";
  return p;
}

component_request python_request(reuse_mode reuse) {
  component_request r;
  r.flow_id = "flow-1";
  r.component_id = "CustomComponent-abc";
  r.reuse = reuse;
  r.python = "print(1)\n";
  return r;
}

} // namespace

TEST(reusable_names, are_deterministic_22_chars_and_part_of_the_identity) {
  auto a = names::reusable("flow-1", "comp-1", "none");
  EXPECT_EQ(a.size(), 22u);
  EXPECT_EQ(a.rfind("gf-c-", 0), 0u);
  for (char c : a.substr(5))
    EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) << a;
  EXPECT_EQ(a, names::reusable("flow-1", "comp-1", "none"));
  EXPECT_NE(a, names::reusable("flow-1", "comp-1", "*")); // egress is identity
  EXPECT_NE(a, names::reusable("flow-2", "comp-1", "none"));
  EXPECT_NE(a, names::reusable("flow-1", "comp-2", "none"));
  EXPECT_NE(names::reusable("ab", "c", "none"), names::reusable("a", "bc", "none"));
  EXPECT_TRUE(names::is_reusable(a));
  // Never mistaken for an ephemeral name, so ephemeral sweeps leave it alone.
  EXPECT_FALSE(names::parse(a));
  std::mt19937_64 rng{1};
  auto eph = names::ephemeral(names::guest_kind::component, "abc123", rng);
  EXPECT_FALSE(names::is_reusable(eph));
  EXPECT_FALSE(names::is_reusable("gf-c-short"));
  EXPECT_FALSE(names::is_reusable("gf-c-ABCDEFGHIJKLMNOPQ"));
}

TEST(component_spec, reuse_flow_names_the_guest_by_key_and_pauses_just_above_the_timeout) {
  policy::sandbox_settings s;
  s.timeout_seconds = 45;
  std::mt19937_64 rng{7};
  auto p = make_component_spec(python_request(reuse_mode::flow), s, local(), catalog(),
                               "abc123", 5 << 20, rng);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->reusable);
  EXPECT_EQ(p->spec.name, names::reusable("flow-1", "CustomComponent-abc", "none"));
  EXPECT_EQ(p->spec.create.name, p->spec.name);
  EXPECT_EQ(p->spec.create.egress, egress_policy::deny_all());
  // Local: persistent, stopped (not paused) just above the timeout.
  EXPECT_TRUE(p->spec.create.persistent);
  EXPECT_TRUE(p->spec.create.ingress_enabled); // its ports have service URLs
  EXPECT_EQ(p->spec.create.idle_ttl_seconds, 105u);
  EXPECT_FALSE(p->spec.create.auto_pause_after_seconds);
  EXPECT_EQ(p->spec.create.shape, "s-1vcpu-256mb");
  ASSERT_EQ(p->spec.uploads.size(), 1u);
  EXPECT_EQ(p->spec.uploads[0].content, "print(1)\n");
  EXPECT_EQ(p->spec.uploads[0].path.rfind("/workspace/main_", 0), 0u);
  EXPECT_EQ(p->spec.command.cmd, "timeout");
  EXPECT_EQ(p->spec.command.args, (std::vector<std::string>{"--kill-after=5", "45", "python3",
                                                            p->spec.uploads[0].path}));
  EXPECT_FALSE(p->collect);
  EXPECT_EQ(reusable_auto_pause(1), 61u);
  EXPECT_EQ(reusable_auto_pause(0), 60u);
  EXPECT_EQ(reusable_auto_pause(90'000), 86'400u);

  s.allow_network = true;
  auto open = make_component_spec(python_request(reuse_mode::flow), s, local(), catalog(),
                                  "abc123", 5 << 20, rng);
  ASSERT_TRUE(open);
  EXPECT_NE(open->spec.name, p->spec.name); // a different network policy, a different guest
  EXPECT_EQ(open->spec.create.egress, egress_policy::allow_all());
}

TEST(component_spec, a_reusable_guest_on_createos_has_ingress_only_when_opted_in) {
  policy::sandbox_settings s;
  s.accept_egress_exceptions = true; // CreateOS's deny-all hole is not what this is about
  auto createos = policy::createos_provider();
  auto big = catalog();
  big.data.push_back({"s-2vcpu-4gb", 2, 4096, 8192});
  std::mt19937_64 rng{7};
  auto closed = make_component_spec(python_request(reuse_mode::flow), s, createos, big,
                                    "abc123", 5 << 20, rng);
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_TRUE(closed->reusable);
  EXPECT_FALSE(closed->spec.create.ingress_enabled); // its URL would be public
  s.createos_public_ingress = true;
  auto open = make_component_spec(python_request(reuse_mode::flow), s, createos, big, "abc123",
                                  5 << 20, rng);
  ASSERT_TRUE(open) << open.error().message;
  EXPECT_TRUE(open->spec.create.ingress_enabled);
  EXPECT_EQ(open->spec.name, closed->spec.name); // the same guest either way
  auto once = make_component_spec(python_request(reuse_mode::none), s, createos, big, "abc123",
                                  5 << 20, rng);
  ASSERT_TRUE(once);
  EXPECT_FALSE(once->spec.create.ingress_enabled); // an ephemeral guest serves no ports
}

TEST(component_spec, reuse_none_is_an_ephemeral_guest_of_this_owner) {
  policy::sandbox_settings s;
  std::mt19937_64 rng{7};
  auto p = make_component_spec(python_request(reuse_mode::none), s, local(), catalog(),
                               "abc123", 5 << 20, rng);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->reusable);
  auto parsed = names::parse(p->spec.name);
  ASSERT_TRUE(parsed) << p->spec.name;
  EXPECT_EQ(parsed->owner, "abc123");
  EXPECT_EQ(parsed->kind, names::guest_kind::backend); // the reaper owns it
  EXPECT_EQ(p->spec.create.auto_pause_after_seconds, 150u);
  EXPECT_FALSE(p->spec.create.persistent);
  EXPECT_FALSE(p->spec.create.ingress_enabled);
}

TEST(component_spec, a_command_runs_as_is_and_return_files_prepares_the_directory) {
  policy::sandbox_settings s;
  s.timeout_seconds = 10;
  component_request r;
  r.flow_id = "f";
  r.component_id = "c";
  r.argv = {"sh", "-c", "echo 'a b' > x"};
  r.return_files = true;
  std::mt19937_64 rng{3};
  auto p = make_component_spec(r, s, local(), catalog(), "abc123", 1234, rng);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->spec.uploads.empty());
  ASSERT_TRUE(p->collect);
  EXPECT_EQ(p->collect->cap_bytes, 1234u);
  EXPECT_EQ(p->collect->dir, "/workspace/artifacts");
  EXPECT_EQ(p->collect->archive.rfind("/workspace/.gf-artifacts-", 0), 0u);
  EXPECT_EQ(p->spec.command.cmd, "/bin/sh");
  ASSERT_EQ(p->spec.command.args.size(), 9u);
  EXPECT_EQ(p->spec.command.args[0], "-c");
  EXPECT_NE(p->spec.command.args[1].find("mkdir -p -- /workspace/artifacts"),
            std::string::npos);
  EXPECT_NE(p->spec.command.args[1].find("exec \"$@\""), std::string::npos);
  EXPECT_EQ(
      std::vector<std::string>(p->spec.command.args.begin() + 3, p->spec.command.args.end()),
      (std::vector<std::string>{"timeout", "--kill-after=5", "10", "sh", "-c",
                                "echo 'a b' > x"}));
}

TEST(component_spec, bad_input_and_policy_refusals_change_nothing) {
  policy::sandbox_settings s;
  std::mt19937_64 rng{3};
  auto r = python_request(reuse_mode::flow);
  r.flow_id.clear();
  EXPECT_EQ(make_component_spec(r, s, local(), catalog(), "abc123", 1, rng).error().code,
            ec::bad_request);
  r = python_request(reuse_mode::flow);
  r.argv = {"echo"};
  EXPECT_EQ(make_component_spec(r, s, local(), catalog(), "abc123", 1, rng).error().code,
            ec::bad_request); // both a program and a command
  r.python.reset();
  r.argv = {""};
  EXPECT_EQ(make_component_spec(r, s, local(), catalog(), "abc123", 1, rng).error().code,
            ec::bad_request);
  s.allowed_domains = {"pypi.org"};
  auto refused = make_component_spec(python_request(reuse_mode::flow), s, local(), catalog(),
                                     "abc123", 1, rng);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ec::policy_refused);
}

TEST(component_spec, artifact_cap_setting) {
  EXPECT_EQ(*artifact_cap_from_env({}), uint64_t{5} << 20);
  EXPECT_EQ(*artifact_cap_from_env({{"GUESTFLOW_ARTIFACT_CAP_BYTES", "1000"}}), 1000u);
  EXPECT_FALSE(artifact_cap_from_env({{"GUESTFLOW_ARTIFACT_CAP_BYTES", "5MB"}}));
  EXPECT_FALSE(artifact_cap_from_env({{"GUESTFLOW_ARTIFACT_CAP_BYTES", "0"}}));
}

TEST(egress_guard, refuses_anything_but_the_promised_policy) {
  EXPECT_FALSE(
      egress_guard::check("n", "id", egress_policy::deny_all(), egress_policy::deny_all()));
  auto drift = egress_guard::check("gf-c-x", "sb-1", egress_policy::deny_all(),
                                   egress_policy::allow_all());
  ASSERT_TRUE(drift);
  EXPECT_EQ(drift->code, ec::egress_drift);
  EXPECT_NE(drift->message.find("gf-c-x"), std::string::npos);
  EXPECT_NE(drift->message.find("'none'"), std::string::npos);
  EXPECT_NE(drift->message.find("'*'"), std::string::npos);
}

TEST(idle_seconds, is_now_minus_the_latest_of_created_resumed_and_paused) {
  sandbox_view v;
  v.created_at = "2026-01-01T00:00:00Z";
  EXPECT_EQ(*idle_seconds(v, 1767225600 + 100), 100);
  v.paused_at = "2026-01-01T00:01:00Z";
  EXPECT_EQ(*idle_seconds(v, 1767225600 + 100), 40);
  v.last_resumed_at = "2026-01-01T00:01:30.25Z";
  EXPECT_EQ(*idle_seconds(v, 1767225600 + 100), 10);
  v = {};
  v.created_at = "garbage";
  EXPECT_FALSE(idle_seconds(v, 0));
}
