#include "controlplane/local/service/simulated_control_plane.hpp"

#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/shapes.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

/// A command that already ended, exit code 0, no output: it has no pipes and no exit fd
/// (the transport reads both pipes as closed and the command as exited), so a simulated
/// exec holds no file descriptor however many run at once.
class finished_command final : public running_exec {
public:
  int stdout_fd() const override { return -1; }
  int stderr_fd() const override { return -1; }
  int exit_fd() const override { return -1; }
  void kill() override {}
  exec_outcome finish() override { return {}; }
};

/// A command that already ended, exit code 0, whose whole stdout is waiting in a memfd
/// (a regular file: reads never block, EOF at its end; one fd per exec until the
/// transport has read it, however large the canned output). The memfd is handed to the
/// reader, not duplicated: at 10,000 streams, socket + memfd + duplicate per exec ran the
/// control plane out of its 20,000 descriptors.
class canned_command final : public running_exec {
public:
  explicit canned_command(unique_fd out)
      : out_(std::move(out)) {}
  int stdout_fd() const override { return out_.get(); }
  unique_fd take_stdout() override { return std::move(out_); }
  int stderr_fd() const override { return -1; }
  int exit_fd() const override { return -1; }
  void kill() override {}
  exec_outcome finish() override {
    out_.reset();
    return {};
  }

private:
  unique_fd out_;
};

/// A memfd holding `text`, positioned at its start.
result<unique_fd> memfd_with(const std::string& text) {
  unique_fd fd{::memfd_create("simulated-stdout", MFD_CLOEXEC)};
  if (!fd) return fail(ec::unavailable, std::string{"simulated exec: "} + std::strerror(errno));
  for (size_t off = 0; off < text.size();) {
    auto n = ::pwrite(fd.get(), text.data() + off, text.size() - off, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return fail(ec::unavailable, std::string{"simulated exec: "} + std::strerror(errno));
    off += static_cast<size_t>(n);
  }
  return fd;
}

} // namespace

result<guest_record*> simulated_control_plane::find(const std::string& id, bool usable) {
  auto i = guests_.find(id);
  if (i == guests_.end()) return fail(ec::not_found, "no sandbox with id '" + id + "'");
  if (usable && i->second.status == sandbox_status::paused)
    return fail(ec::paused, "sandbox is paused");
  if (usable && i->second.status != sandbox_status::running)
    return conflict("sandbox is " + std::string{to_string(i->second.status)});
  return &i->second;
}

shape_list simulated_control_plane::shapes() {
  return shape_catalog();
}

capabilities simulated_control_plane::caps() {
  capabilities c;
  c.isolation = "namespaces";
  c.images = {std::string{builtin_image}}; // no image store: debian:12 only
  return c;
}

whoami simulated_control_plane::who() {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<const guest_record*> recs;
  for (const auto& [id, r] : guests_)
    recs.push_back(&r);
  return count_guests(recs);
}

result<sandbox_created> simulated_control_plane::create(const sandbox_create_request& req) {
  auto shp = resolve_shape(req.shape);
  if (!shp) return shp.error();
  auto rootfs = resolve_rootfs(req.rootfs);
  if (!rootfs) return rootfs.error();
  std::lock_guard<std::mutex> lock{mu_};
  guest_record r;
  r.id = new_guest_id();
  r.name = req.name.value_or(r.id);
  if (auto taken = live_names_.find(r.name); taken != live_names_.end())
    return conflict("name '" + r.name + "' is taken by live sandbox " + taken->second);
  r.status = sandbox_status::running;
  r.shape = shp->id;
  r.rootfs = *rootfs;
  r.egress = req.egress;
  r.envs = req.envs;
  r.auto_pause_after_seconds = req.auto_pause_after_seconds;
  r.created_at = now_rfc3339();
  r.seq = next_seq_++;
  sandbox_created out{r.id,
                      r.name,
                      "",
                      r.shape,
                      r.rootfs,
                      shp->vcpu,
                      shp->mem_mib,
                      shp->default_disk_mib,
                      static_cast<uint64_t>(latency_.count()),
                      r.egress};
  live_names_.emplace(r.name, r.id);
  guests_.emplace(r.id, std::move(r));
  return out;
}

result<noted_view> simulated_control_plane::view(const std::string& id) {
  std::lock_guard<std::mutex> lock{mu_};
  auto r = find(id);
  if (!r) return r.error();
  return noted_view{to_view(**r), "simulated: no guest runs"};
}

result<sandbox_list> simulated_control_plane::list(const list_query& q) {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<const guest_record*> recs;
  for (const auto& [id, r] : guests_)
    recs.push_back(&r);
  std::sort(recs.begin(), recs.end(),
            [](const guest_record* a, const guest_record* b) { return a->seq < b->seq; });
  return list_page(recs, q);
}

result<sandbox_deleted> simulated_control_plane::destroy(const std::string& id) {
  std::lock_guard<std::mutex> lock{mu_};
  auto r = find(id);
  if (!r) return r.error();
  if (is_live((*r)->status)) live_names_.erase((*r)->name);
  (*r)->status = sandbox_status::destroyed;
  return sandbox_deleted{id, sandbox_status::destroyed};
}

result<sandbox_view> simulated_control_plane::set_status(const std::string& id,
                                                         sandbox_status from,
                                                         sandbox_status to) {
  std::lock_guard<std::mutex> lock{mu_};
  auto r = find(id);
  if (!r) return r.error();
  if ((*r)->status != from && (*r)->status != to)
    return conflict("sandbox is " + std::string{to_string((*r)->status)});
  (*r)->status = to;
  return to_view(**r);
}

result<sandbox_view> simulated_control_plane::pause(const std::string& id) {
  return set_status(id, sandbox_status::running, sandbox_status::paused);
}

result<sandbox_view> simulated_control_plane::resume(const std::string& id) {
  return set_status(id, sandbox_status::paused, sandbox_status::running);
}

result<egress_body> simulated_control_plane::egress(const std::string& id) {
  std::lock_guard<std::mutex> lock{mu_};
  auto r = find(id);
  if (!r) return r.error();
  return egress_body{(*r)->egress};
}

result<egress_body> simulated_control_plane::set_egress(const std::string& id,
                                                        const egress_policy& p) {
  std::lock_guard<std::mutex> lock{mu_};
  auto r = find(id);
  if (!r) return r.error();
  (*r)->egress = p;
  return egress_body{p};
}

result<std::unique_ptr<running_exec>> simulated_control_plane::start_exec(const std::string& id,
                                                                          const exec_request&) {
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (auto r = find(id, true); !r) return r.error();
  }
  if (exec_stdout_.empty())
    return std::unique_ptr<running_exec>{std::make_unique<finished_command>()};
  auto out = memfd_with(exec_stdout_);
  if (!out) return out.error();
  return std::unique_ptr<running_exec>{std::make_unique<canned_command>(std::move(*out))};
}

result<guest_file> simulated_control_plane::open_file(const std::string& id,
                                                      const std::string& path, bool for_write) {
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (auto r = find(id, true); !r) return r.error();
  }
  if (path.empty() || path.front() != '/')
    return fail(ec::bad_request, "path: must be absolute");
  unique_fd fd{for_write ? ::open("/dev/null", O_WRONLY | O_CLOEXEC)
                         : ::memfd_create("simulated-file", MFD_CLOEXEC)};
  if (!fd) return fail(ec::unavailable, std::string{"simulated file: "} + std::strerror(errno));
  return guest_file{std::move(fd), {}};
}

} // namespace guestflow::local
