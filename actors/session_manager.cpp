#include "actors/session_manager.hpp"

#include "messages/type_ids.hpp"

#include <algorithm>
#include <caf/send.hpp>
#include <cstdlib>
#include <filesystem>

namespace guestflow {

namespace {

using self_ptr = session_manager_actor::stateful_pointer<session_manager_state>;
using info_promise = caf::typed_response_promise<session_info>;
using steady = std::chrono::steady_clock;

/// DeerFlow's paths (its remote providers make them when a sandbox starts): directories of
/// the guest's workspace volume bound where DeerFlow expects them, so they are kept with it.
constexpr const char* user_data_dir = ".deerflow/user-data";
constexpr const char* acp_workspace_dir = ".deerflow/acp-workspace";
constexpr const char* empty_skills_dir = ".deerflow/skills";

/// A thread directory's sync, either way (its own calls have their own deadlines).
const caf::duration sync_limit{std::chrono::minutes{30}};

session_info info_of(const session_pool::slot& s, bool reused) {
  session_info x;
  x.session_id = s.name;
  x.user_id = s.req.user_id;
  x.thread_id = s.req.thread_id;
  x.warm = s.st == session_pool::state::warm;
  x.stopped = s.st == session_pool::state::stopped || s.st == session_pool::state::stopping;
  x.reused = reused;
  x.guest_id = s.guest_id;
  x.image = s.req.image;
  x.allow_network = s.req.allow_network;
  return x;
}

bool local(self_ptr self) {
  return self->state.opts.provider.kind == cp::provider::local;
}

void acquire(self_ptr self, session_request req, info_promise rp);
void schedule_expiry(self_ptr self);

/// The create, wake, stop or delete of `name` ended: the acquires parked behind it ask again.
void wake_waiting(self_ptr self, const std::string& name) {
  auto i = self->state.waiting.find(name);
  if (i == self->state.waiting.end()) return;
  auto parked = std::move(i->second);
  self->state.waiting.erase(i);
  for (auto& [req, rp] : parked)
    acquire(self, std::move(req), rp);
}

/// Deletes a deleting slot's guest; `then(failure or none)` runs once the pool forgot it.
/// On CreateOS a failed delete is the reaper's to retry; a local guest's delete that failed
/// is the caller's to retry (nothing else deletes a persistent guest but its retention).
template<class F>
void delete_guest(self_ptr self, const session_pool::slot& s, F then) {
  auto& st = self->state;
  auto name = s.name;
  auto done = [self, name, then](std::optional<failure> why) mutable {
    auto& st = self->state;
    if (!local(self) && why)
      caf::anon_send(st.reaper, reap_atom::value, name);
    else if (!local(self))
      caf::anon_send(st.reaper, released_atom::value, name);
    st.pool.deleted(name);
    then(local(self) ? why : std::optional<failure>{});
    wake_waiting(self, name);
  };
  self->request(st.cp, st.opts.call_timeout, delete_atom::value, s.guest_id)
      .then([done](sandbox_deleted&) mutable { done(std::nullopt); },
            [done](caf::error& e) mutable {
              auto f = to_failure(e);
              done(f.code == ec::not_found ? std::nullopt : std::optional<failure>{f});
            });
}

/// Stops a stopping slot's guest (memory freed, files kept); `then()` once the pool knows.
/// CreateOS has no stop: its guest is deleted instead.
template<class F>
void stop_guest(self_ptr self, const session_pool::slot& s, F then) {
  auto& st = self->state;
  auto name = s.name;
  auto done = [self, name, then](bool ok) mutable {
    self->state.pool.stopped(name, ok, steady::now());
    schedule_expiry(self); // the retention's end
    then();
    wake_waiting(self, name);
  };
  if (!local(self)) {
    self->request(st.cp, st.opts.call_timeout, delete_atom::value, s.guest_id)
        .then(
            [self, name, done](sandbox_deleted&) mutable {
              caf::anon_send(self->state.reaper, released_atom::value, name);
              done(false);
            },
            [self, name, done](caf::error&) mutable {
              caf::anon_send(self->state.reaper, reap_atom::value, name);
              done(false);
            });
    return;
  }
  self->request(st.cp, st.opts.call_timeout, stop_atom::value, s.guest_id)
      .then([done](sandbox_view&) mutable { done(true); },
            [done](caf::error&) mutable { done(false); });
}

/// Schedules the next idle check at the pool's next expiry.
void schedule_expiry(self_ptr self) {
  auto next = self->state.pool.next_expiry();
  if (!next) return;
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - steady::now());
  if (wait.count() < 0) wait = std::chrono::milliseconds{0};
  self->delayed_send(self, wait + std::chrono::milliseconds{5}, tick_atom::value);
}

/// The session's guest is running (created or woken): DeerFlow's layout made (an exec,
/// which also wakes a stopped guest), the thread's uploads copied in; then the slot is
/// active and the acquire answered.
void prepare(self_ptr self, const std::string& name, std::string guest_id, bool reused,
             info_promise rp) {
  auto& st = self->state;
  auto req = st.pool.find(name)->req;
  auto failed = [self, name, guest_id, rp](failure f) mutable {
    auto& st = self->state;
    // The slot is forgotten: its guest is stopped, or it would run uncounted past the cap
    // (the next acquire finds it again by name).
    if (local(self))
      self->request(st.cp, st.opts.call_timeout, stop_atom::value, guest_id)
          .then([](sandbox_view&) {}, [](caf::error&) {});
    st.pool.create_failed(name);
    rp.deliver(make_error(f.code, f.message));
    wake_waiting(self, name);
  };
  exec_request mkdir{"mkdir",
                     {"-p", "--", "/mnt/user-data/workspace", "/mnt/user-data/uploads",
                      "/mnt/user-data/outputs"}};
  self->request(st.cp, st.opts.call_timeout, exec_atom::value, guest_id, std::move(mkdir),
                uint64_t{30'000})
      .then(
          [self, name, guest_id, reused, req, rp, failed](exec_result& r) mutable {
            if (r.exit_code != 0)
              return failed(failure{ec::guest_failed, "making DeerFlow's /mnt/user-data "
                                                      "failed: " +
                                                          r.stderr_text});
            auto done = [self, name, guest_id, reused, rp](std::optional<uint64_t> n) mutable {
              auto& st = self->state;
              st.pool.created(name, guest_id);
              auto info = info_of(*st.pool.find(name), reused);
              info.synced_files = n;
              rp.deliver(std::move(info));
              wake_waiting(self, name);
            };
            if (req.thread_dir.empty()) return done(std::nullopt);
            auto task =
                self->spawn<caf::detached>(session_task, self->state.cp, self->state.opts.task);
            self->request(task, sync_limit, put_atom::value, guest_id, req.thread_dir)
                .then([done](uint64_t n) mutable { done(n); },
                      [failed](caf::error& e) mutable { failed(to_failure(e)); });
          },
          [failed](caf::error& e) mutable { failed(to_failure(e)); });
}

/// After a refused create (most likely the name is taken: a guest this server made before
/// a restart, stopped or running), the live guest of that name is the session's.
void adopt(self_ptr self, const std::string& name, failure create_failed, info_promise rp) {
  auto& st = self->state;
  self->request(st.cp, st.opts.call_timeout, list_atom::value, std::string{})
      .then(
          [self, name, create_failed, rp](sandbox_list& all) mutable {
            for (auto& v : all.data)
              if (v.name == name && v.status != sandbox_status::destroyed &&
                  v.status != sandbox_status::failed && v.status != sandbox_status::error &&
                  v.status != sandbox_status::destroying)
                return prepare(self, name, v.id, true, rp);
            self->state.pool.create_failed(name);
            rp.deliver(make_error(create_failed.code, create_failed.message));
            wake_waiting(self, name);
          },
          [self, name, rp](caf::error& e) mutable {
            self->state.pool.create_failed(name);
            rp.deliver(std::move(e));
            wake_waiting(self, name);
          });
}

/// The guest's mounts: DeerFlow's directories on the workspace volume, /mnt/skills
/// read-only, then the session's own.
std::vector<sandbox_mount> guest_mounts(self_ptr self, const session_request& req) {
  auto& o = self->state.opts;
  std::vector<sandbox_mount> out;
  out.push_back({"", user_data_dir, "/mnt/user-data", false});
  out.push_back({"", acp_workspace_dir, "/mnt/acp-workspace", false});
  if (o.skills_dir.empty())
    out.push_back({"", empty_skills_dir, "/mnt/skills", true});
  else
    out.push_back({o.skills_dir, "", "/mnt/skills", true});
  out.insert(out.end(), req.mounts.begin(), req.mounts.end());
  return out;
}

/// The shape a session's `memory_mib` / `cpus` ask for (session_shape under the server's
/// pin, floor and maximum).
result<shape> sized_shape(self_ptr self, const session_request& req) {
  auto& o = self->state.opts;
  return session_shape(o.catalog, req.memory_mib, req.cpus, o.provider.memory_floor_mib,
                       o.settings.pinned_shape, o.max_memory_mib);
}

void create(self_ptr self, const std::string& name, session_request req, info_promise rp) {
  auto& st = self->state;
  auto s = st.opts.settings;
  s.allow_network = req.allow_network;
  if (!req.image.empty()) s.rootfs = req.image;
  auto where = policy::place(s, st.opts.provider, st.opts.catalog);
  if (where && (req.memory_mib || req.cpus)) {
    auto sized = sized_shape(self, req);
    if (sized)
      where->chosen = std::move(*sized);
    else
      where = sized.error();
  }
  if (!where) {
    st.pool.create_failed(name);
    rp.deliver(make_error(where.error().code, where.error().message));
    return wake_waiting(self, name);
  }
  sandbox_create_request create;
  create.shape = where->chosen.id;
  create.rootfs = where->rootfs;
  create.isolation = where->isolation;
  create.name = name;
  create.egress = where->egress;
  // Every session guest can serve ports (bridge/API.md, "Service URLs"): serve reaches them
  // with the control plane's key, and no port is reachable without a URL serve signed. On
  // CreateOS the URL is public, so only when the operator opted in.
  create.ingress_enabled = policy::ingress_allowed(s, st.opts.provider);
  if (local(self)) {
    create.persistent = true;
    // This actor stops idle guests itself; the control plane's own idle TTL is the backstop
    // for a server that died (past twice the timeout, at least an hour, so an active
    // session is not stopped under a quiet agent).
    auto idle = req.idle_timeout_seconds ? int64_t{*req.idle_timeout_seconds}
                                         : int64_t{st.opts.pool.idle_timeout.count()};
    create.idle_ttl_seconds = idle == 0 ? 0u
                                        : static_cast<uint32_t>(std::min<int64_t>(
                                              std::max<int64_t>(2 * idle, 3600), UINT32_MAX));
    create.delete_after_stop_seconds =
        static_cast<uint32_t>(std::min<int64_t>(st.opts.pool.retention.count(), UINT32_MAX));
    create.mounts = guest_mounts(self, req);
  } else {
    // CreateOS: an ephemeral guest the reaper knows before it can exist.
    self->send(st.reaper, track_atom::value, name);
  }
  self->request(st.cp, st.opts.call_timeout, create_atom::value, std::move(create))
      .then(
          [self, name, rp](sandbox_created& c) mutable {
            if (!local(self))
              caf::anon_send(self->state.reaper, created_atom::value, name, c.id);
            prepare(self, name, c.id, false, rp);
          },
          [self, name, rp](caf::error& e) mutable {
            if (!local(self)) {
              caf::anon_send(self->state.reaper, refused_atom::value, name);
              self->state.pool.create_failed(name);
              rp.deliver(std::move(e));
              return wake_waiting(self, name);
            }
            adopt(self, name, to_failure(e), rp);
          });
}

/// `path` resolved (symlinks followed) under a mount root, else policy_refused naming them.
result<std::string> under_roots(self_ptr self, const std::string& what,
                                const std::string& path) {
  auto& roots = self->state.opts.mount_roots;
  std::error_code ec;
  auto real = std::filesystem::weakly_canonical(path, ec).string();
  for (auto& r : roots)
    if (!ec && (real == r || (real.size() > r.size() && real.compare(0, r.size(), r) == 0 &&
                              (r == "/" || real[r.size()] == '/'))))
      return real;
  std::string names;
  for (auto& r : roots)
    names += (names.empty() ? "" : ", ") + r;
  return fail(ec::policy_refused,
              what + " " + path + " is not under a directory the operator allows " +
                  "(GUESTFLOW_SESSION_MOUNT_ROOTS: " + (names.empty() ? "none" : names) + ")");
}

/// The request's host paths checked and resolved (every mount's and the thread dir), and
/// its memory_mib / cpus met by a shape: refused before the pool changes anything.
result<session_request> checked(self_ptr self, session_request req) {
  if (req.memory_mib || req.cpus) {
    auto sized = sized_shape(self, req);
    if (!sized) return sized.error();
  }
  if (!local(self) && (!req.mounts.empty() || !req.thread_dir.empty()))
    return fail(ec::policy_refused, "mounts and thread_dir need a local control plane");
  for (auto& m : req.mounts) {
    auto real = under_roots(self, "mount host_path", m.host_path);
    if (!real) return real.error();
    m.host_path = *real;
  }
  if (!req.thread_dir.empty()) {
    auto real = under_roots(self, "thread_dir", req.thread_dir);
    if (!real) return real.error();
    req.thread_dir = *real;
  }
  return req;
}

void acquire(self_ptr self, session_request req, info_promise rp) {
  auto& st = self->state;
  auto name = session_guest_name(st.opts.owner, req.user_id, req.thread_id);
  auto d = st.pool.acquire(name, req, steady::now());
  using kind = session_pool::decision::kind;
  switch (d.what) {
  case kind::ready: {
    auto& slot = *st.pool.find(name);
    if (slot.req.thread_dir.empty()) {
      rp.deliver(info_of(slot, true));
      return;
    }
    // A warm guest reclaimed: the uploads that arrived meanwhile go in.
    auto task = self->spawn<caf::detached>(session_task, st.cp, st.opts.task);
    self->request(task, sync_limit, put_atom::value, slot.guest_id, slot.req.thread_dir)
        .then(
            [self, name, rp](uint64_t n) mutable {
              auto slot = self->state.pool.find(name);
              if (!slot) {
                rp.deliver(make_error(ec::not_found, "no session " + name));
                return;
              }
              auto info = info_of(*slot, true);
              info.synced_files = n;
              rp.deliver(std::move(info));
            },
            [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
    return;
  }
  case kind::wait:
    st.waiting[name].emplace_back(std::move(req), rp);
    return;
  case kind::refuse:
    rp.deliver(make_error(d.why.code, d.why.message));
    return;
  case kind::create:
  case kind::wake:
    break;
  }
  auto go = [self, name, req, rp, wake = d.what == kind::wake, id = d.guest_id]() mutable {
    if (wake) return prepare(self, name, id, true, rp);
    create(self, name, std::move(req), rp);
  };
  if (!d.evict) return go();
  // Room first, then the guest: the cap is what the host is sized for.
  stop_guest(self, *st.pool.find(*d.evict), go);
}

/// The active slot of session `id` (a command or file call needs one).
result<const session_pool::slot*> active(self_ptr self, const std::string& id) {
  if (self->state.stopping) return fail(ec::unavailable, "server shutting down");
  auto slot = self->state.pool.find(id);
  if (!slot || slot->st == session_pool::state::deleting)
    return fail(ec::not_found, "no session " + id);
  if (slot->st == session_pool::state::creating)
    return fail(ec::bad_request, "session " + id + " is still being created");
  if (slot->st != session_pool::state::active)
    return fail(ec::bad_request, "session " + id + " is released: acquire it again");
  return slot;
}

session_task_actor spawn_task(self_ptr self) {
  return self->spawn(session_task, self->state.cp, self->state.opts.task);
}

/// A task for a command: tracked until it quits, so a drain can stop it.
session_task_actor spawn_command(self_ptr self) {
  auto task = spawn_task(self);
  self->monitor(task);
  self->state.commands.emplace(task.address(), task);
  return task;
}

/// Releases `id` into the warm pool, its outputs first copied back to its thread dir (an
/// active session only; a failed copy leaves it active and answers why).
void release(self_ptr self, const std::string& id, info_promise rp) {
  auto& st = self->state;
  auto slot = st.pool.find(id);
  bool copy = slot && slot->st == session_pool::state::active && !slot->req.thread_dir.empty();
  if (!copy) {
    auto r = st.pool.release(id, steady::now());
    if (!r) {
      rp.deliver(make_error(r.error().code, r.error().message));
      return;
    }
    schedule_expiry(self);
    {
      rp.deliver(info_of(*r, true));
      return;
    }
  }
  if (!st.releasing.insert(id).second) {
    rp.deliver(make_error(ec::bad_request, "session " + id + " is being released"));
    return;
  }
  auto task = self->spawn<caf::detached>(session_task, st.cp, st.opts.task);
  self->request(task, sync_limit, get_atom::value, slot->guest_id, slot->req.thread_dir)
      .then(
          [self, id, rp](uint64_t n) mutable {
            auto& st = self->state;
            st.releasing.erase(id);
            auto r = st.pool.release(id, steady::now());
            if (!r) {
              rp.deliver(make_error(r.error().code, r.error().message));
              return;
            }
            schedule_expiry(self);
            auto info = info_of(*r, true);
            info.synced_files = n;
            rp.deliver(std::move(info));
          },
          [self, id, rp](caf::error& e) mutable {
            self->state.releasing.erase(id);
            rp.deliver(std::move(e));
          });
}

} // namespace

result<session_manager_options> session_options_from_env(const policy::env_map& env) {
  session_manager_options o;
  auto replicas = policy::env_uint(env, "GUESTFLOW_SESSION_REPLICAS", 1, 1000);
  if (!replicas) return replicas.error();
  if (*replicas) o.pool.replicas = static_cast<uint32_t>(**replicas);
  auto idle = policy::env_uint(env, "GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS", 0, 604'800);
  if (!idle) return idle.error();
  if (*idle) o.pool.idle_timeout = std::chrono::seconds{**idle};
  auto keep = policy::env_uint(env, "GUESTFLOW_SESSION_RETENTION_SECONDS", 0, 315'360'000);
  if (!keep) return keep.error();
  if (*keep) o.pool.retention = std::chrono::seconds{**keep};
  auto max_mem =
      policy::env_uint(env, "GUESTFLOW_SESSION_MAX_MEMORY_MIB", 1, uint64_t{1} << 20);
  if (!max_mem) return max_mem.error();
  o.max_memory_mib = *max_mem;
  auto sync = policy::env_uint(env, "GUESTFLOW_SESSION_SYNC_CAP_BYTES", 1, uint64_t{1} << 40);
  if (!sync) return sync.error();
  if (*sync) o.task.sync_max_bytes = **sync;
  auto cap = policy::env_uint(env, "GUESTFLOW_DOWNLOAD_CAP_BYTES", 1, uint64_t{1} << 40);
  if (!cap) return cap.error();
  if (*cap) o.task.download_cap_bytes = **cap;
  if (auto i = env.find("GUESTFLOW_DOWNLOAD_PREFIX"); i != env.end() && !i->second.empty()) {
    if (i->second[0] != '/' || i->second.find('\0') != std::string::npos)
      return fail(ec::bad_request, "GUESTFLOW_DOWNLOAD_PREFIX: must be an absolute path");
    o.task.download_prefix = i->second;
  }
  if (auto i = env.find("GUESTFLOW_SESSION_MOUNT_ROOTS"); i != env.end()) {
    const auto& v = i->second;
    size_t k = 0;
    while (k <= v.size()) {
      auto j = v.find(':', k);
      if (j == std::string::npos) j = v.size();
      auto root = v.substr(k, j - k);
      k = j + 1;
      if (root.empty()) continue;
      std::error_code ec;
      auto real = std::filesystem::canonical(root, ec);
      if (root[0] != '/' || ec || !std::filesystem::is_directory(real, ec))
        return fail(ec::bad_request, "GUESTFLOW_SESSION_MOUNT_ROOTS: " + root +
                                         " is not an existing absolute directory");
      o.mount_roots.push_back(real.string());
    }
  }
  if (auto i = env.find("GUESTFLOW_SESSION_SKILLS_DIR"); i != env.end() && !i->second.empty()) {
    std::error_code ec;
    auto real = std::filesystem::canonical(i->second, ec);
    if (i->second[0] != '/' || ec || !std::filesystem::is_directory(real, ec))
      return fail(ec::bad_request, "GUESTFLOW_SESSION_SKILLS_DIR: " + i->second +
                                       " is not an existing absolute directory");
    o.skills_dir = real.string();
  }
  return o;
}

session_manager_actor::behavior_type
session_manager(session_manager_actor::stateful_pointer<session_manager_state> self,
                controlplane_actor cp, reaper_actor reaper, session_manager_options opts) {
  auto& st = self->state;
  st.cp = std::move(cp);
  st.reaper = std::move(reaper);
  st.pool = session_pool{opts.pool};
  st.opts = std::move(opts);
  self->set_down_handler([self](caf::down_msg& dm) { self->state.commands.erase(dm.source); });
  return {
      [self](acquire_atom, session_request& req) {
        auto rp = self->make_response_promise<info_promise>();
        auto ok = checked(self, std::move(req));
        if (!ok)
          rp.deliver(make_error(ok.error().code, ok.error().message));
        else
          acquire(self, std::move(*ok), rp);
        return rp;
      },
      [self](release_atom, std::string& id) {
        auto rp = self->make_response_promise<info_promise>();
        release(self, id, rp);
        return rp;
      },
      [self](delete_atom, std::string& id) {
        auto& st = self->state;
        auto rp = self->make_response_promise<info_promise>();
        auto slot = st.pool.begin_delete(id);
        if (!slot) {
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return rp;
        }
        auto info = info_of(*slot, true);
        delete_guest(self, *slot, [rp, info](std::optional<failure> why) mutable {
          if (why)
            rp.deliver(make_error(why->code, why->message));
          else
            rp.deliver(info);
        });
        return rp;
      },
      [self](get_atom, std::string& id) -> caf::result<session_info> {
        auto slot = self->state.pool.find(id);
        if (!slot || slot->st == session_pool::state::deleting)
          return make_error(ec::not_found, "no session " + id);
        return info_of(*slot, true);
      },
      [self](run_atom, std::string& id,
             session_command& cmd) -> caf::delegated<command_outcome> {
        auto slot = active(self, id);
        if (!slot) {
          auto rp = self->make_response_promise<caf::typed_response_promise<command_outcome>>();
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return {};
        }
        return self->delegate(spawn_command(self), run_atom::value, (*slot)->guest_id,
                              std::move(cmd));
      },
      [self](stream_atom, std::string& id, session_command& cmd,
             line_relay_actor& relay) -> caf::delegated<command_outcome> {
        auto slot = active(self, id);
        if (!slot) {
          auto rp = self->make_response_promise<caf::typed_response_promise<command_outcome>>();
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return {};
        }
        return self->delegate(spawn_command(self), stream_atom::value, (*slot)->guest_id,
                              std::move(cmd), std::move(relay));
      },
      [self](fetch_atom, std::string& id,
             session_file_call& call) -> caf::delegated<session_file_answer> {
        auto slot = active(self, id);
        if (!slot) {
          auto rp =
              self->make_response_promise<caf::typed_response_promise<session_file_answer>>();
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return {};
        }
        return self->delegate(spawn_task(self), fetch_atom::value, (*slot)->guest_id,
                              std::move(call));
      },
      [self](drain_atom) {
        auto& st = self->state;
        st.stopping = true;
        for (auto& [addr, task] : st.commands)
          caf::anon_send(task, cancel_atom::value);
      },
      [self](tick_atom) {
        auto& st = self->state;
        for (auto& slot : st.pool.expire(steady::now()))
          stop_guest(self, slot, [] {});
        schedule_expiry(self);
      },
  };
}

} // namespace guestflow
