#include "controlplane/local/guests/gvisor_checkpoint.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr const char* image_file = "checkpoint.img";

fs::path partial_of(const fs::path& dir) {
  auto p = dir;
  p += ".partial";
  return p;
}

/// The image's data and its directory entry on disk before the rename publishes it: a host
/// crash must not leave a checkpoint that looks complete and is not.
bool sync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

/// What runsc said, without the Go stack and state dump a refused save carries (kilobytes).
/// A netstack TCP connection (open, or lingering after its close: TIME_WAIT is a minute)
/// cannot be saved by this runsc: only loopback routes can.
std::string runsc_reason(const std::string& out) {
  constexpr std::string_view rejected = "save rejected due to unsupported networking state: ";
  if (auto at = out.find(rejected); at != std::string::npos) {
    at += rejected.size();
    auto end = out.find('\n', at);
    auto what = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    while (!what.empty() && what.back() == ':')
      what.pop_back();
    return "this runsc cannot save a TCP connection on the guest's network (open, or closed "
           "less than a minute ago): " +
           what;
  }
  auto line = out.substr(0, out.find('\n'));
  if (line.size() > 400) line = line.substr(0, 400) + "...";
  return line;
}

} // namespace

fs::path checkpoint_dir(const fs::path& guest_dir) {
  return guest_dir / "checkpoint";
}

