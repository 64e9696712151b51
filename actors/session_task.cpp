#include "actors/session_task.hpp"

#include "actors/guest_assets.hpp"
#include "common/unique_fd.hpp"
#include "messages/base64.hpp"
#include "messages/bridge.hpp"
#include "messages/type_ids.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <memory>
#include <random>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace guestflow {

namespace {

using self_ptr = session_task_actor::stateful_pointer<session_task_state>;

/// cd when asked, then the login shell; "$1" and "$2" are the cwd and the command.
constexpr std::string_view command_script =
    "if [ -n \"$1\" ]; then cd -- \"$1\" || exit 1; fi; exec /bin/sh -lc \"$2\" </dev/null";

const std::string& tool_source() {
  static const std::string source = [] {
    for (auto& a : guest_assets())
      if (a.name == "session_files.py") return std::string{a.content};
    return std::string{};
  }();
  return source;
}

std::string stage_path() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  // Under /workspace: the file API may refuse the guest's /tmp mount (a tmpfs).
  std::string out = "/workspace/.gf-session/";
  for (int i = 0; i < 16; ++i)
    out.push_back(hex[rng() & 15]);
  return out;
}

uint64_t ms(std::chrono::seconds s) {
  return static_cast<uint64_t>(s.count()) * 1000;
}

/// One piece of output: kept in order (a buffered answer) and, streamed, sent on at once.
void add_chunk(self_ptr self, bool is_stderr, std::string text) {
  auto& st = self->state;
  auto& o = st.outcome;
  if (st.relay) caf::anon_send(st.relay, encode_command_line({is_stderr, text}), false);
  if (!o.chunks.empty() && o.chunks.back().is_stderr == is_stderr)
    o.chunks.back().text += text;
  else
    o.chunks.push_back({is_stderr, std::move(text)});
}

using command_promise = caf::typed_response_promise<command_outcome>;

/// Ends a command: the last line to the relay (streamed), the outcome or failure to `rp`.
void end_command(self_ptr self, command_promise rp, result<command_outcome> r) {
  auto& st = self->state;
  if (st.relay) {
    caf::anon_send(st.relay, r ? encode_command_end(*r) : encode_error(r.error()), true);
    st.relay = nullptr;
  }
  if (r)
    rp.deliver(std::move(*r));
  else
    rp.deliver(make_error(r.error().code, r.error().message));
  self->quit();
}

/// Kills the running command (the control plane kills its process group on the stream's
/// cancel); its answer becomes `why`.
void stop_command(self_ptr self, failure why) {
  auto& st = self->state;
  if (st.stop) return;
  st.stop = std::move(why);
  caf::anon_send(st.cp, cancel_atom::value, caf::actor_cast<exec_sink_actor>(self));
}

/// `sh -lc` in the guest as a streamed exec whose lines come back to this actor.
void run_command(self_ptr self, std::string guest, session_command cmd, command_promise rp) {
  auto started = std::chrono::steady_clock::now();
  auto timeout = cmd.timeout_seconds;
  // The host's deadline is a backstop past the guest's own timeout.
  auto deadline = uint64_t{timeout} * 1000 + 30'000;
  self->request(self->state.cp, caf::duration{std::chrono::milliseconds{deadline + 10'000}},
                stream_atom::value, guest, session_exec_request(cmd), deadline,
                caf::actor_cast<exec_sink_actor>(self))
      .then(
          [self, rp, started](int32_t raw) mutable {
            auto& o = self->state.outcome;
            o.exec_ms =
                static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - started)
                                          .count());
            // `timeout --kill-after` TERMs at the limit and exits 124: the guest's clock
            // decides, so a stall of the host (counted in exec_ms) never reads as one.
            o.timed_out = raw == 124;
            o.exit_code = o.timed_out ? -1 : raw;
            if (auto& stop = self->state.stop) return end_command(self, rp, *stop);
            end_command(self, rp, std::move(o));
          },
          [self, rp](caf::error& e) mutable {
            end_command(self, rp, self->state.stop.value_or(to_failure(e)));
          });
}

