#!/usr/bin/env python3
"""Fork-server prototype (issue 39): new guests forked from a template that imported the
heavy engine once, against cold bwrap+python3+import, and flowpool's flow run in each.
`bench/run forkserver [--smoke]` (root).

The template (bench/forkserver/zygote.py) runs in a bwrap sandbox like a guest's (user,
pid, net, ipc, uts, cgroup namespaces, the host's /usr read-only, uid 60000, its own cgroup)
plus CAP_SYS_ADMIN and CAP_SETPCAP inside its user namespace, and imports the engine of
bench/flowpool (the lfx stand-in importing pandas and sympy, flowpool's make_engine) and
the runner's modules. Each new guest is a fork of it that enters mount, pid, net, ipc, uts
namespaces of its own, is moved by this driver (as the control plane would) into cgroups of
its own (cpuacct, memory 256 MiB, pids), gets its workspace from a spool, a cgroup
namespace, no capability left, and the guest's seccomp deny-list (the same syscalls as
controlplane/local/guests/seccomp_filter.cpp, built here as BPF); zygote.py says how.

Measured, each in one run (ratios), CPU from the cgroups' cpuacct.usage (the template's and
every guest's; a guest's bwrap tree for cold), wall from this driver:
  new guest   to ready: cold = bwrap + python3 importing the engine; fork = fork + namespaces
              + cgroups + setup; then deleted. Alternated, one of each per round.
  flow runs   flowpool's flow (ChatInput -> Uppercase -> ChatOutput, executor lfx) at 1 and 8
              concurrent: floor (flowpool's: one process, no guest), fork (a new forked guest
              per run, deleted after), cold (a new bwrap guest per run that imports the engine).
The projection for `bench/run flowpool`'s pooled runs at 8 adds the control plane's own CPU
per lifecycle (bench/results/control_plane.txt, `cp_ms`) to the fork run's CPU.
"""

import argparse
import collections
import ctypes
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "flowpool"))
import flowpool  # noqa: E402 - the engine, the flow and the floor are flowpool's

UID = GID = 60000
CP_MS = 5.8  # the control plane's CPU per lifecycle at 8 (results/control_plane.txt, cp_ms)
CONTROLLERS = ("cpuacct", "memory", "pids")
libc = ctypes.CDLL(None, use_errno=True)
SYS_open_tree, OPEN_TREE_CLONE, AT_FDCWD = 428, 1, -100
STEPS = ("unshare+fork", "proc,tmp,shm,pts", "lo up", "connect+cgroups", "workspace..seccomp")
Guest = collections.namedtuple("Guest", "gid cg c f pid ms steps")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# -- cgroups (v1 on this host; each guest gets cpuacct, memory and pids) ----------------------

class Cgroup:
    def __init__(self, name):
        self.name = name
        self.dirs = ["/sys/fs/cgroup/%s/%s" % (c, name) for c in CONTROLLERS]
        for d in self.dirs:
            os.mkdir(d)

    def child(self, name, memory_mib=0):
        cg = Cgroup(self.name + "/" + name)
        if memory_mib:
            with open(cg.dirs[1] + "/memory.limit_in_bytes", "w") as f:
                f.write(str(memory_mib << 20))
            with open(cg.dirs[2] + "/pids.max", "w") as f:
                f.write("1024")
        return cg

    def join(self, pid):
        for d in self.dirs:
            with open(d + "/cgroup.procs", "w") as f:
                f.write(str(pid))

    def procs(self):
        pids = set()
        for d in self.dirs:
            with open(d + "/cgroup.procs") as f:
                pids.update(int(x) for x in f.read().split())
        return pids

    def cpu_ns(self):
        with open(self.dirs[0] + "/cpuacct.usage") as f:
            return int(f.read())

    def peak_mib(self):
        """The most memory ever charged to it (v1 memory.max_usage_in_bytes), MiB."""
        with open(self.dirs[1] + "/memory.max_usage_in_bytes") as f:
            return int(f.read()) / 2**20

    def remove(self, deadline_s=10):
        """SIGKILLs every member until none is left, then removes the directories."""
        end = time.monotonic() + deadline_s
        while True:
            pids = self.procs()
            if not pids:
                break
            if time.monotonic() > end:
                raise RuntimeError("cgroup %s still has %s" % (self.name, sorted(pids)))
            for p in pids:
                try:
                    os.kill(p, 9)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)  # polling the kernel's teardown, with the deadline above
        for d in self.dirs:
            while True:
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.001)


