// The coordinator's plain classes: replay buffer, admission, executor settings and the
// execution spec of a flow run.

#include "actors/admission.hpp"
#include "actors/event_log.hpp"
#include "actors/executor_settings.hpp"
#include "actors/flow_spec.hpp"
#include "tests/support/slurp.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow {
namespace {

run_event line(std::string text) {
  run_event e;
  e.type = run_event::kind::stdout_line;
  e.line = std::move(text);
  return e;
}

TEST(event_log, stamps_gapless_seqs_and_evicts_oldest_past_the_budget) {
  auto sample = line("0123456789");
  sample.run_id = "run-x";
  auto size = encode(sample).size() + 1; // every event below encodes alike (seq 0..4)
  event_log log{3 * size};
  for (int i = 0; i < 5; ++i) {
    auto& e = log.append(line("012345678" + std::to_string(i % 10)), "run-x");
    EXPECT_EQ(e.seq, static_cast<uint64_t>(i));
    EXPECT_EQ(e.run_id, "run-x");
  }
  EXPECT_EQ(log.next(), 5u);
  EXPECT_EQ(log.first(), 2u);
  EXPECT_EQ(log.size(), 3u);
  EXPECT_EQ(log.bytes(), 3 * size);
  std::vector<uint64_t> seqs;
  log.replay(0, [&](const run_event& e) { seqs.push_back(e.seq); });
  EXPECT_EQ(seqs, (std::vector<uint64_t>{2, 3, 4}));
  seqs.clear();
  log.replay(4, [&](const run_event& e) { seqs.push_back(e.seq); });
  EXPECT_EQ(seqs, std::vector<uint64_t>{4});
}

TEST(event_log, keeps_the_newest_event_even_alone_over_the_budget) {
  event_log log{8};
  log.append(line("a"), "r");
  log.append(line(std::string(100, 'b')), "r");
  EXPECT_EQ(log.size(), 1u);
  EXPECT_EQ(log.first(), 1u);
  EXPECT_EQ(log.next(), 2u);
}

TEST(admission, starts_queues_fifo_and_refuses_beyond_the_queue) {
  admission a{2, 2};
  using v = admission::verdict;
  EXPECT_EQ(a.offer("a"), v::start);
  EXPECT_EQ(a.offer("b"), v::start);
  EXPECT_EQ(a.offer("c"), v::queued);
  EXPECT_EQ(a.offer("d"), v::queued);
  EXPECT_EQ(a.offer("e"), v::refused);
  EXPECT_EQ(a.inflight(), 2u);
  EXPECT_EQ(a.queued(), 2u);
  EXPECT_EQ(a.release("d"), std::vector<std::string>{}); // a queued run left: no start
  EXPECT_EQ(a.release("a"), std::vector<std::string>{"c"});
  EXPECT_EQ(a.release("zz"), std::vector<std::string>{}); // unknown: ignored
  EXPECT_EQ(a.inflight(), 2u);
  EXPECT_EQ(a.queued(), 0u);
  EXPECT_EQ(a.offer("f"), v::queued);
  EXPECT_EQ(a.release("b"), std::vector<std::string>{"f"});
}

TEST(admission, never_overtakes_the_queue) {
  admission a{1, 5};
  EXPECT_EQ(a.offer("a"), admission::verdict::start);
  EXPECT_EQ(a.offer("b"), admission::verdict::queued);
  EXPECT_EQ(a.release("a"), std::vector<std::string>{"b"});
  EXPECT_EQ(a.offer("c"), admission::verdict::queued);
}

TEST(admission, runs_that_cannot_queue_take_a_slot_or_nothing_and_queued_flows_go_first) {
  admission a{2, 1};
  EXPECT_FALSE(a.full());
  EXPECT_TRUE(a.take("sandbox-1"));
  EXPECT_EQ(a.offer("flow-1"), admission::verdict::start);
  EXPECT_TRUE(a.full());
  EXPECT_FALSE(a.take("sandbox-2")); // refused at once, never queued
  EXPECT_EQ(a.offer("flow-2"), admission::verdict::queued);
  EXPECT_EQ(a.inflight(), 2u);
  // A sandbox run's end starts the queued flow (its owner must be told), not another call.
  EXPECT_EQ(a.release("sandbox-1"), (std::vector<std::string>{"flow-2"}));
  EXPECT_FALSE(a.take("sandbox-3"));
  EXPECT_TRUE(a.release("flow-1").empty());
  EXPECT_TRUE(a.take("sandbox-3"));
  EXPECT_EQ(a.inflight(), 2u);
}

TEST(admission, a_draining_slot_is_held_until_released_and_a_run_waits_for_it) {
  admission a{1, 0};
  using v = admission::verdict;
  EXPECT_EQ(a.offer("flow-1"), v::start);
  EXPECT_TRUE(a.full());
  EXPECT_TRUE(a.full_with_queue());
  int started = 0;
  EXPECT_EQ(a.take_or_wait("sandbox-1", [&] { ++started; }), v::refused); // nothing drains
  // flow-1 answered; its guest is being deleted: the slot is still taken (the guest counts),
  // but one run may wait for it instead of being refused.
  a.draining("flow-1");
  a.draining("nobody"); // not holding a slot: ignored
  EXPECT_EQ(a.inflight(), 1u);
  EXPECT_FALSE(a.full());
  EXPECT_FALSE(a.full_with_queue());
  EXPECT_EQ(a.take_or_wait("sandbox-1", [&] { ++started; }), v::queued);
  EXPECT_EQ(started, 0);
  EXPECT_TRUE(a.full()); // one draining slot, one waiter: no more
  EXPECT_EQ(a.take_or_wait("sandbox-2", [&] { started += 10; }), v::refused);
  EXPECT_EQ(a.offer("flow-2"), v::refused);
  EXPECT_FALSE(a.take("session-1")); // a session command never waits
  // The delete answered: the waiter gets the slot and is started here, not returned.
  EXPECT_TRUE(a.release("flow-1").empty());
  EXPECT_EQ(started, 1);
  EXPECT_EQ(a.inflight(), 1u);
  EXPECT_EQ(a.queued(), 0u);
  // A flow run waits for a draining slot through its queue (returned to its owner).
  a.draining("sandbox-1");
  EXPECT_EQ(a.offer("flow-3"), v::queued);
  EXPECT_EQ(a.release("sandbox-1"), std::vector<std::string>{"flow-3"});
  // A waiter that goes before its slot came is forgotten with its place.
  a.draining("flow-3");
  EXPECT_EQ(a.take_or_wait("sandbox-3", [&] { started += 100; }), v::queued);
  EXPECT_TRUE(a.release("sandbox-3").empty());
  EXPECT_TRUE(a.release("flow-3").empty());
  EXPECT_EQ(started, 1);
  EXPECT_EQ(a.inflight(), 0u);
}

TEST(executor_settings, defaults_fit_the_host) {
  host_limits big{19'283}; // 80% of 24 GiB
  auto s = executor_settings_from_env({}, big);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->shape, "s-4vcpu-8gb"); // the seed's, where the host holds it
  EXPECT_EQ(s->timeout_seconds, 600u);
  EXPECT_EQ(s->egress, egress_policy::deny_all()); // egress only when configured
  EXPECT_FALSE(s->rootfs);
  EXPECT_FALSE(s->install_lfx);
  EXPECT_TRUE(s->pip.empty());
  EXPECT_EQ(s->max_inflight, 75u); // the budget in 256 MiB guests, not 10,000
  EXPECT_EQ(s->max_queued, 0u);    // never an unbounded wait
  EXPECT_EQ(s->executor, "auto");
  // A small host: a run's guest fits its budget, and few runs at once.
  host_limits small{3'276}; // 80% of 4 GiB
  auto t = executor_settings_from_env({}, small);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape, "s-2vcpu-2gb");
  EXPECT_EQ(t->max_inflight, 12u);
  EXPECT_EQ(executor_settings_from_env({}, host_limits{100})->max_inflight, 2u);
  EXPECT_EQ(executor_settings_from_env({}, host_limits{100})->shape, "s-1vcpu-256mb");
  // CreateOS guests are not on this host: the seed's shape stays.
  auto remote = executor_settings_from_env({{"CREATEOS_SANDBOX_API_KEY", "k"}}, small);
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->shape, "s-4vcpu-8gb");
  // What a user sets is taken as given.
  auto explicit_ = executor_settings_from_env(
      {{"CREATEOS_EXECUTOR_SHAPE", "s-4vcpu-8gb"}, {"CREATEOS_EXECUTOR_EGRESS", "*"}}, small);
  ASSERT_TRUE(explicit_);
  EXPECT_EQ(explicit_->shape, "s-4vcpu-8gb");
  EXPECT_EQ(explicit_->egress, egress_policy::allow_all());
  EXPECT_GT(read_host_limits().memory_budget_mib, 0u);
}

