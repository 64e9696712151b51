#include "actors/code_spec.hpp"
#include "policy_fixtures.hpp"

#include <gtest/gtest.h>
#include <regex>

using namespace guestflow;
using namespace guestflow::test;

namespace {

const std::string name = "gf-b-abc123-aaaaaaaaaa";

} // namespace

TEST(code_spec, runs_the_program_from_its_own_path_under_timeout_term_then_kill) {
  std::mt19937_64 rng{1};
  policy::sandbox_settings s;
  s.timeout_seconds = 45;
  auto spec = make_code_spec({"print('hi')\n", {{"K", "V"}}}, s, local_provider(), catalog(),
                             name, rng);
  ASSERT_TRUE(spec) << spec.error().message;
  ASSERT_EQ(spec->uploads.size(), 1u);
  auto path = spec->uploads[0].path;
  EXPECT_TRUE(std::regex_match(path, std::regex{"/workspace/main_[0-9a-f]{12}\\.py"})) << path;
  EXPECT_EQ(spec->uploads[0].content, "print('hi')\n");
  EXPECT_EQ(spec->command.cmd, "timeout");
  EXPECT_EQ(spec->command.args,
            (std::vector<std::string>{"--kill-after=5", "45", "python3", path}));
  EXPECT_EQ(spec->timeout_seconds, 45u);
  EXPECT_EQ(spec->name, name);
  EXPECT_EQ(spec->create.name, name);
  EXPECT_EQ(spec->create.shape, "s-1vcpu-256mb"); // 192 MB asked, the local floor 256
  EXPECT_EQ(spec->create.envs, (std::map<std::string, std::string>{{"K", "V"}}));
  EXPECT_EQ(spec->create.egress, egress_policy::deny_all()); // network off by default
  EXPECT_FALSE(spec->create.rootfs);                         // the local provider's own
  // Two runs never share a path.
  auto again = make_code_spec({"x", {}}, s, local_provider(), catalog(), name, rng);
  ASSERT_TRUE(again);
  EXPECT_NE(again->uploads[0].path, path);
}

TEST(code_spec, auto_pause_is_the_backstop_max_of_60_and_timeout_plus_120) {
  std::mt19937_64 rng{2};
  for (auto [timeout, expected] : std::vector<std::pair<uint32_t, uint32_t>>{
           {1, 121}, {30, 150}, {3600, 3720}, {86'400, 86'400}}) {
    policy::sandbox_settings s;
    s.timeout_seconds = timeout;
    auto p = local_provider();
    p.caps.max_timeout_seconds = 86'400;
    auto spec = make_code_spec({"x", {}}, s, p, catalog(), name, rng);
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->create.auto_pause_after_seconds, expected) << "timeout " << timeout;
  }
  EXPECT_EQ(backstop_auto_pause(0), 120u);
}

TEST(code_spec, createos_defaults_the_image_to_the_seeds_and_honours_a_configured_one) {
  std::mt19937_64 rng{3};
  policy::sandbox_settings s;
  s.allow_network = true; // CreateOS refuses network off without the exception flag
  auto spec = make_code_spec({"x", {}}, s, policy::createos_provider(), catalog(), name, rng);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->create.rootfs, "devbox:1");
  EXPECT_EQ(spec->create.shape, "s-2vcpu-4gb"); // the 4096 MiB floor
  s.rootfs = "my-image:7";
  spec = make_code_spec({"x", {}}, s, policy::createos_provider(), catalog(), name, rng);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->create.rootfs, "my-image:7");
}

TEST(code_spec, refusals_build_nothing) {
  std::mt19937_64 rng{4};
  policy::sandbox_settings s;
  s.allowed_domains = {"pypi.org"};
  auto refused = make_code_spec({"x", {}}, s, local_provider(), catalog(), name, rng);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ec::policy_refused);
  auto bad_env =
      make_code_spec({"x", {{"A=B", "1"}}}, {}, local_provider(), catalog(), name, rng);
  ASSERT_FALSE(bad_env);
  EXPECT_EQ(bad_env.error().code, ec::bad_request);
}