def system_cpu_ns():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = sum(v[:8]) - v[3] - v[4]  # all but idle and iowait
    return busy * 10**9 // os.sysconf("SC_CLK_TCK")


# -- the guests' seccomp deny-list, as BPF (seccomp_filter.cpp's list) -------------------------

DENIED = ("ptrace process_vm_readv process_vm_writev kcmp mount umount2 pivot_root chroot "
          "move_mount open_tree fsopen fsconfig fsmount fspick mount_setattr unshare setns bpf "
          "keyctl add_key request_key io_uring_setup io_uring_enter io_uring_register "
          "perf_event_open userfaultfd kexec_load kexec_file_load init_module finit_module "
          "delete_module open_by_handle_at name_to_handle_at acct swapon swapoff reboot syslog "
          "quotactl quotactl_fd vhangup uselib iopl ioperm settimeofday clock_settime "
          "clock_adjtime lookup_dcookie fanotify_init").split()
NS_FLAGS = 0x20000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000


def seccomp_program():
    nrs = {}
    with open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h") as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[0] == "#define" and p[1].startswith("__NR_"):
                nrs[p[1][5:]] = int(p[2])
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    eperm, enosys, allow, kill = 0x50000 | 1, 0x50000 | 38, 0x7FFF0000, 0x80000000
    p = [(ld, 0, 0, 4), (jeq, 1, 0, 0xC000003E), (ret, 0, 0, kill),
         (ld, 0, 0, 0), (jge, 0, 1, 0x40000000), (ret, 0, 0, enosys)]
    for name in DENIED:
        if name in nrs:
            p += [(jeq, 0, 1, nrs[name]), (ret, 0, 0, eperm)]
    p += [(jeq, 0, 3, nrs["clone"]), (ld, 0, 0, 16), (jset, 0, 1, NS_FLAGS), (ret, 0, 0, eperm),
          (ld, 0, 0, 0), (jeq, 0, 1, nrs["clone3"]), (ret, 0, 0, enosys),
          (jeq, 0, 4, nrs["socket"]), (ld, 0, 0, 16), (jeq, 1, 0, 16), (jeq, 0, 1, 17),
          (ret, 0, 0, eperm), (ret, 0, 0, allow)]
    return b"".join(struct.pack("HBBI", *i) for i in p)


# -- the sandboxes -----------------------------------------------------------------------------

def bwrap_argv(prefix, extra, command):
    """A namespaces guest's bwrap (sandbox_launch.cpp's bwrap_argv, host /usr layout)."""
    a = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
         "--unshare-cgroup", "--unshare-net", "--die-with-parent", "--new-session",
         "--disable-userns", "--clearenv", "--hostname", "guest",
         "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
         "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
         "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev",
         "--perms", "1777", "--tmpfs", "/tmp", "--dir", "/etc"]
    for p in ("/etc/ssl/certs", "/etc/nsswitch.conf", "/etc/localtime", "/etc/alternatives"):
        a += ["--ro-bind-try", p, p]
    a += ["--ro-bind", prefix, prefix, "--setenv", "PATH", "/usr/bin:/bin",
          "--setenv", "LANG", "C.UTF-8"]
    return a + extra + ["--"] + command


def runner_preload():
    """The python waiter's own expansion of `guestflow:runner` (python_waiter.py's
    _RUNNER_STDLIB, then _RUNNER_LFX, whose modules may be absent: `?name`)."""
    import ast  # noqa: PLC0415
    path = os.path.join(ROOT, "controlplane", "local", "service", "python_waiter.py")
    names = {}
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names[t.id] = [e.value for e in node.value.elts]
    return ",".join(names["_RUNNER_STDLIB"] + ["?" + m for m in names["_RUNNER_LFX"]])