TEST(executor_settings, reads_every_variable) {
  auto s =
      executor_settings_from_env({{"CREATEOS_EXECUTOR_SHAPE", " s-2vcpu-4gb "},
                                  {"CREATEOS_EXECUTOR_TIMEOUT_SECONDS", "90"},
                                  {"CREATEOS_EXECUTOR_EGRESS", "10.0.0.0/8, 1.2.3.4:443"},
                                  {"CREATEOS_EXECUTOR_ROOTFS", "langflow-1.5"},
                                  {"CREATEOS_EXECUTOR_INSTALL_LFX", "true"},
                                  {"CREATEOS_EXECUTOR_PIP", "lfx==0.1, langchain-experimental"},
                                  {"GUESTFLOW_MAX_INFLIGHT", "3"},
                                  {"GUESTFLOW_MAX_QUEUED", "0"},
                                  {"GUESTFLOW_RUN_RETENTION_MB", "64"},
                                  {"GUESTFLOW_RUNNER_EXECUTOR", " lfx "}});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->shape, "s-2vcpu-4gb");
  EXPECT_EQ(s->timeout_seconds, 90u);
  EXPECT_EQ(to_strings(s->egress), (std::vector<std::string>{"1.2.3.4:443", "10.0.0.0/8"}));
  EXPECT_EQ(s->rootfs, std::optional<std::string>{"langflow-1.5"});
  EXPECT_TRUE(s->install_lfx);
  EXPECT_EQ(s->pip, (std::vector<std::string>{"lfx==0.1", "langchain-experimental"}));
  EXPECT_EQ(s->max_inflight, 3u);
  EXPECT_EQ(s->max_queued, 0u);
  EXPECT_EQ(s->retention_bytes, uint64_t{64} << 20);
  EXPECT_EQ(s->executor, "lfx");
  EXPECT_EQ(executor_settings_from_env({})->retention_bytes, uint64_t{64} << 20);
  auto deny = executor_settings_from_env({{"CREATEOS_EXECUTOR_EGRESS", "240.0.0.0/4"}});
  ASSERT_TRUE(deny);
  EXPECT_EQ(deny->egress, egress_policy::deny_all());
}