bool has_checkpoint(const fs::path& dir) {
  struct stat st {};
  return ::stat((dir / image_file).c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

result<bool> write_checkpoint(const runsc_runner& runsc, const std::string& container,
                              const fs::path& dir) {
  const auto partial = partial_of(dir);
  std::error_code ec_;
  fs::remove_all(partial, ec_);
  if (::mkdir(partial.c_str(), 0700) != 0)
    return fail(ec::unavailable,
                "cannot create " + partial.string() + ": " + std::strerror(errno));
  auto out = runsc({"checkpoint", "--image-path", partial.string(), container});
  auto failed = [&](const std::string& why) -> failure {
    fs::remove_all(partial, ec_);
    return fail(ec::unavailable, "checkpoint of " + container + " failed: " + why);
  };
  if (!out) return failed(out.error().message);
  if (out->exit_code != 0)
    return failed("runsc exit " + std::to_string(out->exit_code) + ": " +
                  runsc_reason(out->output));
  if (!has_checkpoint(partial)) return failed("runsc wrote no image");
  if (!sync_path(partial / image_file, false) || !sync_path(partial, true))
    return failed(std::string{"fsync: "} + std::strerror(errno));
  fs::remove_all(dir, ec_);
  if (::rename(partial.c_str(), dir.c_str()) != 0) return failed(std::strerror(errno));
  sync_path(dir.parent_path(), true);
  return true;
}

std::vector<std::string> restore_command(const fs::path& dir) {
  return {"restore", "--image-path", dir.string(), "--detach"};
}

void remove_checkpoint(const fs::path& dir) {
  std::error_code ec_;
  fs::remove_all(dir, ec_);
  fs::remove_all(partial_of(dir), ec_);
}

restored_guest restore_or_boot(guest_backend& backend, guest_spec spec, const fs::path& dir,
                               const std::string& from) {
  restored_guest out;
  const bool spend = from == "checkpoint";
  if (spec.isolation == guest_isolation::gvisor && has_checkpoint(dir)) {
    spec.gvisor_command = restore_command(dir);
    out.rt = backend.create(spec);
    if (out.rt) {
      out.started_from = from;
      if (spend) remove_checkpoint(dir);
      return out;
    }
    out.restore_error = "the " + from + " could not be restored (" + out.rt.error().message +
                        "); booted cold from the kept disk";
  }
  spec.gvisor_command.clear();
  out.rt = backend.create(spec);
  // Kept while nothing runs (a start that failed for capacity tries it again).
  if (spend && out.rt) remove_checkpoint(dir);
  return out;
}

// Guest-side programs (they run only inside a gVisor guest, never on the host).

const char* const snapshot_waiter_script = R"py(import os, stat, sys, time
_src, _pre = sys.argv[1], [m for m in sys.argv[2].split(",") if m]
_F, _W = "/tmp/.guestflow-snapshot", "/tmp/.guestflow-snapshot-waiter"
null = os.open("/dev/null", os.O_RDWR)
out = os.dup(1)
os.dup2(null, 1)
os.dup2(null, 2)
failed = []
for m in _pre:
    if m == "guestflow:runner":
        continue
    try:
        __import__(m)
    except BaseException as e:
        failed.append("preload %s: %s: %s" % (m, type(e).__name__, e))
for f in (sys.stdout, sys.stderr):
    try:
        f.flush()
    except BaseException:
        pass
os.mkfifo(_F, 0o600)
os.write(out, ("".join(f + "\n" for f in failed) + "ready\n").encode("utf-8", "replace"))
os.dup2(null, 0)
os.close(out)
fd = os.open(_F, os.O_RDONLY)
os.unlink(_F)
data = b""
while True:
    b = os.read(fd, 65536)
    if not b:
        break
    data += b
os.close(fd)
pid, _, req = data.partition(b"\0")
if not pid.isdigit():
    os._exit(0)
d = "/tmp/.gf" + pid.decode()
child = os.fork()
if child == 0:
    for n, s in ((1, ".o"), (2, ".e")):
        f = os.open(d + s, os.O_WRONLY)
        os.dup2(f, n)
        os.close(f)
    sys.argv = ["-c", _W]
    exec(compile(_src, "python_waiter", "exec"), {"__name__": "__guestflow_waiter__",
                                                  "__builtins__": __builtins__})
    os._exit(0)
while True:
    try:
        if stat.S_ISFIFO(os.stat(_W).st_mode):
            break
    except FileNotFoundError:
        pass
    time.sleep(0.0005)
w = os.open(_W, os.O_WRONLY)
while req:
    req = req[os.write(w, req):]
os.close(w)
_, status = os.waitpid(child, 0)
code = os.waitstatus_to_exitcode(status)
with open(d + ".x", "w") as x:
    x.write(str(code if code >= 0 else 128 - code))
os._exit(0)
)py";

namespace {

/// The handoff is the one wait on a process nothing else watches: the waiting python3,
/// blocked in open() since the snapshot (a restored one opens at once; one that died, say
/// OOM-killed in a guest smaller than the snapshot's, leaves a FIFO without a reader). So a
/// watchdog in the background gets it a bound of its own, snapshot_handoff_seconds: then it
/// marks `$m` and reads the FIFO itself, which ends the writer's wait. Off the handoff's
/// path: a `timeout dd` pipe cost ~85 ms per handoff under gVisor (two more execs), this a
/// fork. After the handoff the waiter is alive and forks the program at once; the relay
/// then waits for the program, which the exec's own deadline and kill govern.
/// The watchdog's TERM is ignored until it knows its sleep's pid (a TERM between the fork
/// and `s=$!` left the sleep running for the whole bound, in the guest's process list), so
/// the writer first leaves `M.c`, which the watchdog reads once it can act on it, and waits
/// for it to be gone.
std::string watched_handoff(const std::string& write, const std::string& m) {
  return "(trap '' TERM; sleep " + std::to_string(snapshot_handoff_seconds) +
         " & s=$!; trap 'kill -9 $s 2>/dev/null; exit 0' TERM; [ -e " + m +
         ".c ] && { kill -9 $s; exit 0; }; wait $s && : > " + m +
         " && cat $f) </dev/null >/dev/null 2>&1 & k=$!\n" + write + "\n: > " + m +
         ".c; kill $k 2>/dev/null; wait $k 2>/dev/null; rm -f " + m + ".c\n";
}

/// The relay: its own pipes carry the program's output; FIFOs named by its pid join them.
std::string relay_script() {
  return "d=/tmp/.gf$$; f=/tmp/.guestflow-snapshot\n"
         "[ -p $f ] && mkfifo -m 600 $d.o $d.e $d.x || exit 125\n" +
         watched_handoff("printf '%s\\0' $$ \"$@\" > $f", "$d.t") +
         "if [ -e $d.t ]; then rm -f $d.o $d.e $d.x $d.t $f; exit 125; fi\n"
         "cat $d.e >&2 & cat $d.o; wait\n"
         "c=$(cat $d.x); [ -n \"$c\" ] || c=137\n"
         "rm -f $d.o $d.e $d.x; exit $c\n";
}

} // namespace

exec_request snapshot_relay(const std::string& request) {
  exec_request r;
  r.cmd = "/bin/sh";
  r.args = {"-c", relay_script(), "guestflow-relay"};
  size_t at = 0;
  while (at < request.size()) {
    auto end = request.find('\0', at);
    if (end == std::string::npos) end = request.size();
    r.args.push_back(request.substr(at, end - at));
    at = end + 1;
  }
  return r;
}

exec_request detached_snapshot_waiter(const std::string& waiter_source,
                                      const std::string& preload) {
  // python3's stdout is a FIFO the exec's cat drains: the waiter closes its last copy after
  // "ready", cat sees EOF, and nothing of the exec's own pipes stays with the python3.
  return exec_request{"/bin/sh",
                      {"-c",
                       "p=/tmp/.gfw$$; mkfifo -m 600 $p || exit 125\n"
                       "python3 -c \"$0\" \"$1\" \"$2\" <&- >$p 2>/dev/null &\n"
                       "cat $p; rm -f $p\n",
                       snapshot_waiter_script, waiter_source, preload}};
}

exec_request snapshot_dismiss() {
  // Bounded like the relay's handoff: the control plane waits for this one.
  return exec_request{"/bin/sh",
                      {"-c", "f=/tmp/.guestflow-snapshot; [ -p $f ] || exit 0\n" +
                                 watched_handoff("echo - > $f", "/tmp/.gfd$$") +
                                 "[ -e /tmp/.gfd$$ ] && rm -f $f /tmp/.gfd$$\nexit 0\n"}};
}

} // namespace guestflow::local
