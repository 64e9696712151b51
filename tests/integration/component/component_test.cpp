// `guestflow component` as a user runs it, against the real local control plane (a child
// process on 127.0.0.1:0) and real guests: guest reuse across runtimes and control-plane
// restarts, resume of paused guests, egress as identity and drift refusal, the cross-process
// create race, and returned files (byte-exact, capped during transfer, hostile archives).

#include "messages/jsend.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/guest_programs.hpp"
#include "tests/support/slurp.hpp"

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

/// The CLI as a child process whose exit is collected with wait4, so its peak RSS is known.
class cli_child {
public:
  cli_child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
            const std::filesystem::path& scratch) {
    static int counter = 0;
    auto tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    out_ = scratch / ("cli-" + tag + ".out");
    err_ = scratch / ("cli-" + tag + ".err");
    std::vector<std::string> all{GUESTFLOW_BIN};
    all.insert(all.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      for (auto& [k, v] : env)
        ::setenv(k.c_str(), v.c_str(), 1);
      int in = ::open("/dev/null", O_RDONLY);
      int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(in, 0);
      ::dup2(o, 1);
      ::dup2(e, 2);
      std::vector<char*> argv;
      for (auto& a : all)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(GUESTFLOW_BIN, argv.data());
      ::_exit(127);
    }
  }

  ~cli_child() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  struct outcome {
    int status = -1;
    std::string out;
    std::string err;
    long max_rss_kb = 0;
  };

  /// Waits (deadline) for the exit; the child is killed if it overstays.
  outcome wait(std::chrono::seconds timeout = 120s) {
    outcome o;
    int st = 0;
    rusage ru{};
    if (!test_support::eventually([&] { return ::wait4(pid_, &st, WNOHANG, &ru) == pid_; },
                                  timeout, 20ms)) {
      ::kill(pid_, SIGKILL);
      ::wait4(pid_, &st, 0, &ru);
    }
    done_ = true;
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    o.max_rss_kb = ru.ru_maxrss;
    o.out = guestflow::test_support::slurp(out_);
    o.err = guestflow::test_support::slurp(err_);
    return o;
  }

private:
  pid_t pid_ = -1;
  bool done_ = false;
  std::filesystem::path out_;
  std::filesystem::path err_;
};

/// Deterministic content: the test and the guest program compute the same bytes.
std::string pattern(size_t n, unsigned seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<char>((i + seed) % 251);
  return out;
}

/// The same in the guest's Python.
constexpr const char* py_pattern = "def pattern(n, seed):\n"
                                   "    block = bytes((i + seed) % 251 for i in range(251))\n"
                                   "    reps = n // 251 + 1\n"
                                   "    return (block * reps)[:n]\n";

using test_support::counter_program;

/// The runtime fixture's control plane, environment and clean-up: reusable guests outlive
/// their runs (and the control plane) by design, so its TearDown deletes what a test kept.
class component_test : public runtime_fixture {
protected:
  void restart_control_plane() {
    ASSERT_EQ(cp->stop(), 0) << cp->stderr_text();
    cp.reset();
    cp = std::make_unique<control_plane_process>(dir.path() / "cp");
  }

  std::string program(const std::string& name, const std::string& code) {
    auto path = dir.path() / name;
    std::ofstream{path} << code;
    return path.string();
  }

  cli_child::outcome component(std::vector<std::string> args) {
    args.insert(args.begin(), "component");
    cli_child c{args, env(), dir.path()};
    return c.wait();
  }

  /// One keyed run of the counter program.
  cli_child::outcome count(const std::string& component_id, bool network = false) {
    std::vector<std::string> a{
        "--flow-id", "flow-1", "--component-id", component_id,
        "--reuse",   "flow",   "--python",       program("count.py", counter_program)};
    if (network) a.push_back("--allow-network");
    return component(a);
  }

  http_reply api(const std::string& method, const std::string& target,
                 const std::string& body = {}) {
    http_client http{cp->port()};
    return http.call(method, target, body);
  }

  /// Guests the control plane still has alive (not destroyed).
  std::vector<sandbox_view> live_guests() {
    auto reply = api("GET", "/v1/sandboxes?limit=1000");
    EXPECT_EQ(reply.status, 200u) << reply.body;
    auto env = decode<jsend>(reply.body);
    EXPECT_TRUE(env) << reply.body;
    auto list = decode<sandbox_list>(env->data.text);
    EXPECT_TRUE(list) << env->data.text;
    std::vector<sandbox_view> out;
    for (auto& v : list->data)
      if (v.status != sandbox_status::destroyed && v.status != sandbox_status::failed)
        out.push_back(v);
    return out;
  }

