// The wire API end to end on real guests: create → files → exec → delete, listing,
// pause/resume, auto-pause, egress reads and changes.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/raw_connection.hpp"

#include <filesystem>
#include <sys/types.h>

namespace guestflow::testing {
namespace {

using control_plane_lifecycle = both_kinds_test;
const std::string small = R"({"shape":"s-1vcpu-256mb","envs":{"PATH":"/usr/bin:/bin"}})";

TEST_P(control_plane_lifecycle, catalog_capabilities_and_whoami) {
  auto shapes = data<shape_list>(call("GET", "/v1/shapes"));
  EXPECT_EQ(shapes.total, shapes.data.size());
  std::map<std::string, uint64_t> mem;
  for (const auto& s : shapes.data)
    mem[s.id] = s.mem_mib;
  EXPECT_EQ(mem["s-1vcpu-256mb"], 256u);
  EXPECT_EQ(mem["s-1vcpu-512mb"], 512u);
  EXPECT_EQ(mem["s-1vcpu-1gb"], 1024u);
  EXPECT_EQ(mem["s-2vcpu-2gb"], 2048u);
  EXPECT_EQ(mem["s-2vcpu-4gb"], 4096u);
  EXPECT_EQ(mem["s-4vcpu-8gb"], 8192u);
  EXPECT_EQ(mem["s-4vcpu-16gb"], 16384u);
  EXPECT_EQ(mem["s-1vcpu-64mb"], 64u);

  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_EQ(caps.isolation, "namespaces");
  EXPECT_TRUE(caps.supports_deny_all_egress);
  EXPECT_FALSE(caps.supports_domain_allowlist);
  EXPECT_TRUE(caps.link_local_blocked);
  EXPECT_GT(caps.max_timeout_seconds, 0u);

  auto before = data<whoami>(call("GET", "/v1/whoami"));
  EXPECT_EQ(before.user_id, "local");
  EXPECT_EQ(before.total, 0u);
  auto g = create(small);
  auto after = data<whoami>(call("GET", "/v1/whoami"));
  EXPECT_EQ(after.running, 1u);
  EXPECT_EQ(after.total, 1u);
  ASSERT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_EQ(data<whoami>(call("GET", "/v1/whoami")).total, 0u);
}

TEST_P(control_plane_lifecycle, create_put_exec_get_delete) {
  auto g = create(
      R"({"shape":"s-1vcpu-256mb","name":"round-trip","envs":{"PATH":"/usr/bin:/bin","GREETING":"hello"}})");
  ASSERT_FALSE(g.id.empty());
  EXPECT_EQ(g.id.rfind("sb-", 0), 0u) << g.id;
  EXPECT_EQ(g.name, "round-trip");
  EXPECT_EQ(g.shape, "s-1vcpu-256mb");
  EXPECT_EQ(g.rootfs, "debian:12");
  EXPECT_EQ(g.mem_mib, 256u);
  EXPECT_FALSE(guest_pids(g.id).empty()) << "the guest's init should run in its cgroup";

  std::string payload = "line one\nline two\n\xc3\xa9\n";
  auto put = put_file(g.id, "/workspace/in/data.txt", payload);
  ASSERT_EQ(put.status, 200u) << put.body;

  auto r = exec(g.id, "/bin/sh",
                {"-c", "tr a-z A-Z < /workspace/in/data.txt > /workspace/out.txt; "
                       "echo \"$GREETING from $(id -u)\"; echo oops >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_text, "hello from 60000\n");
  EXPECT_EQ(r.stderr_text, "oops\n");
  EXPECT_FALSE(r.error);

  auto got = get_file(g.id, "/workspace/out.txt");
  ASSERT_EQ(got.status, 200u) << got.body;
  EXPECT_EQ(got.body, "LINE ONE\nLINE TWO\n\xc3\xa9\n");
  EXPECT_EQ(got.headers["content-type"], "application/octet-stream");

  auto v = view(g.id);
  EXPECT_EQ(v.status, sandbox_status::running);
  EXPECT_EQ(v.envs, (std::vector<std::string>{"GREETING", "PATH"}));
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + g.id).body.find("hello"), std::string::npos)
      << "env values must never be shown";

  auto del = data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id));
  EXPECT_EQ(del.id, g.id);
  EXPECT_EQ(del.status, sandbox_status::destroyed);
  EXPECT_EQ(view(g.id).status, sandbox_status::destroyed);
  EXPECT_TRUE(eventually([&] { return guest_pids(g.id).empty(); }));
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "gvisor" / g.id))
      << "runsc's state is left";
  expect_refusal(exec_reply(g.id, "/bin/true"), 409, "destroyed");
  // The name is free again once the guest is gone.
  auto again = create(R"({"shape":"s-1vcpu-256mb","name":"round-trip"})");
  EXPECT_NE(again.id, g.id);
}

