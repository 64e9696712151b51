#include "tests/support/etcd_process.hpp"

#include "fleet/etcd_client.hpp"
#include "tests/support/eventually.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace guestflow::test_support {
namespace {

using namespace std::chrono_literals;

constexpr const char* etcd_binary = "/usr/bin/etcd";

/// A port the kernel just handed out on 127.0.0.1 (closed again: etcd binds it next).
/// `keep` holds the socket open until both ports are picked, so they differ.
uint16_t free_port(int& keep) {
  keep = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (keep < 0) throw std::runtime_error("etcd_process: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(keep, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(keep, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("etcd_process: cannot pick a free port");
  return ntohs(a.sin_port);
}

/// Reaps `pid` if it exited; true when it did.
bool reaped(pid_t pid) {
  int st = 0;
  return ::waitpid(pid, &st, WNOHANG) == pid;
}

} // namespace

etcd_process::etcd_process(std::chrono::milliseconds ready_within) {
  // A port picked here may be taken by someone else before etcd binds it: then etcd exits
  // at once, and new ports are tried.
  for (int attempt = 0;; ++attempt) {
    int a = -1, b = -1;
    client_port_ = free_port(a);
    peer_port_ = free_port(b);
    ::close(a);
    ::close(b);
    try {
      start(ready_within);
      return;
    } catch (const std::exception&) {
      if (attempt == 2) throw;
    }
  }
}

etcd_process::~etcd_process() {
  if (pid_ > 0) kill();
}

std::string etcd_process::url() const {
  return "etcd://127.0.0.1:" + std::to_string(client_port_);
}

std::string etcd_process::client_url() const {
  return "http://127.0.0.1:" + std::to_string(client_port_);
}

void etcd_process::start(std::chrono::milliseconds ready_within) {
  auto peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> args{etcd_binary,
                                "--name=default",
                                "--data-dir=" + (dir_.path() / "data").string(),
                                "--listen-client-urls=" + client_url(),
                                "--advertise-client-urls=" + client_url(),
                                "--listen-peer-urls=" + peer,
                                "--initial-advertise-peer-urls=" + peer,
                                "--initial-cluster=default=" + peer,
                                "--initial-cluster-state=new"};
  auto log = (dir_.path() / "etcd.log").string();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("etcd_process: fork failed");
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(etcd_binary, argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  auto client = fleet::etcd_client::make(url(), 500ms);
  if (!client) throw std::runtime_error("etcd_process: " + client.error().message);
  bool exited = false;
  bool ready = eventually(
      [&] {
        if (reaped(pid_)) {
          exited = true;
          return true;
        }
        return (*client)->get("/guestflow-test/health").ok();
      },
      ready_within, 20ms);
  if (exited || !ready) {
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    throw std::runtime_error(std::string{"etcd_process: etcd "} +
                             (exited ? "exited" : "did not answer in time") + "; log:\n" +
                             log_text());
  }
}

void etcd_process::stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (!eventually([&] { return reaped(pid_); }, timeout, 10ms)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

void etcd_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void etcd_process::restart(std::chrono::milliseconds ready_within) {
  if (pid_ > 0) stop();
  start(ready_within);
}

std::string etcd_process::log_text() const {
  std::ifstream in{dir_.path() / "etcd.log"};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace guestflow::test_support