  std::vector<sandbox_view> reusable_guests() {
    std::vector<sandbox_view> out;
    for (auto& v : live_guests())
      if (v.name.rfind("gf-c-", 0) == 0) out.push_back(v);
    return out;
  }

  sandbox_view view(const std::string& id) {
    auto reply = api("GET", "/v1/sandboxes/" + id);
    EXPECT_EQ(reply.status, 200u) << reply.body;
    return *decode<sandbox_view>(decode<jsend>(reply.body)->data.text);
  }
};

} // namespace

TEST_F(component_test,
       run_count_1_2_3_on_one_guest_across_runtimes_and_a_control_plane_restart) {
  auto r1 = count("counter");
  ASSERT_EQ(r1.status, 0) << r1.err;
  EXPECT_EQ(r1.out, "1\n");
  auto guests = reusable_guests();
  ASSERT_EQ(guests.size(), 1u);
  auto id = guests[0].id;
  EXPECT_EQ(guests[0].name.size(), 22u);
  auto r2 = count("counter"); // a new CLI invocation: a new runtime, adopting by name
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_EQ(r2.out, "2\n");
  restart_control_plane(); // it re-adopts its guests; we adopt the guest again
  auto r3 = count("counter");
  ASSERT_EQ(r3.status, 0) << r3.err;
  EXPECT_EQ(r3.out, "3\n");
  guests = reusable_guests();
  ASSERT_EQ(guests.size(), 1u);
  EXPECT_EQ(guests[0].id, id);
  EXPECT_EQ(live_guests().size(), 1u);
}

TEST_F(component_test, a_guest_paused_between_runs_is_resumed_and_the_run_succeeds) {
  ASSERT_EQ(count("pausing").status, 0);
  auto id = reusable_guests().at(0).id;
  auto paused = api("POST", "/v1/sandboxes/" + id + "/pause");
  ASSERT_EQ(paused.status, 200u) << paused.body;
  ASSERT_EQ(view(id).status, sandbox_status::paused);
  auto r = count("pausing");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "2\n");
  auto v = view(id);
  EXPECT_EQ(v.status, sandbox_status::running);
  EXPECT_TRUE(v.last_resumed_at);
  EXPECT_EQ(reusable_guests().size(), 1u);
}

TEST_F(component_test, changing_allow_network_gets_a_different_guest) {
  ASSERT_EQ(count("net").out, "1\n");
  auto open = count("net", true);
  ASSERT_EQ(open.status, 0) << open.err;
  EXPECT_EQ(open.out, "1\n"); // a fresh guest: nothing carried over from the closed one
  auto guests = reusable_guests();
  ASSERT_EQ(guests.size(), 2u);
  EXPECT_NE(guests[0].name, guests[1].name);
  EXPECT_NE(guests[0].egress, guests[1].egress);
  EXPECT_EQ(count("net").out, "2\n");
  EXPECT_EQ(count("net", true).out, "2\n");
}