TEST(executor_settings, malformed_values_are_refused_naming_the_variable) {
  for (auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"CREATEOS_EXECUTOR_TIMEOUT_SECONDS", "abc"},
           {"CREATEOS_EXECUTOR_TIMEOUT_SECONDS", "0"},
           {"CREATEOS_EXECUTOR_TIMEOUT_SECONDS", "86401"},
           {"CREATEOS_EXECUTOR_EGRESS", "api.openai.com"},
           {"CREATEOS_EXECUTOR_EGRESS", "*,10.0.0.0/8"},
           {"CREATEOS_EXECUTOR_INSTALL_LFX", "maybe"},
           {"CREATEOS_EXECUTOR_PIP", "lfx --index-url=http://evil"},
           {"GUESTFLOW_MAX_INFLIGHT", "0"},
           {"GUESTFLOW_MAX_QUEUED", "-1"},
           {"GUESTFLOW_RUN_RETENTION_MB", "lots"},
           {"GUESTFLOW_RUNNER_EXECUTOR", "fastest"},
       }) {
    auto s = executor_settings_from_env({{key, value}});
    ASSERT_FALSE(s) << key << "=" << value;
    EXPECT_EQ(s.error().code, ec::bad_request);
    EXPECT_NE(s.error().message.find(key), std::string::npos) << s.error().message;
  }
}