def as_guest(cg):
    def pre():
        cg.join(os.getpid())
        os.setgroups([])
        os.setgid(GID)
        os.setuid(UID)
    return pre


class Workspaces:
    """One directory per guest (what the control plane would prepare; a forked guest gets
    its own as a detached mount, a cold one as bwrap's bind)."""

    def __init__(self, base, guest_dir, spec):
        self.spool = base
        self.files = {n: open(os.path.join(guest_dir, n), "rb").read()
                      for n in os.listdir(guest_dir)
                      if n.endswith(".py") and n not in ("session_files.py", "unpack_run.py")}
        self.files["spec.json"] = spec

    def make(self, gid, files=None):
        d = os.path.join(self.spool, gid)
        os.mkdir(d, 0o700)
        for n, b in (files if files is not None else self.files).items():
            with open(os.path.join(d, n), "wb") as f:
                f.write(b)
            os.chown(os.path.join(d, n), UID, GID)
        os.chown(d, UID, GID)
        return d

    def detached(self, gid):
        """The workspace as a detached mount (open_tree clone), for a forked guest."""
        fd = libc.syscall(SYS_open_tree, AT_FDCWD, os.path.join(self.spool, gid).encode(),
                          OPEN_TREE_CLONE | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "open_tree")
        return fd

    def remove(self, gid):
        import shutil  # noqa: PLC0415
        shutil.rmtree(os.path.join(self.spool, gid))


def read_all(fd):
    out = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            return out
        out += b


def check_run(out, status, what):
    if status != 0 or b'"t":"done"' not in out or b"RUN " not in out:
        raise RuntimeError("%s: run failed (status %s): %r" % (what, status, out[-600:]))


class Cold:
    """A new bwrap guest per run: python3 (the venv's) runs runner.py, which imports lfx."""

    def __init__(self, prefix, root_cg, ws, bpf):
        self.prefix, self.root, self.ws, self.bpf = prefix, root_cg, ws, bpf
        self.n = 0
        self.peaks = []  # per guest: the memory charged to its cgroup
        self.lock = threading.Lock()

    def guest(self, command, files=None):
        with self.lock:
            self.n += 1
            gid = "cold-%d" % self.n
        cg = self.root.child(gid, 256)
        d = self.ws.make(gid, files)
        sec = os.memfd_create("seccomp")
        os.write(sec, self.bpf)
        os.lseek(sec, 0, 0)
        argv = bwrap_argv(self.prefix, ["--bind", d, "/workspace", "--chdir", "/workspace",
                                        "--seccomp", str(sec)], command)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, preexec_fn=as_guest(cg), pass_fds=(sec,),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        os.close(sec)
        return gid, cg, p, t0

    def end(self, gid, cg, p):
        p.wait()
        self.peaks.append(cg.peak_mib())
        cg.remove()
        self.ws.remove(gid)

    def new_guest(self):
        """Wall ms to the engine imported (the guest then ends)."""
        py = os.path.join(self.prefix, "bin", "python3")
        gid, cg, p, t0 = self.guest([py, "-c", "import lfx, sys; print('ready', flush=True)"],
                                    files={})
        line = p.stdout.readline()
        ms = (time.monotonic() - t0) * 1000
        if line.strip() != b"ready":
            raise RuntimeError("cold guest: %r" % (line + p.stdout.read()))
        p.stdout.read()
        self.end(gid, cg, p)
        return ms

    def run(self):
        py = os.path.join(self.prefix, "bin", "python3")
        gid, cg, p, t0 = self.guest([py, "/workspace/runner.py", "/workspace/spec.json"])
        out = p.stdout.read()
        p.wait()
        ms = (time.monotonic() - t0) * 1000
        check_run(out, p.returncode, "cold")
        self.end(gid, cg, p)
        return ms


