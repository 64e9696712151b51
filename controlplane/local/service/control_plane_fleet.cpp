// Persistent guests under a workspace root shared by a fleet (`--workspace-root`): one owner
// at a time (guest_owners), a cold boot from the kept workspace on another node once the
// owner is lost, and a node that comes back forgetting what it no longer owns. The rest of
// control_plane is control_plane.cpp and control_plane_lifecycle.cpp.
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/control_plane.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace guestflow::local {
namespace fs = std::filesystem;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A name that is one safe path segment (reusable guests' names are `gf-c-…`).
bool plain_segment(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 128) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

result<std::string> read_text(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  if (!in)
    return fail(ec::unavailable, "cannot read " + p.string() + ": " + std::strerror(errno));
  std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  return text;
}

/// A guest a node back from a loss may find another node owns: stopped (its processes went
/// with the host), or running / paused (only the control plane died and its guest ran on:
/// killed now, as the new owner may have cold-booted it meanwhile).
bool forgettable(sandbox_status s) {
  return s == sandbox_status::stopped || s == sandbox_status::running ||
         s == sandbox_status::paused;
}

} // namespace

std::optional<fs::path> control_plane::shared_dir(const sandbox_create_request& req) const {
  if (cfg_.workspace_root.empty() || !req.persistent || !req.name) return std::nullopt;
  return cfg_.workspace_root / *req.name;
}

result<bool> control_plane::claim_shared(const sandbox_create_request& req, const fs::path& dir,
                                         guest_spec& spec) {
  if (!plain_segment(*req.name))
    return fail(ec::bad_request, "a persistent sandbox's name names its directory under the "
                                 "workspace root: use [A-Za-z0-9._-], at most 128, got '" +
                                     *req.name + "'");
  if (cfg_.owners)
    if (auto ok = cfg_.owners->acquire(*req.name); !ok) return ok.error();
  auto give_up = [&](failure f) -> failure {
    if (cfg_.owners) cfg_.owners->release(*req.name);
    return f;
  };
  spec.guest_dir = dir;
  const auto kept = dir / shared_spec_file;
  if (::access(kept.c_str(), F_OK) != 0) return true; // a new guest
  // A takeover: the guest was made (on this node or another) and its workspace is kept.
  auto text = read_text(kept);
  if (!text) return give_up(text.error());
  auto was = decode<sandbox_create_request>(*text);
  if (!was)
    return give_up(fail(ec::unavailable, "the kept spec " + kept.string() +
                                             " is unreadable: " + was.error().message));
  if (was->shape != req.shape)
    return give_up(conflict("persistent sandbox " + *req.name + " was made with shape " +
                            was->shape + " (its kept workspace is that size), not " +
                            req.shape));
  spec.kept_workspace = true;
  return true;
}

result<bool> control_plane::write_shared_spec(const sandbox_create_request& req,
                                              const fs::path& dir) {
  const auto path = dir / shared_spec_file;
  const auto tmp = dir / (std::string{shared_spec_file} + ".tmp");
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out << encode(req);
    out.flush();
    if (!out)
      return fail(ec::unavailable,
                  "cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  std::error_code ec_;
  fs::rename(tmp, path, ec_);
  if (ec_) return fail(ec::unavailable, "cannot write " + path.string() + ": " + ec_.message());
  return true;
}

result<bool> control_plane::may_start(const guest_spec& spec) {
  if (spec.guest_dir.empty() || !cfg_.owners) return true;
  auto ok = cfg_.owners->acquire(spec.name);
  if (ok) return true;
  auto owner = cfg_.owners->other_owner(spec.name);
  if (!owner || owner->empty()) return ok.error(); // fenced, or etcd unreachable: retry later
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(spec.id);
  forget(g, *owner);
  settled_.notify_all();
  gate_.changed();
  return fail(ec::not_found, "sandbox " + spec.id + " (" + spec.name + ") is owned by node " +
                                 *owner +
                                 " now (it took the guest over while this node was lost); "
                                 "this node forgot it");
}

void control_plane::forget(guest& g, const std::string& owner) {
  // Local leftovers only (processes, cgroups, netns): the workspace is the new owner's.
  guest_runtime local = g.rec.runtime;
  local.workspace.clear();
  backend_.stop(local);
  g.rec.status = sandbox_status::destroyed;
  g.rec.ended_at = unix_now();
  g.rec.note = "taken over by node " + owner + " (its workspace is shared)";
  save(g);
}

void control_plane::stop_shared() {
  if (cfg_.workspace_root.empty()) return;
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock{mu_};
    for (const auto& [id, g] : guests_)
      if (g.rec.persistent && !g.rec.runtime.workspace.empty() &&
          g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root &&
          (g.rec.status == sandbox_status::running || g.rec.status == sandbox_status::paused))
        ids.push_back(id);
  }
  for (const auto& id : ids)
    if (auto ok = stop_guest(id, false,
                             "stopped: the node was fenced (its fleet lease may "
                             "expire and another node take the guest over)");
        !ok && cfg_.warn)
      cfg_.warn("fence: cannot stop " + id + ": " + ok.error().message);
}

void control_plane::forget_taken_over() {
  if (cfg_.workspace_root.empty() || !cfg_.owners) return;
  std::vector<std::pair<std::string, std::string>> shared; // id, name
  {
    std::lock_guard<std::mutex> lock{mu_};
    for (const auto& [id, g] : guests_)
      if (g.rec.persistent && forgettable(g.rec.status) && !g.rec.runtime.workspace.empty() &&
          g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root)
        shared.emplace_back(id, g.rec.name);
  }
  for (const auto& [id, name] : shared) {
    auto owner = cfg_.owners->other_owner(name);
    if (!owner || owner->empty()) continue;
    std::lock_guard<std::mutex> lock{mu_};
    auto i = guests_.find(id);
    if (i == guests_.end() || !forgettable(i->second.rec.status)) continue;
    forget(i->second, *owner);
    gate_.changed();
    if (cfg_.warn)
      cfg_.warn("sandbox " + id + " (" + name + ") is owned by node " + *owner +
                " now: forgotten here, its shared workspace left to that node");
  }
}

} // namespace guestflow::local