TEST_P(control_plane_lifecycle, a_put_into_the_guests_memory_is_refused_a_get_reads_it) {
  // A guest's /tmp is a tmpfs in its own memory (of its user namespace, or gVisor's kernel):
  // the server's bytes there would be charged to the server with nothing to bound them. A
  // PUT is refused before anything is created or truncated, saying where files go.
  auto g = create(small);
  for (const auto* path : {"/tmp/x.txt", "/tmp/in/y.txt", "/dev/shm/z"}) {
    auto put = put_file(g.id, path, "from the host");
    EXPECT_EQ(put.status, 400u) << path << ": " << put.body;
    EXPECT_NE(put.body.find("below /workspace"), std::string::npos) << put.body;
  }
  auto r =
      exec(g.id, "/bin/sh", {"-c", "ls -A /tmp; echo mine > /tmp/own.txt && echo written"});
  EXPECT_EQ(r.stdout_text, "written\n") << "nothing was created: " << r.stderr_text;
  // A file the guest wrote there: not overwritten (nor truncated); read back where the
  // server can reach it.
  auto over = put_file(g.id, "/tmp/own.txt", "from the host");
  EXPECT_EQ(over.status, 400u) << over.body;
  EXPECT_EQ(exec(g.id, "/bin/cat", {"/tmp/own.txt"}).stdout_text, "mine\n");
  auto got = get_file(g.id, "/tmp/own.txt");
  if (gvisor()) {
    EXPECT_EQ(got.status, 400u) << got.body; // the sentry's memory: no host path reaches it
  } else {
    EXPECT_EQ(got.status, 200u) << got.body;
    EXPECT_EQ(got.body, "mine\n");
  }
}