class Template:
    """The zygote in its sandbox, and the host's end of its guests' control socket."""

    def __init__(self, prefix, root_cg, ws, bpf, spool):
        self.root, self.ws = root_cg, ws
        with open(os.path.join(spool, "seccomp.bpf"), "wb") as f:
            f.write(bpf)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(os.path.join(spool, "ctl.sock"))
        os.chmod(os.path.join(spool, "ctl.sock"), 0o666)
        self.srv.listen(64)
        self.pending, self.cv = {}, threading.Condition()
        threading.Thread(target=self.accept, daemon=True).start()
        self.cg = root_cg.child("template")
        py = os.path.join(prefix, "bin", "python3")
        argv = bwrap_argv(prefix, ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_NET_ADMIN",
                                   "--bind", spool, "/run/spool", "--dir", "/workspace",
                                   "--ro-bind", HERE, "/run/zygote", "--chdir", "/"],
                          [py, "/run/zygote/zygote.py", "/run/spool", runner_preload()])
        t0, c0 = time.monotonic(), self.cg.cpu_ns()
        self.p = subprocess.Popen(argv, preexec_fn=as_guest(self.cg), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        ready = self.p.stdout.readline().split()
        if not ready or ready[0] != b"ready":
            raise RuntimeError("the template did not start")
        self.rss_mib = int(ready[1]) / 1024
        self.start_ms = (time.monotonic() - t0) * 1000
        self.start_cpu_ms = (self.cg.cpu_ns() - c0) / 1e6
        self.n = 0
        self.peaks = []  # per guest run: the memory charged to its cgroup
        self.lock = threading.Lock()

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            pid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                   12))[0]  # in this (the host's) pid ns
            gid = b""
            while not gid.endswith(b"\n"):
                b = c.recv(1)
                if not b:
                    break
                gid += b
            with self.cv:
                self.pending[gid.strip().decode()] = (c, pid)
                self.cv.notify_all()

    def fork(self, files=None, mode="clone"):
        """A new guest, ready (mode: zygote.py's spawn())."""
        with self.lock:
            self.n += 1
            gid = "fork-%d" % self.n
        cg = self.root.child(gid, 256)
        self.ws.make(gid, files)
        t0 = time.monotonic()
        with self.lock:
            self.p.stdin.write(("%s %s\n" % (gid, mode)).encode())
            self.p.stdin.flush()
        with self.cv:
            if not self.cv.wait_for(lambda: gid in self.pending, 30):
                raise RuntimeError("guest %s never connected" % gid)
            c, pid = self.pending.pop(gid)
        cg.join(pid)
        mnt = self.ws.detached(gid)
        socket.send_fds(c, [b"go\n"], [mnt])
        os.close(mnt)
        f = c.makefile("rb")
        line = f.readline().split()
        if not line or line[0] != b"ready":
            raise RuntimeError("guest %s: %r" % (gid, line))
        return Guest(gid, cg, c, f, pid, (time.monotonic() - t0) * 1000,
                     [int(x) / 1000 for x in line[1:]])

    def start_run(self, c, argv):
        out_r, out_w = os.pipe()
        socket.send_fds(c, ["\0".join(argv).encode()], [out_w, out_w])
        os.close(out_w)
        return out_r

    def delete(self, gid, cg):
        cg.remove()
        self.ws.remove(gid)

    def run(self):
        g = self.fork()
        t0 = time.monotonic()
        r = self.start_run(g.c, ["/workspace/runner.py", "/workspace/spec.json"])
        out = read_all(r)
        os.close(r)
        status = g.f.readline()
        ms = (time.monotonic() - t0) * 1000  # the run's latency; its delete is not in it
        check_run(out, 0 if status == b"status 0\n" else status, "fork")
        g.c.close()
        self.peaks.append(g.cg.peak_mib())
        self.delete(g.gid, g.cg)
        return ms

    def stop(self):
        self.p.stdin.close()
        self.p.wait(30)
        self.srv.close()
        self.cg.remove()


# -- what a forked guest sees --------------------------------------------------------------