/// `{"op": …, "path_b64": …, …}`: every byte string in base64, so the arguments are ASCII.
std::string tool_args(const session_file_call& c, const session_task_options& o,
                      const std::string& stage) {
  std::string a = "{\"op\":" + quote_json(c.op) +
                  ",\"path_b64\":" + quote_json(base64_encode(c.path)) +
                  ",\"stage\":" + quote_json(stage);
  auto num = [&](std::string_view k, uint64_t v) {
    a += ",\"" + std::string{k} + "\":" + std::to_string(v);
  };
  auto flag = [&](std::string_view k, bool v) {
    a += ",\"" + std::string{k} + "\":" + (v ? "true" : "false");
  };
  if (c.start_line) num("start_line", *c.start_line);
  if (c.end_line) num("end_line", *c.end_line);
  flag("append", c.append);
  a += ",\"pattern_b64\":" + quote_json(base64_encode(c.pattern));
  a += ",\"glob_b64\":" + quote_json(base64_encode(c.glob));
  flag("include_dirs", c.include_dirs);
  flag("literal", c.literal);
  flag("case_sensitive", c.case_sensitive);
  flag("ignore", c.ignore);
  num("max_depth", c.max_depth);
  if (c.max_results) num("max_results", c.max_results);
  a += ",\"prefix_b64\":" + quote_json(base64_encode(o.download_prefix));
  num("cap", o.download_cap_bytes);
  return a + "}";
}

using file_promise = caf::typed_response_promise<session_file_answer>;

/// Runs the tool with `args`; `then(json)` on OK, else the promise gets the failure.
template<class F>
void run_tool(self_ptr self, std::string guest, std::string args, file_promise rp, F then) {
  auto& st = self->state;
  self->request(st.cp, st.opts.call_timeout + std::chrono::seconds{10}, exec_atom::value, guest,
                session_tool_request(args), ms(st.opts.call_timeout))
      .then(
          [self, rp, then](exec_result& r) mutable {
            auto answer = session_tool_answer(r);
            if (!answer) {
              rp.deliver(make_error(answer.error().code, answer.error().message));
              return self->quit();
            }
            then(std::move(*answer));
          },
          [self, rp](caf::error& e) mutable {
            rp.deliver(std::move(e));
            self->quit();
          });
}

void finish(self_ptr self, file_promise rp, std::string body, std::string type) {
  rp.deliver(session_file_answer{std::move(body), std::move(type)});
  self->quit();
}

/// `{"data_b64":"…"}` → the bytes.
result<std::string> data_of(const std::string& json) {
  constexpr std::string_view head = "{\"data_b64\":\"";
  if (json.size() < head.size() + 2 || json.compare(0, head.size(), head) != 0 ||
      json.compare(json.size() - 2, 2, "\"}") != 0)
    return fail(ec::guest_failed, "unexpected answer of the file tool");
  auto bytes =
      base64_decode(std::string_view{json}.substr(head.size(), json.size() - head.size() - 2));
  if (!bytes) return fail(ec::guest_failed, "unexpected answer of the file tool");
  return *bytes;
}