/// How many of `pid`'s descriptors are open on a file whose path ends with `suffix`.
size_t open_files_ending(pid_t pid, const std::string& suffix) {
  size_t n = 0;
  std::error_code ec;
  for (auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.size() >= suffix.size() &&
        target.compare(target.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

TEST_P(control_plane_lifecycle,
       a_small_upload_holds_no_descriptor_while_its_body_is_on_the_way) {
  auto g = create(small);
  test_support::raw_connection c{cp_->port()};
  c.send("PUT /v1/sandboxes/" + g.id +
         "/files?path=/workspace/slow.txt HTTP/1.1\r\nHost: x\r\n"
         "Content-Type: application/octet-stream\r\nContent-Length: 10\r\n"
         "Expect: 100-continue\r\n\r\n");
  // The continue comes once the room is checked: from then on the body may take as long as
  // the caller likes, with no file of the guest's held open for it.
  auto cont = c.read_until("\r\n\r\n");
  ASSERT_EQ(cont.rfind("HTTP/1.1 100 Continue\r\n", 0), 0u) << cont;
  EXPECT_EQ(open_files_ending(cp_->pid(), "/slow.txt"), 0u);
  c.send("hello");
  EXPECT_EQ(open_files_ending(cp_->pid(), "/slow.txt"), 0u);
  c.send("world");
  auto reply = c.read_until("}}");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find(R"("size":10)"), std::string::npos) << reply;
  auto got = get_file(g.id, "/workspace/slow.txt");
  ASSERT_EQ(got.status, 200u) << got.body;
  EXPECT_EQ(got.body, "helloworld");
  // The download closes its file once its last chunk is written, maybe after we read it.
  EXPECT_TRUE(eventually([&] { return open_files_ending(cp_->pid(), "/slow.txt") == 0; }));
}

TEST_P(control_plane_lifecycle, list_paginates_and_filters) {
  auto a = create(small);
  auto b = create(small);
  auto c = create(small);
  call("DELETE", "/v1/sandboxes/" + b.id);
  auto all = data<sandbox_list>(call("GET", "/v1/sandboxes"));
  EXPECT_EQ(all.total, 3u);
  ASSERT_EQ(all.data.size(), 3u);
  EXPECT_EQ(all.data[0].id, a.id);
  EXPECT_EQ(all.data[2].id, c.id);
  auto page = data<sandbox_list>(call("GET", "/v1/sandboxes?limit=1&offset=1"));
  EXPECT_EQ(page.total, 3u);
  ASSERT_EQ(page.data.size(), 1u);
  EXPECT_EQ(page.data[0].id, b.id);
  auto running = data<sandbox_list>(call("GET", "/v1/sandboxes?status=running"));
  EXPECT_EQ(running.total, 2u);
  auto gone = data<sandbox_list>(call("GET", "/v1/sandboxes?status=destroyed"));
  ASSERT_EQ(gone.total, 1u);
  EXPECT_EQ(gone.data[0].id, b.id);
  expect_refusal(call("GET", "/v1/sandboxes?status=sleeping"), 400, "status");
  expect_refusal(call("GET", "/v1/sandboxes?limit=lots"), 400, "limit");
}

TEST_P(control_plane_lifecycle, pause_refuses_exec_and_files_until_resume) {
  auto g = create(small);
  auto p = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/pause"));
  EXPECT_EQ(p.status, sandbox_status::paused);
  EXPECT_TRUE(p.paused_at);
  expect_refusal(exec_reply(g.id, "/bin/true"), 409, "sandbox is paused");
  expect_refusal(get_file(g.id, "/workspace/x"), 409, "sandbox is paused");
  expect_refusal(put_file(g.id, "/workspace/x", "data"), 409, "sandbox is paused");
  auto r = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/resume"));
  EXPECT_EQ(r.status, sandbox_status::running);
  EXPECT_TRUE(r.last_resumed_at);
  auto e = exec(g.id, "/bin/echo", {"awake"});
  EXPECT_EQ(e.stdout_text, "awake\n");
  EXPECT_EQ(e.exit_code, 0);
}

TEST_P(control_plane_lifecycle, auto_pause_fires_when_idle_and_not_while_busy) {
  stop();
  start({"--auto-pause-scale", "0.01"}); // 60 s → 0.6 s
  auto g = create(
      R"({"shape":"s-1vcpu-256mb","auto_pause_after_seconds":60,"envs":{"PATH":"/usr/bin:/bin"}})");
  EXPECT_EQ(view(g.id).auto_pause_after_seconds, 60u);

  // Busy: a command that runs until released keeps the guest running past the idle time.
  http_stream s{
      client(), "POST", "/v1/sandboxes/" + g.id + "/exec?stream=true",
      exec_body("/bin/sh",
                {"-c", "echo go; while [ ! -e /workspace/go ]; do sleep 0.05; done"})};
  ASSERT_EQ(s.status(), 200u);
  ASSERT_EQ(s.next_line(std::chrono::seconds{10}).value_or(""), R"({"stdout":"go\n"})");
  EXPECT_FALSE(eventually([&] { return view(g.id).status == sandbox_status::paused; },
                          std::chrono::milliseconds{1500}))
      << "a guest with an exec running must not be auto-paused";
  ASSERT_EQ(put_file(g.id, "/workspace/go", "").status, 200u);
  while (s.next_line(std::chrono::seconds{10})) {
  }
  // Idle now: paused within the scaled 0.6 s (plus a sweep).
  EXPECT_TRUE(eventually([&] { return view(g.id).status == sandbox_status::paused; }));
  EXPECT_TRUE(view(g.id).paused_at);
}

TEST_P(control_plane_lifecycle, egress_is_read_and_changed_live) {
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  if (!caps.supports_address_egress_rules)
    GTEST_SKIP() << "nftables unavailable: rules cannot be enforced here";
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["10.0.0.0/8:443"]})");
  EXPECT_EQ(to_strings(g.egress), (std::vector<std::string>{"10.0.0.0/8:443"}));
  auto got = data<egress_body>(call("GET", "/v1/sandboxes/" + g.id + "/egress"));
  EXPECT_EQ(to_strings(got.egress), (std::vector<std::string>{"10.0.0.0/8:443"}));
  auto put = data<egress_body>(
      call("PUT", "/v1/sandboxes/" + g.id + "/egress", R"({"egress":["10.1.2.3:80"]})"));
  EXPECT_EQ(to_strings(put.egress), (std::vector<std::string>{"10.1.2.3:80"}));
  EXPECT_EQ(to_strings(view(g.id).egress), (std::vector<std::string>{"10.1.2.3:80"}));
  expect_refusal(call("PUT", "/v1/sandboxes/" + g.id + "/egress", R"({"egress":["pypi.org"]})"),
                 400, "hostname");
}

GUESTFLOW_BOTH_KINDS(control_plane_lifecycle);

} // namespace
} // namespace guestflow::testing