PROBE = rb'''
import os, sys
def status(k):
    return [l.split()[1] for l in open("/proc/self/status") if l.startswith(k + ":")][0]
tag = sys.argv[1]
import lfx
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("hostname", os.uname().nodename)
print("spool", os.listdir("/run/spool"), "workspace", sorted(os.listdir("/workspace")))
print("tmp", os.listdir("/tmp"), "shm", os.listdir("/dev/shm"))
print("lfx-mark", getattr(lfx, "MARK", None))
print("caps", status("CapEff"), status("CapBnd"), status("CapAmb"), "seccomp",
      status("Seccomp"), "nnp", status("NoNewPrivs"))
print("net", sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
print("cgroup", open("/proc/self/cgroup").read().replace("\n", " "))
try:
    os.setns  # 3.12+ only
except AttributeError:
    pass
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("unshare(NEWNS)", libc.unshare(0x20000), ctypes.get_errno())
pidfd = os.pidfd_open(1)  # the guest's init holds the control socket: can a run take it?
got = [fd for fd in range(20) if libc.syscall(438, pidfd, fd, 0) >= 0]  # pidfd_getfd
print("pidfd_getfd from the init:", got or ("none", ctypes.get_errno()))
open("/tmp/" + tag, "w").write(tag)
open("/dev/shm/" + tag, "w").write(tag)
open("/workspace/" + tag, "w").write(tag)
lfx.MARK = tag
print("wrote", tag)
'''


NET_PROBE = rb'''
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
print("egress: connected from", s.getsockname()[0], "got", s.recv(64).decode())
'''


def run_in(tmpl, g, argv):
    r = tmpl.start_run(g.c, argv)
    out = read_all(r).decode()
    os.close(r)
    return out.strip().split("\n"), g.f.readline().decode().strip()


def probe(tmpl, say):
    """Two guests alive at once, each writing where the other would look; an exec entering
    one from the host; a network the host builds in one's own netns; a guest that crashes."""
    guests = [tmpl.fork(files={"probe.py": PROBE}) for _ in range(2)]
    for tag, g in zip(("A", "B"), guests):
        out, status = run_in(tmpl, g, ["/workspace/probe.py", tag])
        for x in out + [status]:
            say("  guest %s (host pid %d, %s): %s" % (tag, g.pid, g.gid, x))
    # An exec as the control plane's spawn helper makes one: setns into the init's
    # namespaces (its user namespace is the template's), the guest uid.
    a = guests[0]
    ex = subprocess.run(["nsenter", "-t", str(a.pid), "-U", "-m", "-p", "-n", "-i", "-u", "-C",
                         "-S", str(UID), "-G", str(GID), "--", "/usr/bin/sh", "-c",
                         "cd /workspace; echo uid $(id -u) host $(hostname) workspace $(ls) "
                         "pids $(ls /proc | grep -c '^[0-9]')"],
                        capture_output=True, text=True, timeout=30)
    say("  exec entering guest A from the host: %s%s" % (ex.stdout.strip(), ex.stderr.strip()))
    for g in guests:
        g.c.close()
        tmpl.delete(g.gid, g.cg)

    # Egress: the host puts a veth end into the guest's own netns (made inside the template's
    # user namespace) and configures it there; the other end in a netns this bench makes.
    ns = "gf-h39z-probe-%d" % os.getpid()
    g = tmpl.fork(files={"net.py": NET_PROBE})
    lsn = None
    try:
        ip = ["ip"]
        subprocess.run(ip + ["netns", "add", ns], check=True)
        subprocess.run(ip + ["link", "add", "h39zg", "type", "veth", "peer", "name", "h39zh",
                             "netns", ns], check=True)
        subprocess.run(ip + ["link", "set", "h39zg", "netns", str(g.pid)], check=True)
        inside = ["nsenter", "-t", str(g.pid), "-n", "ip"]
        subprocess.run(inside + ["addr", "add", "10.231.0.2/30", "dev", "h39zg"], check=True)
        subprocess.run(inside + ["link", "set", "h39zg", "up"], check=True)
        mine = ip + ["-n", ns]
        subprocess.run(mine + ["addr", "add", "10.231.0.1/30", "dev", "h39zh"], check=True)
        subprocess.run(mine + ["link", "set", "h39zh", "up"], check=True)
        lsn = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c",
                                "import socket; s = socket.create_server(('10.231.0.1', 0)); "
                                "print(s.getsockname()[1], flush=True); c, _ = s.accept(); "
                                "c.sendall(b'hello from the bench netns'); c.close()"],
                               stdout=subprocess.PIPE, text=True)
        port = lsn.stdout.readline().strip()
        out, status = run_in(tmpl, g, ["/workspace/net.py", "10.231.0.1", port])
        for x in out + [status]:
            say("  guest C (own netns, host-built veth): %s" % x)
    finally:
        if lsn:
            lsn.kill()
            lsn.wait()
        g.c.close()
        tmpl.delete(g.gid, g.cg)
        subprocess.run(["ip", "netns", "del", ns])

    d = tmpl.fork(files={"crash.py": b"import ctypes\nctypes.string_at(0)\n"})
    _, status = run_in(tmpl, d, ["/workspace/crash.py"])
    d.c.close()
    tmpl.delete(d.gid, d.cg)
    e = tmpl.fork(files={})
    say("  guest D crashed (%s); the template forked guest E after it, ready in %.1f ms" %
        (status, e.ms))
    e.c.close()
    tmpl.delete(e.gid, e.cg)