run_request request_for(std::optional<uint32_t> timeout = std::nullopt) {
  auto r = decode<run_request>(R"({"flow":{"nodes":[{"id":"A","data":{"type":"ChatInput"}}],)"
                               R"("edges":[]},"outputs":["A"]})");
  EXPECT_TRUE(r);
  r->timeout_seconds = timeout;
  return *r;
}

const std::vector<guest_asset> assets{
    {"lfx_path.py", "# lfx"}, {"runner.py", "# runner"}, {"unpack_run.py", "# unpack"}};

/// A run bundle's files in order, as (name, bytes): each a "<size> <name>\n" line, then
/// its bytes. An empty name marks a bundle that does not parse.
std::vector<std::pair<std::string, std::string>> bundle_files(std::string_view b) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!b.empty()) {
    auto nl = b.find('\n');
    auto sp = b.find(' ');
    if (nl == std::string_view::npos || sp > nl) return {{"", ""}};
    auto size = std::stoul(std::string{b.substr(0, sp)});
    if (nl + 1 + size > b.size()) return {{"", ""}};
    out.emplace_back(std::string{b.substr(sp + 1, nl - sp - 1)},
                     std::string{b.substr(nl + 1, size)});
    b.remove_prefix(nl + 1 + size);
  }
  return out;
}

/// `argv` run to its end with stdout into `out`: its exit status, or -1.
int run_to_file(const std::vector<std::string>& argv, const std::filesystem::path& out) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::dup2(fd, 1) < 0) ::_exit(126);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(flow_spec, builds_the_execution_of_a_run) {
  executor_settings s{};
  s.rootfs = "tpl";
  s.egress = egress_policy::deny_all();
  s.install_lfx = true;
  s.pip = {"x"};
  normalized_inputs in;
  in.inputs.push_back(run_input{std::string{"hi"}, "any", std::nullopt, {}});
  in.runtime_options = raw_json{R"({"max_iterations":3})"};
  auto spec = make_flow_spec(request_for(), in, s, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->name, "gf-x-abc123-0123456789");
  EXPECT_EQ(spec->create.name, std::optional<std::string>{"gf-x-abc123-0123456789"});
  EXPECT_EQ(spec->create.shape, "s-4vcpu-8gb");
  EXPECT_EQ(spec->create.rootfs, std::optional<std::string>{"tpl"});
  EXPECT_EQ(spec->create.egress, egress_policy::deny_all());
  EXPECT_EQ(spec->create.envs.at("PYTHONUNBUFFERED"), "1");
  EXPECT_EQ(spec->create.auto_pause_after_seconds, std::optional<uint32_t>{720});
  // One upload: the runner's files (not the unpacker, passed as the command) and the spec.
  ASSERT_EQ(spec->uploads.size(), 1u);
  EXPECT_EQ(spec->uploads[0].path, "/workspace/.run-bundle");
  auto files = bundle_files(spec->uploads[0].content.str());
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], (std::pair<std::string, std::string>{"lfx_path.py", "# lfx"}));
  EXPECT_EQ(files[1], (std::pair<std::string, std::string>{"runner.py", "# runner"}));
  EXPECT_EQ(files[2].first, "spec.json");
  EXPECT_EQ(files[2].second,
            R"({"graph":{"nodes":[{"id":"A","data":{"type":"ChatInput"}}],"edges":[]},)"
            R"("inputs":[{"input_value":"hi","type":"any","components":[]}],"outputs":["A"],)"
            R"("runtime_options":{"max_iterations":3},"install_lfx":true,"pip":["x"],)"
            R"("executor":"auto"})");
  EXPECT_EQ(spec->command.cmd, "timeout");
  EXPECT_EQ(spec->command.args,
            (std::vector<std::string>{"--kill-after=5", "600", "python3", "-c", "# unpack",
                                      "/workspace/.run-bundle", "/tmp/run"}));
  EXPECT_EQ(spec->timeout_seconds, 600u);
  EXPECT_TRUE(spec->stream);
}