void file_call(self_ptr self, std::string guest, session_file_call call, file_promise rp) {
  auto& st = self->state;
  auto stage = stage_path();
  auto args = tool_args(call, st.opts, stage);
  if (call.op == "write") {
    // The bytes go to a staging file under a name of our own; the tool then checks the
    // real path and copies them, so a refused path has nothing written.
    self->request(st.cp, st.opts.call_timeout, put_atom::value, guest, stage,
                  shared_bytes{std::move(call.body)})
        .then(
            [self, guest, args, rp](bool) mutable {
              run_tool(self, guest, args, rp, [self, rp](std::string json) mutable {
                finish(self, rp, std::move(json), "application/json");
              });
            },
            [self, rp](caf::error& e) mutable {
              rp.deliver(std::move(e));
              self->quit();
            });
    return;
  }
  if (call.op == "download") {
    run_tool(self, guest, args, rp, [self, guest, stage, rp](std::string) mutable {
      auto& st = self->state;
      // The cap binds again while the bytes travel: a file that grew after the tool's
      // check is cut off by the control-plane client, not buffered whole.
      self->request(st.cp, st.opts.call_timeout, fetch_atom::value, guest, stage,
                    st.opts.download_cap_bytes)
          .then(
              [self, guest, stage, rp](std::string& bytes) mutable {
                caf::anon_send(self->state.cp, exec_atom::value, guest,
                               exec_request{"rm", {"-f", "--", stage}}, uint64_t{30'000});
                finish(self, rp, std::move(bytes), "application/octet-stream");
              },
              [self, guest, stage, rp](caf::error& e) mutable {
                caf::anon_send(self->state.cp, exec_atom::value, guest,
                               exec_request{"rm", {"-f", "--", stage}}, uint64_t{30'000});
                rp.deliver(std::move(e));
                self->quit();
              });
    });
    return;
  }
  auto is_read = call.op == "read";
  run_tool(self, guest, args, rp, [self, rp, is_read](std::string json) mutable {
    if (!is_read) return finish(self, rp, std::move(json), "application/json");
    auto bytes = data_of(json);
    if (!bytes) {
      rp.deliver(make_error(bytes.error().code, bytes.error().message));
      return self->quit();
    }
    finish(self, rp, std::move(*bytes), "text/plain; charset=utf-8");
  });
}

// -- thread directory sync: the host side (blocking; the task runs detached for it) --------

/// openat2 below `dirfd` refusing every symlink and `..` out of it.
int open_beneath(int dirfd, const std::string& rel, uint64_t flags, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how));
}

/// An absolute directory opened without following a symlink anywhere in it.
unique_fd open_dir(const std::string& dir) {
  unique_fd root{::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (!root || dir.size() < 2 || dir[0] != '/') return unique_fd{};
  return unique_fd{open_beneath(root.get(), dir.substr(1), O_RDONLY | O_DIRECTORY)};
}

failure sync_too_large(uint64_t max_files, uint64_t max_bytes) {
  return failure{ec::artifact_too_large,
                 "a thread directory's sync is capped at " + std::to_string(max_files) +
                     " files and " + std::to_string(max_bytes) +
                     " bytes together (GUESTFLOW_SESSION_SYNC_CAP_BYTES); nothing was copied"};
}

bool walk_files(int dirfd, const std::string& prefix, int depth, std::vector<host_file>& out,
                uint64_t& total, uint64_t max_files, uint64_t max_bytes) {
  unique_fd own{::fcntl(dirfd, F_DUPFD_CLOEXEC, 0)};
  DIR* d = own ? ::fdopendir(own.get()) : nullptr;
  if (!d) return true;
  own.release();
  std::vector<std::string> names;
  while (auto* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  bool ok = true;
  for (auto& name : names) {
    struct stat st {};
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    auto rel = prefix.empty() ? name : prefix + "/" + name;
    if (S_ISDIR(st.st_mode) && depth < 64) {
      unique_fd sub{open_beneath(::dirfd(d), name, O_RDONLY | O_DIRECTORY)};
      if (sub && !walk_files(sub.get(), rel, depth + 1, out, total, max_files, max_bytes)) {
        ok = false;
        break;
      }
    } else if (S_ISREG(st.st_mode) && name.rfind(".upload-", 0) != 0) {
      total += static_cast<uint64_t>(st.st_size);
      out.push_back({rel, static_cast<uint64_t>(st.st_size)});
      if (out.size() > max_files || total > max_bytes) {
        ok = false;
        break;
      }
    }
  }
  ::closedir(d);
  return ok;
}

/// The parts of a relative path; nullopt when one is empty, `.` or `..`.
std::optional<std::vector<std::string>> plain_parts(const std::string& rel) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= rel.size()) {
    auto j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    auto part = rel.substr(i, j - i);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos)
      return std::nullopt;
    parts.push_back(std::move(part));
    i = j + 1;
  }
  return parts;
}

} // namespace