TEST_F(component_test, drifted_egress_is_refused_and_the_guest_left_in_place) {
  ASSERT_EQ(count("drift", true).status, 0);
  auto id = reusable_guests().at(0).id;
  // Behind guestflow's back: the guest created with network on loses it.
  auto put = api("PUT", "/v1/sandboxes/" + id + "/egress", R"({"egress":["240.0.0.0/4"]})");
  ASSERT_EQ(put.status, 200u) << put.body;
  auto r = count("drift", true);
  EXPECT_EQ(r.status, 125);
  EXPECT_NE(r.err.find("egress_drift"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  auto guests = reusable_guests();
  ASSERT_EQ(guests.size(), 1u); // not deleted, and no second guest made in its place
  EXPECT_EQ(guests[0].id, id);
  // A run that asks for the drifted policy is a different identity altogether.
  EXPECT_EQ(count("drift", false).out, "1\n");
}

TEST_F(component_test, two_concurrent_clis_for_one_key_share_one_guest) {
  auto p = program("count.py", counter_program);
  std::vector<std::string> args{"component",      "--flow-id", "flow-1",
                                "--component-id", "race",      "--reuse",
                                "flow",           "--python",  p};
  cli_child a{args, env(), dir.path()};
  cli_child b{args, env(), dir.path()};
  auto ra = a.wait();
  auto rb = b.wait();
  ASSERT_EQ(ra.status, 0) << ra.err;
  ASSERT_EQ(rb.status, 0) << rb.err;
  std::vector<std::string> outs{ra.out, rb.out};
  std::sort(outs.begin(), outs.end());
  EXPECT_EQ(outs, (std::vector<std::string>{"1\n", "2\n"}));
  EXPECT_EQ(reusable_guests().size(), 1u); // the loser of the create race adopted the winner
  EXPECT_EQ(live_guests().size(), 1u);
}

TEST_F(component_test, returned_files_come_back_byte_exact_with_any_name) {
  struct want {
    std::string path;
    size_t size;
  };
  std::vector<want> small{
      {"plain.txt", 1024},
      {"with space ", 100},
      {"new\nline", 10},
      {"\xc3\xbcn\xc3\xaf/\xe3\x83\x95\xe3\x82\xa1\xe3\x82\xa4\xe3\x83\xab.bin", 333}};
  std::string code = std::string{"import os\n"} + py_pattern;
  for (size_t i = 0; i < small.size(); ++i) {
    std::string quoted;
    for (unsigned char c : small[i].path) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      quoted += buf;
    }
    code += "p = os.path.join('/workspace/artifacts', b'" + quoted +
            "'.decode())\n"
            "os.makedirs(os.path.dirname(p), exist_ok=True)\n"
            "open(p, 'wb').write(pattern(" +
            std::to_string(small[i].size) + ", " + std::to_string(i) + "))\n";
  }
  code += "print('written')\n";
  auto out = dir.path() / "returned";
  auto r = component({"--flow-id", "f", "--component-id", "files", "--return-files",
                      out.string(), "--python", program("files.py", code)});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "written\n");
  for (size_t i = 0; i < small.size(); ++i)
    EXPECT_EQ(guestflow::test_support::slurp(out / small[i].path), pattern(small[i].size, i))
        << small[i].path;
  EXPECT_TRUE(wait_for_live(0)); // reuse none: an ephemeral guest, deleted

  // 4.9 MiB comes back whole: the 5 MiB cap is on the archive, and this one fits.
  const size_t big = 49 * (size_t{1} << 20) / 10;
  auto big_out = dir.path() / "big";
  auto rb = component(
      {"--flow-id", "f", "--component-id", "files", "--return-files", big_out.string(),
       "--python",
       program("big.py", std::string{"import os\n"} + py_pattern +
                             "os.makedirs('/workspace/artifacts/d d', exist_ok=True)\n"
                             "open('/workspace/artifacts/d d/big \\n.bin', 'wb')"
                             ".write(pattern(" +
                             std::to_string(big) + ", 9))\n")});
  ASSERT_EQ(rb.status, 0) << rb.err;
  auto got = guestflow::test_support::slurp(big_out / "d d" / "big \n.bin");
  EXPECT_EQ(got.size(), big);
  EXPECT_TRUE(got == pattern(big, 9));
}