# -- the measurement -----------------------------------------------------------------------

def load(fn, k, runs):
    lat, lock, left = [], threading.Lock(), [runs]
    errors = []

    def worker():
        while True:
            with lock:
                if not left[0] or errors:
                    return
                left[0] -= 1
            try:
                ms = fn()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return
            with lock:
                lat.append(ms)
    t0 = time.monotonic()
    ts = [threading.Thread(target=worker) for _ in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return lat, time.monotonic() - t0


def measured(cg, fn):
    c0, s0 = cg.cpu_ns(), system_cpu_ns()
    r = fn()
    return r, (cg.cpu_ns() - c0) / 1e6, (system_cpu_ns() - s0) / 1e6


def main(argv):
    ap = argparse.ArgumentParser(prog="bench/run forkserver", description=__doc__.split("\n")[0])
    ap.add_argument("--guests", type=int, default=20, help="new guests of each kind")
    ap.add_argument("--runs", type=int, default=40, help="flow runs per point at 1 (cold: /4)")
    ap.add_argument("--runs8", type=int, default=48, help="flow runs per point at 8 (cold: /4)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--smoke", action="store_true", help="a few runs, nothing stored")
    a = ap.parse_args(argv)
    if a.smoke:
        a.guests, a.runs, a.runs8 = 3, 4, 8
    if os.geteuid() != 0:
        raise SystemExit("bench/run forkserver needs root (cgroups, the guest uid)")
    # Not under /tmp: a forked guest mounts a fresh /tmp over the template's, and the engine
    # (a python-env image's binds) would be hidden below it (a bwrap guest binds them after).
    work = tempfile.mkdtemp(prefix="guestflow-forkserver-", dir="/var/tmp")
    os.chmod(work, 0o711)
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    root = tmpl = floor = None
    try:
        prefix = os.path.join(work, "engine")
        flowpool.make_engine(prefix)
        import json  # noqa: PLC0415
        spec = json.dumps({"graph": flowpool.flow(), "executor": "lfx",
                           "inputs": [{"input_value": "run floor", "type": "chat"}]}).encode()
        spec_path = os.path.join(work, "spec.json")
        with open(spec_path, "wb") as f:
            f.write(spec)
        os.chmod(spec_path, 0o644)
        spool = os.path.join(work, "spool")  # the template's: its control socket only
        os.mkdir(spool, 0o711)
        os.mkdir(os.path.join(work, "ws"), 0o711)
        ws = Workspaces(os.path.join(work, "ws"), os.path.join(ROOT, "guest"), spec)
        bpf = seccomp_program()
        root = Cgroup("gfbench-forkserver-%d" % os.getpid())
        cold = Cold(prefix, root, ws, bpf)
        tmpl = Template(prefix, root, ws, bpf, spool)
        load_avg = open("/proc/loadavg").read().split()[0]
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        say("forkserver: new guests forked from a template that imported the heavy engine "
            "(lfx stand-in + pandas + sympy), against cold bwrap+python3+import (issue 39)")
        say("date %s, host %s, tree %s, load %s at start, %d cores" % (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), socket.gethostname(), commit,
            load_avg, os.cpu_count()))
        say("template: started and imported in %.0f ms wall, %.0f ms CPU (once per pool), "
            "RSS %.0f MiB" % (tmpl.start_ms, tmpl.start_cpu_ms, tmpl.rss_mib))
        say("isolation probe (two forked guests alive at once, then each wrote /tmp, /dev/shm, "
            "/workspace and a module attribute):")
        probe(tmpl, say)

        # New guests, alternated: CPU per guest from the cgroups (root: template + guests).
        kinds = ("cold", "fork", "clone", "clone-nonet")
        res = {k: {"wall": [], "cpu": 0.0, "sys": 0.0, "tmpl": 0.0, "steps": []} for k in kinds}

        def forked(mode):
            def make():
                g = tmpl.fork(files={}, mode=mode)
                res[mode]["steps"].append(g.steps)
                g.c.close()
                tmpl.delete(g.gid, g.cg)
                return g.ms
            return make
        for _ in range(a.guests):
            for kind, fn in (("cold", cold.new_guest), ("fork", forked("fork")),
                             ("clone", forked("clone")), ("clone-nonet", forked("clone-nonet"))):
                t0 = tmpl.cg.cpu_ns()
                ms, cpu, sysc = measured(root, fn)
                r = res[kind]
                r["tmpl"] += (tmpl.cg.cpu_ns() - t0) / 1e6
                r["wall"].append(ms)
                r["cpu"] += cpu
                r["sys"] += sysc
        say("new guest, to ready (the engine imported), %d of each, alternated; fork: os.fork, "
            "unshare, fork (pid 1); clone: one clone() with the namespaces' flags; clone-nonet: "
            "the same without a netns of its own (pricing only):" % a.guests)
        say("  kind         wall p50 ms   CPU ms/guest (cgroups)   of it in the template's   "
            "CPU ms/guest (whole host, others' load included)")
        for kind in kinds:
            r = res[kind]
            say("  %-11s %12.1f %24.1f %25.1f %27.1f" % (
                kind, statistics.median(r["wall"]), r["cpu"] / a.guests, r["tmpl"] / a.guests,
                r["sys"] / a.guests))
        for kind in ("fork", "clone", "clone-nonet"):
            say("  %s: the child's steps, wall p50 ms: %s" % (kind, ", ".join(
                "%s %.2f" % (n, statistics.median(x[i] for x in res[kind]["steps"]))
                for i, n in enumerate(STEPS))))
        say("  (the template's cgroup: the fork or clone, and the child until the host moves it "
            "into its own cgroups; connect+cgroups waits on the host's cgroup.procs write)")

        # Flow runs.
        floor = flowpool.Floor(prefix, None, spec_path)
        floor.measure(1, 1)  # its engine imported: every process of its tree exists now
        floor_cg = root.child("floor")
        for pid in tree(floor.p.pid):
            floor_cg.join(pid)
        flows, peaks = {}, {}
        for k, runs in ((1, a.runs), (8, a.runs8)):
            (lat, wall), cpu, sysc = measured(floor_cg, lambda: floor.measure(k, runs))
            flows[("floor", k)] = stats(lat, wall, cpu, sysc)
            tmpl.peaks.clear()
            (lat, wall), cpu, sysc = measured(root, lambda: load(tmpl.run, k, runs))
            flows[("fork", k)] = stats(lat, wall, cpu, sysc)
            peaks[("fork", k)] = statistics.median(tmpl.peaks)
            cold.peaks.clear()
            (lat, wall), cpu, sysc = measured(root, lambda: load(cold.run, k, max(2, runs // 4)))
            flows[("cold", k)] = stats(lat, wall, cpu, sysc)
            peaks[("cold", k)] = statistics.median(cold.peaks)
        say("flow runs (flowpool's flow, executor lfx): a new guest per run (fork: cloned from the template; cold), "
            "none (floor)")
        say("  mode    k   runs    p50 ms    runs/s   CPU ms/run (cgroups)   (whole host, "
            "others' load included)")
        for (mode, k), r in sorted(flows.items()):
            say("  %-6s %2d %6d %9.1f %9.2f %22.1f %14.1f" % (mode, k, r["n"], r["p50"],
                                                            r["rps"], r["cpu"], r["sys"]))
        say("memory charged to a guest's own cgroup over its flow run, p50 MiB (at 1, at 8): "
            "fork %.1f, %.1f; cold %.1f, %.1f (a forked guest's shared pages stay charged to "
            "the template's cgroup: RSS %.0f MiB, once per pool)" % (
                peaks[("fork", 1)], peaks[("fork", 8)], peaks[("cold", 1)], peaks[("cold", 8)],
                tmpl.rss_mib))
        f8, k8, c8 = flows[("floor", 8)], flows[("fork", 8)], flows[("cold", 8)]
        nc = res["cold"]
        say("ratios (this run):")
        for kind in ("fork", "clone", "clone-nonet"):
            nf = res[kind]
            say("  new guest CPU, %s / cold = %.3f; wall p50, %s / cold = %.3f" % (
                kind, nf["cpu"] / nc["cpu"], kind,
                statistics.median(nf["wall"]) / statistics.median(nc["wall"])))
        raw = k8["rps"] / f8["rps"]
        say("  flow runs/s at 8, fork / floor = %.2f (cold / floor = %.2f)" % (
            raw, c8["rps"] / f8["rps"]))
        proj = min(raw, f8["cpu"] / (k8["cpu"] + CP_MS))
        say("  projected `bench/run flowpool` throughput at 8, pooled (forked guests) / "
            "no-guest = %.3f (>= 0.8) %s" % (proj, flowpool.met(proj >= 0.8)))
        say("    = min(the ratio above, floor CPU/run / (fork CPU/run + the control plane's "
            "%.1f ms/lifecycle)); serve's own per-run CPU not included" % CP_MS)
        say("  warm takes at 8: every run forks its guest (fill time = the fork's wall above), "
            "so the pool's warm share no longer depends on builders keeping up")
        say("load at end: %s" % open("/proc/loadavg").read().strip())
        if not a.smoke:
            name = "%s-%s-%s-forkserver.txt" % (time.strftime("%Y-%m-%d", time.gmtime()),
                                                socket.gethostname(), commit)
            path = os.path.join(a.out_dir, name)
            if os.path.exists(path):
                raise SystemExit("%s exists: results are never overwritten" % path)
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n\ncommand: bench/run forkserver " +
                        " ".join(argv) + "\n")
            log("stored " + path)
    finally:
        if floor:
            floor.stop()
        if tmpl:
            tmpl.stop()
        if root:
            cleanup(root)
        import shutil  # noqa: PLC0415
        shutil.rmtree(work, ignore_errors=True)


def tree(pid):
    """pid and its descendants now (from every process's parent in /proc)."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def stats(lat, wall, cpu, sysc):
    n = len(lat)
    return {"n": n, "p50": statistics.median(lat), "rps": n / wall if wall else 0.0,
            "cpu": cpu / n, "sys": sysc / n}


def cleanup(root):
    """Removes every child cgroup left (killing members), then the root."""
    for c_dir in root.dirs[:1]:
        for name in sorted(os.listdir(c_dir)):
            if os.path.isdir(os.path.join(c_dir, name)):
                cg = Cgroup.__new__(Cgroup)
                cg.name = root.name + "/" + name
                cg.dirs = ["/sys/fs/cgroup/%s/%s" % (c, cg.name) for c in CONTROLLERS]
                cg.remove()
    root.remove()


if __name__ == "__main__":
    main(sys.argv[1:])