result<std::vector<host_file>> host_files_below(const std::string& dir, uint64_t max_files,
                                                uint64_t max_bytes) {
  std::vector<host_file> out;
  auto root = open_dir(dir);
  if (!root) {
    if (errno == ENOENT) return out;
    return fail(ec::policy_refused,
                dir + " cannot be read without following a symlink: " + std::strerror(errno));
  }
  uint64_t total = 0;
  if (!walk_files(root.get(), "", 0, out, total, max_files, max_bytes))
    return sync_too_large(max_files, max_bytes);
  std::sort(out.begin(), out.end(),
            [](const host_file& a, const host_file& b) { return a.rel < b.rel; });
  return out;
}

result<std::string> read_host_file(const std::string& dir, const std::string& rel) {
  auto root = open_dir(dir);
  unique_fd f{root ? open_beneath(root.get(), rel, O_RDONLY | O_NOFOLLOW) : -1};
  if (!f)
    return fail(ec::policy_refused,
                "cannot read " + dir + "/" + rel +
                    " without following a symlink: " + std::strerror(errno));
  std::string out;
  char buf[65536];
  for (;;) {
    auto n = ::read(f.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(ec::unavailable, "reading " + rel + ": " + std::strerror(errno));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

result<bool> write_host_file(const std::string& dir, const std::string& rel,
                             const std::string& bytes) {
  auto parts = plain_parts(rel);
  if (!parts) return fail(ec::bad_request, "not a plain relative path: " + rel);
  auto d = open_dir(dir);
  if (!d && errno == ENOENT) return fail(ec::not_found, "no directory " + dir);
  if (!d)
    return fail(ec::policy_refused,
                dir + " cannot be opened without following a symlink: " + std::strerror(errno));
  for (size_t i = 0; i + 1 < parts->size(); ++i) {
    auto& part = (*parts)[i];
    if (::mkdirat(d.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      return fail(ec::unavailable,
                  "cannot create " + part + " in " + dir + ": " + std::strerror(errno));
    unique_fd next{open_beneath(d.get(), part, O_RDONLY | O_DIRECTORY)};
    if (!next)
      return fail(ec::policy_refused, "the host's " + part + " of " + rel +
                                          " is not a directory (a symlink is never followed)");
    d = std::move(next);
  }
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  auto tmp = ".gf-sync-" + std::to_string(rng());
  unique_fd f{open_beneath(d.get(), tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644)};
  if (!f) return fail(ec::unavailable, "cannot write in " + dir + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < bytes.size()) {
    auto n = ::write(f.get(), bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto why = std::strerror(errno);
      ::unlinkat(d.get(), tmp.c_str(), 0);
      return fail(ec::unavailable, "writing " + rel + ": " + why);
    }
    off += static_cast<size_t>(n);
  }
  f.reset();
  if (::renameat(d.get(), tmp.c_str(), d.get(), parts->back().c_str()) != 0) {
    auto why = std::strerror(errno);
    ::unlinkat(d.get(), tmp.c_str(), 0);
    return fail(ec::bad_request, "cannot put " + rel + " in place: " + why);
  }
  return true;
}

namespace {

using count_promise = caf::typed_response_promise<uint64_t>;

void end_sync(self_ptr self, count_promise rp, result<uint64_t> r) {
  if (r)
    rp.deliver(*r);
  else
    rp.deliver(make_error(r.error().code, r.error().message));
  self->quit();
}

/// Puts files[i…] into the guest, one at a time.
void put_next(self_ptr self, std::string guest, std::string dir,
              std::shared_ptr<std::vector<host_file>> files, size_t i, count_promise rp) {
  if (i == files->size()) return end_sync(self, rp, uint64_t{files->size()});
  auto bytes = read_host_file(dir, (*files)[i].rel);
  if (!bytes) return end_sync(self, rp, bytes.error());
  auto& st = self->state;
  self->request(st.cp, st.opts.call_timeout, put_atom::value, guest,
                std::string{guest_uploads_dir} + "/" + (*files)[i].rel,
                shared_bytes{std::move(*bytes)})
      .then([self, guest, dir, files, i,
             rp](bool) mutable { put_next(self, guest, dir, files, i + 1, rp); },
            [self, rp](caf::error& e) mutable { end_sync(self, rp, to_failure(e)); });
}

void uploads_in(self_ptr self, std::string guest, std::string thread_dir, count_promise rp) {
  auto& o = self->state.opts;
  auto dir = thread_dir + "/uploads";
  auto files = host_files_below(dir, o.sync_max_files, o.sync_max_bytes);
  if (!files) return end_sync(self, rp, files.error());
  put_next(self, std::move(guest), std::move(dir),
           std::make_shared<std::vector<host_file>>(std::move(*files)), 0, rp);
}

/// Fetches files[i…] from the guest into the thread dir's outputs, one at a time.
void get_next(self_ptr self, std::string guest, std::string dir,
              std::shared_ptr<std::vector<host_file>> files, size_t i, uint64_t left,
              count_promise rp) {
  if (i == files->size()) return end_sync(self, rp, uint64_t{files->size()});
  auto& st = self->state;
  auto rel = (*files)[i].rel;
  // The cap binds while the bytes travel: a file grown since the listing is cut off.
  self->request(st.cp, st.opts.call_timeout, fetch_atom::value, guest,
                std::string{guest_outputs_dir} + "/" + rel, left)
      .then(
          [self, guest, dir, files, i, left, rel, rp](std::string& bytes) mutable {
            if (auto ok = write_host_file(dir, "outputs/" + rel, bytes); !ok)
              return end_sync(self, rp, ok.error());
            get_next(self, guest, dir, files, i + 1, left - bytes.size(), rp);
          },
          [self, rp](caf::error& e) mutable { end_sync(self, rp, to_failure(e)); });
}

void outputs_out(self_ptr self, std::string guest, std::string thread_dir, count_promise rp) {
  auto& st = self->state;
  session_file_call list;
  list.op = "list";
  list.path = guest_outputs_dir;
  list.max_depth = 64;
  list.ignore = false;
  self->request(st.cp, st.opts.call_timeout + std::chrono::seconds{10}, exec_atom::value, guest,
                session_tool_request(tool_args(list, st.opts, stage_path())),
                ms(st.opts.call_timeout))
      .then(
          [self, guest, thread_dir, rp](exec_result& r) mutable {
            auto& o = self->state.opts;
            auto answer = session_tool_answer(r);
            if (!answer && answer.error().code == ec::not_found)
              return end_sync(self, rp, uint64_t{0});
            if (!answer) return end_sync(self, rp, answer.error());
            bool truncated = false;
            auto entries = decode_listing(*answer, truncated);
            if (!entries) return end_sync(self, rp, entries.error());
            auto files = std::make_shared<std::vector<host_file>>();
            uint64_t total = 0;
            const std::string prefix = std::string{guest_outputs_dir} + "/";
            for (auto& e : *entries) {
              if (e.type != "file") continue; // links are never followed out
              if (e.path.compare(0, prefix.size(), prefix) != 0) continue;
              files->push_back({e.path.substr(prefix.size()), e.size});
              total += e.size;
            }
            if (truncated || files->size() > o.sync_max_files || total > o.sync_max_bytes)
              return end_sync(self, rp, sync_too_large(o.sync_max_files, o.sync_max_bytes));
            get_next(self, guest, thread_dir, files, 0, o.sync_max_bytes, rp);
          },
          [self, rp](caf::error& e) mutable { end_sync(self, rp, to_failure(e)); });
}

} // namespace

exec_request session_exec_request(const session_command& cmd) {
  exec_request req;
  req.cmd = "timeout";
  req.args = {"--kill-after=5", std::to_string(cmd.timeout_seconds), "env"};
  for (auto& [k, v] : cmd.env)
    req.args.push_back(k + "=" + v);
  req.args.push_back("/bin/sh");
  req.args.push_back("-c");
  req.args.push_back(std::string{command_script});
  req.args.push_back("sh");
  req.args.push_back(cmd.cwd.value_or(""));
  req.args.push_back(cmd.command);
  return req;
}

exec_request session_tool_request(const std::string& args_json) {
  return exec_request{"python3", {"-I", "-c", tool_source(), args_json}};
}

result<std::string> session_tool_answer(const exec_result& r) {
  const auto& out = r.stdout_text;
  auto line = out.substr(0, out.find('\n'));
  if (r.exit_code == 0 && line.rfind("OK ", 0) == 0) return line.substr(3);
  if (r.exit_code == 0 && line.rfind("ERR ", 0) == 0) {
    auto rest = std::string_view{line}.substr(4);
    auto space = rest.find(' ');
    auto code = ec_from_string(rest.substr(0, space));
    auto message = space == std::string_view::npos
                       ? result<std::string>{fail(ec::guest_failed, "")}
                       : base64_decode(rest.substr(space + 1));
    if (code && message) return fail(*code, *message);
  }
  auto tail = r.stderr_text.size() > 2000 ? r.stderr_text.substr(r.stderr_text.size() - 2000)
                                          : r.stderr_text;
  return fail(ec::guest_failed, "the session file tool failed (exit " +
                                    std::to_string(r.exit_code) +
                                    "; does the guest image have python3?): " + tail);
}

session_task_actor::behavior_type
session_task(session_task_actor::stateful_pointer<session_task_state> self,
             controlplane_actor cp, session_task_options opts) {
  self->state.cp = std::move(cp);
  self->state.opts = std::move(opts);
  return {
      [self](run_atom, std::string& guest, session_command& cmd) {
        auto rp = self->make_response_promise<command_promise>();
        run_command(self, std::move(guest), std::move(cmd), rp);
        return rp;
      },
      [self](stream_atom, std::string& guest, session_command& cmd, line_relay_actor& relay) {
        auto rp = self->make_response_promise<command_promise>();
        auto& st = self->state;
        st.relay = relay;
        // The relay quits when its client goes away: the command is not wanted any more,
        // and the control plane kills it (its whole process group) on the stream's cancel.
        self->monitor(relay);
        self->set_down_handler([self](caf::down_msg& dm) {
          auto& st = self->state;
          if (!st.relay || dm.source != st.relay.address()) return;
          st.relay = nullptr;
          stop_command(self, failure{ec::cancelled, "the client went away"});
        });
        caf::anon_send(relay, open_atom::value);
        run_command(self, std::move(guest), std::move(cmd), rp);
        return rp;
      },
      [self](cancel_atom) {
        stop_command(self, failure{ec::unavailable, "server shutting down"});
      },
      [self](fetch_atom, std::string& guest, session_file_call& call) {
        auto rp = self->make_response_promise<file_promise>();
        file_call(self, std::move(guest), std::move(call), rp);
        return rp;
      },
      [self](put_atom, std::string& guest, std::string& thread_dir) {
        auto rp = self->make_response_promise<count_promise>();
        uploads_in(self, std::move(guest), std::move(thread_dir), rp);
        return rp;
      },
      [self](get_atom, std::string& guest, std::string& thread_dir) {
        auto rp = self->make_response_promise<count_promise>();
        outputs_out(self, std::move(guest), std::move(thread_dir), rp);
        return rp;
      },
      [self](exec_stream_line& line) {
        using kind = exec_stream_line::kind;
        switch (line.type) {
        case kind::stdout_chunk:
          return add_chunk(self, false, std::move(line.text));
        case kind::stderr_chunk:
          return add_chunk(self, true, std::move(line.text));
        case kind::error:
          return add_chunk(self, true, "[guestflow] " + line.text + "\n");
        default:
          return;
        }
      },
  };
}

} // namespace guestflow
