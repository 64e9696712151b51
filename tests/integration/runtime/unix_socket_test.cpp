// The local control plane's Unix socket (`control-plane --unix-socket PATH`): the same wire
// API without the TCP stack, for clients on this host (`unix:///PATH` as the URL).
#include "tests/integration/runtime/runtime_fixture.hpp"
#include "tests/support/eventually.hpp"

#include <csignal>
#include <filesystem>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace guestflow::testing;
using guestflow::test_support::eventually;
using namespace std::chrono_literals;

namespace {

class unix_socket_test : public runtime_fixture {
protected:
  void SetUp() override {
    sock = dir.path() / "cp.sock";
    cp = std::make_unique<control_plane_process>(
        dir.path() / "cp", std::vector<std::string>{"--unix-socket", sock.string()});
  }

  /// A control plane on its own state dir with `--unix-socket path`, run until it exits
  /// (a refusal) or is ready (then stopped); its exit status and stderr.
  control_plane_process::outcome try_listen(const std::filesystem::path& path) const {
    return control_plane_process::run_to_exit({"control-plane", "--listen", "127.0.0.1:0",
                                               "--simulate-latency-ms", "1", "--unix-socket",
                                               path.string()},
                                              {}, std::chrono::seconds{20});
  }

  std::filesystem::path sock;
};

/// Binds a Unix socket at `path` and closes it without unlinking: what a crashed server
/// leaves behind.
void leave_stale_socket(const std::filesystem::path& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);
}

TEST_F(unix_socket_test, guestflow_code_runs_a_real_guest_over_the_socket) {
  struct stat st {};
  ASSERT_EQ(::lstat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only this user's processes may reach it";
  auto p = file("p.py", "import sys\nprint('over a unix socket')\nsys.exit(4)\n");
  auto r = cli({"code", p}, {{"GUESTFLOW_CONTROL_PLANE_URL", "unix://" + sock.string()}});
  EXPECT_EQ(r.status, 4) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "over a unix socket\n");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(unix_socket_test, a_socket_nobody_serves_is_unavailable_never_in_process) {
  auto gone = dir.path() / "nobody.sock";
  leave_stale_socket(gone);
  auto p = file("p.py", "print('must not run anywhere')\n");
  auto r = cli({"code", p}, {{"GUESTFLOW_CONTROL_PLANE_URL", "unix://" + gone.string()}});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.stdout_text.find("must not run"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("unix://" + gone.string()), std::string::npos) << r.stderr_text;
}

TEST_F(unix_socket_test, a_live_socket_is_refused_and_it_goes_with_its_server) {
  auto second = try_listen(sock);
  EXPECT_EQ(second.status, 1) << second.stderr_text;
  EXPECT_NE(second.stderr_text.find("another control plane accepts on " + sock.string()),
            std::string::npos)
      << second.stderr_text;
  // The first one still serves there.
  auto p = file("p.py", "print('still here')\n");
  auto r = cli({"code", p}, {{"GUESTFLOW_CONTROL_PLANE_URL", "unix://" + sock.string()}});
  EXPECT_EQ(r.stdout_text, "still here\n") << r.stderr_text;
  EXPECT_EQ(cp->stop(), 0);
  EXPECT_FALSE(std::filesystem::exists(sock));
  cp.reset();
}

TEST_F(unix_socket_test, a_stale_socket_is_replaced_other_files_and_bad_paths_are_refused) {
  auto stale = dir.path() / "stale.sock";
  leave_stale_socket(stale);
  control_plane_process replaced{
      dir.path() / "cp2", {"--simulate-latency-ms", "1", "--unix-socket", stale.string()}};
  struct stat st {};
  ASSERT_EQ(::lstat(stale.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(replaced.stop(), 0);

  auto plain = file("not-a-socket", "keep me\n");
  auto refused = try_listen(plain);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.stderr_text.find("is not a socket"), std::string::npos)
      << refused.stderr_text;
  EXPECT_TRUE(std::filesystem::exists(plain)) << "a file that is not a socket is never removed";

  auto relative = try_listen("cp.sock");
  EXPECT_EQ(relative.status, 2);
  EXPECT_NE(relative.stderr_text.find("--unix-socket: expected an absolute path"),
            std::string::npos)
      << relative.stderr_text;
}

TEST_F(unix_socket_test,
       the_embedded_control_plane_serves_on_a_socket_and_an_early_sigterm_holds) {
  // No control plane configured: the CLI embeds one on its state dir, and its own client
  // goes through a socket there.
  auto state = dir.path() / "embedded";
  auto path = state / "control-plane.sock";
  auto p = file("p.py", "import time\nprint('up', flush=True)\ntime.sleep(600)\n");
  auto pid =
      start_cli({"code", "--timeout", "600", p}, {{"GUESTFLOW_STATE_DIR", state.string()}});
  ASSERT_GT(pid, 0);
  struct stat st {};
  eventually([&] { return ::lstat(path.c_str(), &st) == 0; }, 60s, 20ms);
  ASSERT_TRUE(S_ISSOCK(st.st_mode)) << path << " never appeared";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A SIGTERM while the CLI is still starting (the socket is up, the run may not be): it
  // must not be lost — the run is cancelled (before or after its create), the socket goes.
  ::kill(pid, SIGTERM);
  int status = -1;
  eventually([&] { return ::waitpid(pid, &status, WNOHANG) != 0; }, 120s, 20ms);
  ASSERT_TRUE(WIFEXITED(status)) << "the CLI did not stop";
  EXPECT_EQ(WEXITSTATUS(status), 130); // cancelled
  EXPECT_FALSE(std::filesystem::exists(path));
  // Whatever the run left (nothing, if SIGTERM did its job) goes too.
  auto reap = cli({"reap", "--older-than", "0"}, {{"GUESTFLOW_STATE_DIR", state.string()},
                                                  {"GUESTFLOW_CONTROL_PLANE_URL", ""}});
  EXPECT_EQ(reap.status, 0) << reap.stderr_text;
  EXPECT_EQ(reap.stdout_text, "deleted 0\n") << "SIGTERM left a guest behind";
}

} // namespace