TEST(flow_spec, a_file_embedded_gzipped_travels_gzipped) {
  const std::vector<guest_asset> zipped{{"runner.py", "# runner", "GZ"},
                                        {"unpack_run.py", "# unpack", "GZ2"}};
  auto spec = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-0123456789", zipped);
  ASSERT_TRUE(spec) << spec.error().message;
  auto files = bundle_files(spec->uploads[0].content.str());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], (std::pair<std::string, std::string>{"runner.py.gz", "GZ"}));
  EXPECT_EQ(files[1].first, "spec.json");
  EXPECT_EQ(spec->command.args[4], "# unpack") << "the command is the plain source";
}

TEST(flow_spec, a_bundle_for_this_host_carries_the_plain_files) {
  const std::vector<guest_asset> zipped{{"runner.py", "# runner", "GZ"},
                                        {"unpack_run.py", "# unpack", "GZ2"}};
  auto head = flow_bundle_head(zipped, false);
  auto spec = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-0123456789", zipped, head);
  ASSERT_TRUE(spec) << spec.error().message;
  auto files = bundle_files(spec->uploads[0].content.str());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], (std::pair<std::string, std::string>{"runner.py", "# runner"}));
  EXPECT_EQ(files[1].first, "spec.json");
}

TEST(flow_spec, only_a_bundle_that_crosses_a_wire_is_gzipped) {
  auto local = [](std::string url) {
    cp::endpoint ep;
    ep.base_url = std::move(url);
    return ep;
  };
  EXPECT_FALSE(gzip_bundle_for(local("http://127.0.0.1:8470")));
  EXPECT_FALSE(gzip_bundle_for(local("http://[::1]:8470")));
  EXPECT_FALSE(gzip_bundle_for(local("http://localhost:8470/api")));
  EXPECT_FALSE(gzip_bundle_for(local("unix:///run/guestflow/cp.sock")));
  EXPECT_TRUE(gzip_bundle_for(local("https://10.0.0.7:8470")));
  EXPECT_TRUE(gzip_bundle_for(local("http://127.0.0.1:1,http://127.0.0.1:2"))) << "a fleet";
  EXPECT_TRUE(gzip_bundle_for(local("etcd://127.0.0.1:2379"))) << "a fleet";
  auto createos = local("http://127.0.0.1:9");
  createos.kind = cp::provider::createos;
  EXPECT_TRUE(gzip_bundle_for(createos));
}

TEST(flow_spec, every_run_shares_the_embedded_part_of_its_bundle) {
  auto head = flow_bundle_head(assets);
  auto a = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-0123456789", assets, head);
  auto b = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-9876543210", assets, head);
  ASSERT_TRUE(a && b);
  auto& ca = a->uploads[0].content;
  auto& cb = b->uploads[0].content;
  // The runner's files are the head's bytes, not a copy per run; only spec.json is the run's.
  EXPECT_EQ(ca.pieces()[0].data(), head.pieces()[1].data());
  EXPECT_EQ(cb.pieces()[0].data(), head.pieces()[1].data());
  auto own = ca.pieces()[1]; // "<size> spec.json\n" and the spec
  EXPECT_EQ(own.substr(own.find(' ') + 1, 10), "spec.json\n");
  // The same bundle as one made without a shared head.
  auto whole = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(whole);
  EXPECT_EQ(ca.str(), whole->uploads[0].content.str());
  auto files = bundle_files(ca.str());
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[2].first, "spec.json");
}