TEST_F(component_test, over_the_cap_is_artifact_too_large_with_bounded_memory) {
  auto writer = [&](size_t bytes, const std::string& name) {
    return program(name, "import os\nos.makedirs('/workspace/artifacts', exist_ok=True)\n"
                         "with open('/workspace/artifacts/blob', 'wb') as f:\n"
                         "    f.write(os.urandom(" +
                             std::to_string(bytes) +
                             "))\n"
                             "print('blob written')\n");
  };
  auto small = component({"--flow-id", "f", "--component-id", "rss", "--return-files",
                          (dir.path() / "s").string(), "--python", writer(1024, "s.py")});
  ASSERT_EQ(small.status, 0) << small.err;
  auto huge = component({"--flow-id", "f", "--component-id", "rss", "--return-files",
                         (dir.path() / "h").string(), "--python", writer(20 << 20, "h.py")});
  EXPECT_EQ(huge.status, 125);
  EXPECT_NE(huge.err.find("artifact_too_large"), std::string::npos) << huge.err;
  EXPECT_EQ(huge.out, "blob written\n"); // the run's own output is intact
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "h" / "blob"));
  auto grown_kb = huge.max_rss_kb - small.max_rss_kb;
  EXPECT_LT(grown_kb, 8 * 1024) << "small " << small.max_rss_kb << " KiB, 20 MiB run "
                                << huge.max_rss_kb << " KiB";
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(component_test, a_hostile_archive_member_escaping_the_directory_is_dropped) {
  // The guest is untrusted end to end: this program crafts an archive with python3's
  // tarfile and leaves a process behind that swaps it in for the one guestflow's tar
  // writes, so the host receives exactly what a hostile guest chose.
  auto code = R"(import io, os, subprocess, sys, tarfile
os.makedirs('/workspace/artifacts', exist_ok=True)
open('/workspace/artifacts/filler', 'wb').write(b'f' * (4 << 20))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as t:
    for name, data in [('ok.txt', b'ok'), ('../../etc/x', b'evil'), ('/abs', b'evil')]:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    link = tarfile.TarInfo('link')
    link.type = tarfile.SYMTYPE
    link.linkname = '/etc/passwd'
    t.addfile(link)
open('/workspace/.evil.tar', 'wb').write(buf.getvalue())
swap = '''
import ctypes, glob, os, struct, time
def swap(name):
    os.rename('/workspace/.evil.tar', '/workspace/' + name)
# Woken by inotify the moment the archive is created: a process spinning on glob loses its
# turn to guestflow's tar on a loaded host, one that sleeps in read() gets it at once.
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
if fd >= 0 and libc.inotify_add_watch(fd, b'/workspace', 0x100) >= 0:  # IN_CREATE
    open('/workspace/.swapper-ready', 'w').close()
    while True:
        buf, at = os.read(fd, 65536), 0
        while at < len(buf):
            _, _, _, n = struct.unpack_from('iIII', buf, at)
            name = buf[at + 16:at + 16 + n].rstrip(b'\\0').decode()
            at += 16 + n
            if name.startswith('.gf-artifacts-') and name.endswith('.tar'):
                swap(name)
                raise SystemExit
open('/workspace/.swapper-ready', 'w').close()
end = time.time() + 60
while time.time() < end:
    hits = glob.glob('/workspace/.gf-artifacts-*.tar')
    if hits:
        swap(os.path.basename(hits[0]))
        break
'''
subprocess.Popen([sys.executable, '-c', swap], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
# Exit only once the swapper watches: guestflow's tar starts right after this program ends.
import time
deadline = time.time() + 30
while not os.path.exists('/workspace/.swapper-ready') and time.time() < deadline:
    time.sleep(0.005)
print('armed')
)";
  auto out = dir.path() / "a" / "b" / "returned";
  auto r = component({"--flow-id", "f", "--component-id", "evil", "--return-files",
                      out.string(), "--python", program("evil.py", code)});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "armed\n");
  EXPECT_NE(r.err.find("dropped '../../etc/x': path escapes the directory"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("dropped '/abs'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dropped 'link': symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(guestflow::test_support::slurp(out / "ok.txt"), "ok");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a" / "etc" / "x"));
  EXPECT_FALSE(std::filesystem::exists(out / "filler")); // what came back is the crafted one
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(component_test, reap_reusable_deletes_only_guests_idle_longer_than_asked) {
  ASSERT_EQ(count("reap").status, 0);
  auto keep = component_test::env();
  auto reap = [&](const std::string& idle) {
    cli_child c{{"reap", "--reusable", "--idle-longer-than", idle}, keep, dir.path()};
    return c.wait();
  };
  auto none = reap("3600");
  ASSERT_EQ(none.status, 0) << none.err;
  EXPECT_EQ(none.out, "deleted 0\n");
  EXPECT_EQ(reusable_guests().size(), 1u);
  // Ephemeral reaping never touches it either.
  cli_child plain{{"reap"}, keep, dir.path()};
  EXPECT_EQ(plain.wait().out, "deleted 0\n");
  EXPECT_EQ(reusable_guests().size(), 1u);
  // Idle longer than 0 s: true once a second has passed since its creation.
  std::string said;
  test_support::eventually([&] { return (said = reap("0").out) == "deleted 1\n"; }, 20s, 200ms);
  EXPECT_EQ(said, "deleted 1\n");
  EXPECT_TRUE(reusable_guests().empty());
}
