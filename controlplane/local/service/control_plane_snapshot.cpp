// gVisor snapshots of images: `image add … --snapshot` boots a guest of the image, starts the
// snapshot waiter with the image's preload and checkpoints the sandbox into the image's
// directory; creates of that image (isolation gvisor) restore it instead of booting, and
// their first `python3 …` runs in the waiting interpreter (gvisor_checkpoint.hpp).
#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/guests/gvisor_checkpoint.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/control_plane.hpp"
#include "controlplane/local/service/python_waiter.hpp"
#include "controlplane/local/service/shapes.hpp"

#include <fstream>
#include <poll.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

/// The snapshot's guest: room for a heavy engine's import (pandas: ~100 MiB).
constexpr const char* snapshot_shape = "s-1vcpu-512mb";
/// How long the preload may take (a heavy engine under gVisor's ptrace platform: seconds).
constexpr auto preload_timeout = std::chrono::seconds(180);

/// The waiter's environment beside the snapshot: a first exec is served only with the same
/// start-up environment (python_waiter::request_for).
fs::path environ_file(const fs::path& snapshot) {
  auto p = snapshot;
  p += ".environ";
  return p;
}

/// Reads the exec's stdout until the waiter's last line, "ready" (its preload failures come
/// before), or the pipe's EOF (it died).
result<std::string> read_until_ready(int fd, std::chrono::seconds within) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + within;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return fail(ec::timeout, "the snapshot's preload took longer than allowed");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 65536 ||
        (out.size() >= 6 && out.compare(out.size() - 6, 6, "ready\n") == 0))
      return out;
  }
}

} // namespace

result<bool> control_plane::make_snapshot(const std::string& name) {
  auto image = images_.resolve(name);
  if (!image) return image.error();
  const auto dir = images_.snapshot_dir(image->name);
  if (dir.empty())
    return fail(ec::bad_request, "the built-in image " + image->name + " has no snapshot");
  auto shp = find_shape(snapshot_shape);
  if (!shp) return fail(ec::unavailable, std::string{"no shape "} + snapshot_shape);
  guest_spec spec;
  spec.id = new_guest_id();
  spec.name = spec.id;
  spec.isolation = guest_isolation::gvisor;
  spec.shape_info = *shp;
  spec.rootfs = image->name;
  spec.image = image->layout;
  spec.egress = egress_policy::deny_all();
  auto rt = backend_.create(spec);
  if (!rt) return fail(rt.error().code, "snapshot of " + name + ": " + rt.error().message);
  std::map<std::string, std::string> envs;
  if (!image->path_prepend.empty())
    envs["PATH"] = image->path_prepend + ":" + default_guest_path;
  std::string preload;
  for (const auto& m : image->preload)
    preload += (preload.empty() ? "" : ",") + m;
  auto done = [&]() -> result<bool> {
    exec_request req{"python3", {"-c", snapshot_waiter_script, python_waiter_script, preload}};
    auto p = backend_.start_exec(*rt, req, envs);
    if (!p) return p.error();
    auto said = read_until_ready(p->stdout_fd, preload_timeout);
    if (!said || said->size() < 6 || said->compare(said->size() - 6, 6, "ready\n") != 0) {
      backend_.kill_exec(*p);
      auto err = read_until_ready(p->stderr_fd, std::chrono::seconds(5));
      int code = backend_.reap(*p);
      return said ? fail(ec::unavailable, "the snapshot's python3 did not start (exit " +
                                              std::to_string(code) + "): " + *said +
                                              (err ? *err : std::string{}))
                  : said.error();
    }
    if (cfg_.warn && said->size() > 6)
      cfg_.warn("snapshot of " + name + ": " + said->substr(0, said->size() - 7));
    {
      std::ofstream out{environ_file(dir), std::ios::binary | std::ios::trunc};
      for (const auto& e : exec_environment(envs))
        out << e << '\0';
      if (!out.flush())
        return fail(ec::unavailable, "cannot write " + environ_file(dir).string());
    }
    auto cp = backend_.checkpoint(*rt, dir);
    backend_.kill_exec(*p); // its runsc exec ended with the sandbox
    backend_.reap(*p);
    return cp;
  }();
  backend_.destroy(*rt);
  if (!done) {
    remove_checkpoint(dir);
    ::unlink(environ_file(dir).c_str());
    return fail(done.error().code, "snapshot of " + name + ": " + done.error().message);
  }
  return true;
}

std::optional<std::vector<std::string>>
control_plane::snapshot_environment(const fs::path& snapshot) {
  std::ifstream in{environ_file(snapshot), std::ios::binary};
  if (!in) return std::nullopt;
  std::vector<std::string> env;
  std::string e;
  while (std::getline(in, e, '\0'))
    env.push_back(e);
  return env;
}

} // namespace guestflow::local