TEST(flow_spec, the_guest_unpacks_the_bundle_and_runs_the_runner_as_python3_runs_it) {
  // The real embedded files, unpacked by the real unpacker from a directory standing in for
  // /workspace into one standing in for /tmp/run: every file comes back byte for byte, the
  // bundle is gone (its directory, the workspace, stays), and the runner runs the flow.
  auto flow = test_support::slurp(GUESTFLOW_SOURCE_DIR "/examples/flows/hello.json");
  auto req = decode<run_request>(R"({"flow":)" + flow + "}");
  ASSERT_TRUE(req) << req.error().message;
  auto spec = make_flow_spec(*req, {}, {}, "gf-x-abc123-0123456789", guest_assets());
  ASSERT_TRUE(spec) << spec.error().message;
  test_support::temp_dir dir;
  auto upload = dir.path() / "upload";
  auto run = dir.path() / "run";
  std::filesystem::create_directory(upload);
  auto bundle = upload / ".run-bundle";
  {
    std::ofstream f{bundle, std::ios::binary};
    f << spec->uploads[0].content.str();
  }
  auto args = spec->command.args; // timeout --kill-after=5 N python3 -c SOURCE BUNDLE DIR
  ASSERT_EQ(args.size(), 7u);
  args[5] = bundle.string();
  args[6] = run.string();
  auto out = dir.path() / "stdout";
  EXPECT_EQ(run_to_file({args.begin() + 2, args.end()}, out), 0);
  auto frames = test_support::slurp(out.string());
  EXPECT_NE(frames.find(R"("t":"note")"), std::string::npos) << frames;
  EXPECT_EQ(frames.substr(frames.rfind('{')), "{\"t\":\"done\"}\n") << frames;
  EXPECT_TRUE(std::filesystem::is_directory(upload));
  EXPECT_TRUE(std::filesystem::is_empty(upload)) << "the bundle read, then removed";
  EXPECT_EQ(std::filesystem::status(run).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  for (auto& a : guest_assets()) {
    auto there = run / std::string{a.name};
    // Every runner module is unpacked; the unpacker (the command) and the sessions' tool
    // are not in a flow's bundle.
    if (a.name == "unpack_run.py" || a.name == "session_files.py")
      EXPECT_FALSE(std::filesystem::exists(there)) << a.name;
    else
      EXPECT_EQ(test_support::slurp(there.string()), a.content) << a.name;
  }
  EXPECT_NE(test_support::slurp((run / "spec.json").string()).find(R"("graph")"),
            std::string::npos);
}

TEST(flow_spec, runtime_state_goes_in_spec_json_and_secrets_in_their_own_file) {
  auto req = request_for();
  req.session_id = "sess-1";
  req.user_id = "user-7";
  req.context = raw_json{R"({"k":"v"})"};
  req.tweaks = raw_json{R"({"A":{"input_value":"x"}})"};
  req.history = std::vector<raw_json>{raw_json{R"({"text":"earlier","sender":"User"})"}};
  req.variables.set("OPENAI_API_KEY", "sk-secret-value");
  auto spec = make_flow_spec(req, {}, {}, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(spec) << spec.error().message;
  auto files = bundle_files(spec->uploads[0].content.str());
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[2].first, "spec.json");
  EXPECT_EQ(files[2].second,
            R"({"graph":{"nodes":[{"id":"A","data":{"type":"ChatInput"}}],"edges":[]},)"
            R"("inputs":[],"outputs":["A"],"runtime_options":{},"install_lfx":false,)"
            R"("pip":[],"executor":"auto","session_id":"sess-1","user_id":"user-7",)"
            R"("context":{"k":"v"},"tweaks":{"A":{"input_value":"x"}},)"
            R"("history":[{"text":"earlier","sender":"User"}]})");
  EXPECT_EQ(files[3], (std::pair<std::string, std::string>{
                          "variables.json", R"({"OPENAI_API_KEY":"sk-secret-value"})"}));
  // Without variables there is no variables.json at all.
  req.variables = {};
  spec = make_flow_spec(req, {}, {}, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(spec);
  EXPECT_EQ(bundle_files(spec->uploads[0].content.str()).size(), 3u);
}

TEST(flow_spec, caller_timeout_is_used_up_to_the_limit_and_refused_beyond) {
  executor_settings s;
  s.timeout_seconds = 60;
  auto spec = make_flow_spec(request_for(30), {}, s, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->timeout_seconds, 30u);
  EXPECT_EQ(spec->command.args[1], "30");
  auto over = make_flow_spec(request_for(61), {}, s, "gf-x-abc123-0123456789", assets);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ec::bad_request);
  EXPECT_NE(over.error().message.find("CREATEOS_EXECUTOR_TIMEOUT_SECONDS"), std::string::npos);
}

TEST(flow_spec, the_executor_is_the_callers_else_the_settings) {
  executor_settings s;
  s.executor = "core";
  auto spec = make_flow_spec(request_for(), {}, s, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_NE(spec->uploads[0].content.str().find(R"("executor":"core")"), std::string::npos);
  auto req = request_for();
  req.executor = "lfx";
  spec = make_flow_spec(req, {}, s, "gf-x-abc123-0123456789", assets);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_NE(spec->uploads[0].content.str().find(R"("executor":"lfx")"), std::string::npos);
}

TEST(flow_spec, an_output_that_names_no_vertex_is_refused_listing_the_output_vertices) {
  auto req = decode<run_request>(
      R"({"flow":{"nodes":[{"id":"ChatInput-1","data":{"type":"ChatInput"}},)"
      R"({"id":"ChatOutput-2","data":{"type":"ChatOutput","node":{"display_name":"Reply"}}},)"
      R"({"id":"TextOutput-3","data":{"type":"Custom"}}],"edges":[]},)"
      R"("outputs":["Reply","ChatInput-1","Nope"]})");
  ASSERT_TRUE(req) << req.error().message;
  auto spec = make_flow_spec(*req, {}, {}, "gf-x-abc123-0123456789", assets);
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().code, ec::bad_request);
  EXPECT_EQ(spec.error().message,
            R"(outputs: "Nope" matches no vertex id or display name; the flow's output )"
            R"(vertices: ChatOutput-2 (Reply), TextOutput-3 (Custom))");
  req->outputs = {"Reply", "ChatInput-1"}; // by display name and by id
  EXPECT_TRUE(make_flow_spec(*req, {}, {}, "gf-x-abc123-0123456789", assets));
}

TEST(flow_spec, a_build_without_the_runner_or_its_unpacker_is_unavailable) {
  auto spec = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-0123456789",
                             {{"lfx_path.py", "#"}, {"unpack_run.py", "#"}});
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().code, ec::unavailable);
  EXPECT_NE(spec.error().message.find("guest/runner.py"), std::string::npos);
  spec = make_flow_spec(request_for(), {}, {}, "gf-x-abc123-0123456789", {{"runner.py", "#"}});
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().code, ec::unavailable);
  EXPECT_NE(spec.error().message.find("guest/unpack_run.py"), std::string::npos);
}

TEST(guest_assets, the_build_embeds_every_guest_file_byte_for_byte) {
  namespace fs = std::filesystem;
  std::vector<std::string> on_disk;
  for (auto& entry : fs::directory_iterator{fs::path{GUESTFLOW_SOURCE_DIR} / "guest"})
    if (entry.path().extension() == ".py") on_disk.push_back(entry.path().filename().string());
  std::sort(on_disk.begin(), on_disk.end());
  std::vector<std::string> embedded;
  for (auto& a : guest_assets()) {
    embedded.emplace_back(a.name);
    std::ifstream in{fs::path{GUESTFLOW_SOURCE_DIR} / "guest" / std::string{a.name},
                     std::ios::binary};
    std::string bytes{std::istreambuf_iterator<char>{in}, {}};
    EXPECT_EQ(bytes, a.content) << a.name;
  }
  EXPECT_EQ(embedded, on_disk);
  EXPECT_NE(std::find(embedded.begin(), embedded.end(), "runner.py"), embedded.end());
}

} // namespace
} // namespace guestflow
