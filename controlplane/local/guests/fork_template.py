# guestflow fork template: a fork-server pool's template (guests/fork_template.hpp).
# GUEST-SIDE CODE: it runs only inside the template's bwrap sandbox the control plane
# launches (uid 60000 in its own user namespace, CAP_SYS_ADMIN, CAP_SETPCAP and
# CAP_NET_ADMIN there and nowhere else, no seccomp). Never run it on the host.
#
# `python3 -c THIS SPOOL PRELOAD WAITER [MAIN]`: imports PRELOAD as the python waiter does
# (WAITER is python_waiter.py's source: its _preload, and its request handling for the run;
# MAIN what it compiles ahead with guestflow:runner, python_waiter.py's argument), backs
# what that made with huge pages where it can (collapse_heap), then connects to
# SPOOL/ctl.sock, says "template", one "problem ..." line per module that failed, and
# "ready"; signals the launch on fd 3. It is the child of a keeper (keep())
# that holds the sandbox up while a guest of it lives. It never runs anyone's code itself:
# per line "ID HOSTNAME" from the host it makes a guest whose only copy of its memory is the
# run's (the prototype, bench/forkserver/zygote.py at ca8cb9d, and its lab notes). It
# connects the guest's control socket to SPOOL/ctl.sock; a thread of its own enters mount,
# uts, ipc, net and (for its children) pid namespaces of its own (unshare: per thread),
# gives them their own /tmp, /dev/shm, /dev/pts, hostname and lo up, covers the spool,
# posix_spawns the guest's init (SPOOL/guest-init, guest_init/init.cpp's `fork` mode, from
# a memfd: clone(CLONE_VM|CLONE_VFORK), no page-table copy; pid 1 there), forks the run
# (pid 2, the same namespaces) and ends: the template's other threads never left its own
# namespaces (setns back is not allowed: bwrap's nested user namespace owns none of them).
# It says "guest ID" with both pidfds: the host checks they are its children and the init
# pid 1 of the run's pid namespace, moves both into the guest's cgroups, then says "go"
# with the workspace as a detached mount to the run, which has mounted a fresh /proc,
# attaches /workspace, tells the init (which enters a cgroup namespace, drops every
# capability, is not dumpable), enters a cgroup namespace, drops every capability (the
# bounding set came empty from the template), stacks SPOOL/seccomp.bpf,
# is not dumpable, and says "ready". It then takes at most one request (the python
# waiter's, with the exec's stdout and stderr; it says "run" from its own pid, so that the
# host learns it, and closes the control socket) and runs it, dumpable again as any guest
# process. The template waits for it (and keeps its timeout: wait_runs), writes "status N
# T" on the guest's control socket it kept, and reaps the inits the deletes end. A run that
# waits in the pool ends when the template does (a pipe's EOF); one already running runs
# on, and the keeper, which holds each run's guest socket too, says its status (no timeout
# kept then).
import _signal
import _thread
import ctypes
import fcntl
import os
import select
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True
libc = ctypes.CDLL(None, use_errno=True)
# Looked up once here: a function's first lookup (dlsym, its ctypes object) made in each clone
# cost ~30 us there, its pages copied from the template's.
for _f in ("mount", "sethostname", "unshare", "prctl", "capset", "syscall", "madvise"):
    getattr(libc, _f)

SPOOL, PRELOAD, WAITER = sys.argv[1], [m for m in sys.argv[2].split(",") if m], sys.argv[3]
MAIN = sys.argv[4:5]
KEEPER = None  # the template's end of its socket to the keeper (keep())
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
SYS_move_mount, AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = 429, -100, 4
PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 23, 24, 38
PR_SET_SECCOMP, PR_CAP_AMBIENT = 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER, PR_SET_DUMPABLE = 4, 2, 4
PR_SET_NAME, PR_SET_CHILD_SUBREAPER = 15, 36
MADV_COLLAPSE, HUGE = 25, 2 << 20
CAP_SETPCAP, CAP_LAST = 8, 40
RESTORE_NOFILE = None  # raise_nofile(): a run's own descriptor limit back
KILL_AFTER = 5  # the only `--kill-after` the server hands over (python_waiter.py's)
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1


def check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def mount(src, target, fstype, flags, data=None):
    check(libc.mount(src and src.encode(), target.encode(), fstype and fstype.encode(),
                     ctypes.c_ulong(flags), data and data.encode()), "mount " + target)


def lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    s.close()


def empty_bounding_set():
    """Drops what is left in the bounding set (CAP_SETPCAP last: dropping it needs it). Each
    drop is a new set of credentials (an RCU free): the template empties its own set once
    (main(); its effective and ambient capabilities stay), so that its clones and their
    inits, which inherit it, find nothing left to drop, a read each."""
    for cap in [c for c in range(CAP_LAST + 1) if c != CAP_SETPCAP] + [CAP_SETPCAP]:
        if libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1:
            check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "bounding set")


def drop_capabilities():
    empty_bounding_set()  # whatever is left in it: fail closed
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = ctypes.create_string_buffer(24)  # 2 x {effective, permitted, inheritable}: 0
    check(libc.capset(ctypes.c_char_p(header), data), "capset")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient")


class SockFprog(ctypes.Structure):
    """struct sock_fprog: made once by the template (main()), not per clone."""
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install_seccomp(prog):
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def collapse_heap():
    """Backs the preload's anonymous memory with transparent huge pages where it spans an
    aligned 2 MiB (MADV_COLLAPSE, Linux 6.1; best effort): a guest's run's fork then copies
    one entry per 2 MiB instead of 512 and its exit frees as few, while a write splits
    only the range written, in the writer's own page tables."""
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if not fields[1].startswith("rw") or fields[5:] not in ([], ["[heap]"]):
                continue  # files' pages are not copied by a fork; the stack is small
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            start, end = -(-lo // HUGE) * HUGE, hi // HUGE * HUGE
            if end > start:
                libc.madvise(start, end - start, MADV_COLLAPSE)


def readable(fds, seconds=None):
    """Those of `fds` (descriptors) ready to read or closed: poll, not select, which refuses
    a descriptor past 1023 (the template holds two for each run in flight)."""
    p = select.poll()
    for fd in fds:
        p.register(fd, select.POLLIN)
    return {fd for fd, _ in p.poll(None if seconds is None else seconds * 1000)}


def raise_nofile():
    """The template's own descriptor limit raised to its hard one (two a run in flight); the
    soft limit it had, which each run gets back, as any guest's process has it."""
    import resource  # noqa: PLC0415 - a C module python3 ships
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def status_line(code):
    """A run's "status N T" line: N as an exec's (128+N for signal N, os.waitstatus_to_exitcode's
    -N), T when, on the monotonic clock the host shares."""
    return b"status %d %d\n" % (128 - code if code < 0 else code, time.monotonic_ns())


def read_line(sock):
    data = sock.recv(4096)  # SOCK_SEQPACKET: one message per packet
    if not data:
        raise EOFError("control socket closed")
    return data.rstrip(b"\n").decode()


class Run:
    """A guest's run the template waits for: the guest's control socket (its status goes
    there), the pipe its `timeout` comes through, and when it is due."""
    __slots__ = ("ctl", "timeouts", "deadline", "timed_out", "killed")

    def __init__(self, ctl, timeouts):
        self.ctl, self.timeouts = ctl, timeouts
        self.deadline = self.timed_out = self.killed = None


def clone_guest(gid, host, seccomp, waiter, init_fd, alive, runs):
    """A guest: its init spawned and its run forked into namespaces of their own by a
    thread of their own (the header says how)."""
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ctl.connect(SPOOL + "/ctl.sock")  # the guest's: kept here for its status
    to_init, to_run = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    timeouts, timeout_w = os.pipe()  # the run's `timeout`, once it read its request
    init_end = to_init.fileno() if to_init.fileno() > 3 else os.dup(to_init.fileno())
    made, done = [], _thread.allocate_lock()
    done.acquire()

    def spawn():
        try:
            check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET |
                               CLONE_NEWPID), "unshare")
            guest_namespaces(host)
            # CLONE_VM|CLONE_VFORK and an exec: the init copies none of the template's memory.
            init = os.posix_spawn(
                "/proc/self/fd/%d" % init_fd, ["guestflow-init", "fork"], {},
                file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDWR, 0),
                              (os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2),
                              (os.POSIX_SPAWN_DUP2, init_end, 3)],
                setsid=True, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
            made.append(init)
            run = os.fork()
            if run == 0:
                to_init.close()
                os.close(timeouts)
                guest(gid, seccomp, waiter, ctl, to_run, timeout_w, alive)
            made.append(run)
        except BaseException as e:  # noqa: BLE001 - said to the host below
            made.append(e)
        finally:
            done.release()

    _thread.start_new_thread(spawn, ())
    done.acquire()
    if init_end != to_init.fileno():
        os.close(init_end)
    to_init.close()
    to_run.close()
    os.close(timeout_w)
    if len(made) != 2 or not isinstance(made[1], int):
        os.close(timeouts)
        try:
            ctl.sendall(("error %s %r\n" % (gid, made[-1])).encode()[:4000])
        except OSError:
            pass
        ctl.close()
        if made and isinstance(made[0], int):
            os.kill(made[0], _signal.SIGKILL)  # its init, reaped by reap()
        return
    init, run = made
    runs[run] = Run(ctl, timeouts)
    # The keeper holds the guest's socket too: it says the run's status if the template dies.
    socket.send_fds(KEEPER, [b"add %d" % run], [ctl.fileno()])
    pidfds = [os.pidfd_open(init), os.pidfd_open(run)]
    try:
        socket.send_fds(ctl, [b"guest " + gid.encode() + b"\n"], pidfds)
    except OSError:
        pass  # the host went away: it kills the guest, reaped here
    for fd in pidfds:
        os.close(fd)


def guest_namespaces(host):
    """What a guest's mount, uts and network namespaces get, made by the thread that entered
    them, before its init and run exist (both share these namespaces; /proc, which must be
    the run's pid namespace's, is the run's): its own /tmp, /dev/shm and /dev/pts, the spool
    covered, its hostname, lo up. Here no page of the template is copied, as it would be in
    the run (each first touch of the template's objects there is a page fault and a copy)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates to the template
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
          "newinstance,ptmxmode=0666,mode=620")
    # The spool's mount is locked (bwrap's --disable-userns nests a user namespace): covered
    # by an empty read-only tmpfs, which no capability is left to lift.
    if os.path.isdir(SPOOL):  # else under /tmp, hidden already
        mount("tmpfs", SPOOL, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
    name = host.encode()[:64]
    check(libc.sethostname(name, len(name)), "sethostname")
    lo_up()


def guest(gid, seccomp, waiter, ctl, to_run, timeout_w, alive):
    """The guest's run, pid 2 of its pid namespace (the init is pid 1): never returns."""
    try:
        _signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the template's handler
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        low = 3  # the template's descriptors: nothing of the host's or of other guests stays
        for fd in sorted((ctl.fileno(), to_run.fileno(), timeout_w, alive)):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        if RESTORE_NOFILE:
            RESTORE_NOFILE()
        # The run's pid namespace's own /proc (the rest is guest_namespaces()').
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        # "go": the host moved the init and this process into the guest's cgroups.
        msg, fds, _, _ = socket.recv_fds(ctl, 16, 1)
        if msg != b"go\n" or len(fds) != 1:
            os._exit(3)
        check(libc.syscall(SYS_move_mount, fds[0], b"", AT_FDCWD, b"/workspace",
                           MOVE_MOUNT_F_EMPTY_PATH), "move_mount workspace")
        os.close(fds[0])
        to_run.send(b"c")  # the init's turn (guest_init/init.cpp's fork mode)
        if to_run.recv(1) != b"c":
            raise OSError("the guest's init failed")
        to_run.close()
        check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
        os.chdir("/workspace")
        drop_capabilities()
        install_seccomp(seccomp)
        # Not dumpable: a later exec (same uid) can neither pidfd_getfd nor ptrace this
        # process and take its control socket; made dumpable again for its run.
        check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
        ctl.sendall(b"ready\n")
    except BaseException as e:  # noqa: BLE001 - a guest that cannot be made says why, ends
        try:
            ctl.sendall(("error %s %r\n" % (gid, e)).encode()[:4000])
        finally:
            os._exit(4)  # and its init with it (its socket closed): the namespace ends
    # Forked while the guest waits in its pool (the template's page tables copied ahead,
    # charged to the guest): a take's first run forks nothing.
    try:
        # Until the template ends (the pipe's EOF): nobody would report its status then.
        if alive in readable([ctl.fileno(), alive]):
            os._exit(0)
        os.close(alive)
        msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 2)  # one packet: the whole request
    except BaseException:  # noqa: BLE001
        os._exit(0)
    if not msg or len(fds) != 2:
        os._exit(0)  # the host dropped it: an exec it does not serve comes instead
    serve(ctl, fds, msg, waiter, timeout_w)


def wait_runs(runs, fds_ready):
    """Keeps each run's `timeout --kill-after=5 N`, which it writes to its pipe once it read
    its request, as the python waiter's watcher keeps it (TERM to the run and its group at
    the deadline, 124; KILL to them 5 s later, 137): the template waits for the run anyway,
    and a watcher would be one more process holding the engine, forked and ended per run."""
    now = time.monotonic()
    for pid, r in runs.items():
        if r.timeouts is not None and r.timeouts in fds_ready:
            seconds = os.read(r.timeouts, 64)
            os.close(r.timeouts)
            r.timeouts = None
            if seconds and float(seconds) > 0:
                r.deadline = now + float(seconds)
        if r.deadline is None or r.deadline > now:
            continue
        sig = _signal.SIGKILL if r.timed_out else _signal.SIGTERM
        r.killed, r.timed_out = r.timed_out, True
        r.deadline = None if r.killed else now + KILL_AFTER
        for target in (pid, -pid):  # the run and its group (its session: serve())
            try:
                os.kill(target, sig)
            except OSError:
                pass


def reap(runs):
    """Reaps every child that ended (runs, and the inits their guests' deletes end); a run's
    status goes to its guest's control socket, as an exec's (128+N for a signal)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid <= 0:
            return
        r = runs.pop(pid, None)
        if r is None:
            continue  # a guest's init
        code = os.waitstatus_to_exitcode(status)
        if r.timed_out:
            code = 137 if r.killed or code == -_signal.SIGKILL else 124
        try:
            r.ctl.send(status_line(code))
        except OSError:
            pass  # the host dropped the guest
        r.ctl.close()
        KEEPER.send(b"done %d" % pid)
        if r.timeouts is not None:
            os.close(r.timeouts)


def serve(ctl, fds, msg, waiter, timeout_w):
    """The run: a process of its own session with the exec's pipes, as the waiter would be;
    its timeout, if any, is told to the template (wait_runs) through `timeout_w`."""
    code = 1
    try:
        os.setsid()
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        # From this process: the host reads its pid (SO_PASSCRED); with when it started on
        # the monotonic clock the host shares, for the run's own time.
        ctl.sendall(b"run %d\n" % time.monotonic_ns())
        ctl.close()
        try:
            run = waiter["_main"](msg, lambda s: os.write(timeout_w, repr(s).encode()))
            os.close(timeout_w)
            waiter["_run"](*run)
            code = 0
        except SystemExit as e:
            code = e.code
            if code is None:
                code = 0
            elif not isinstance(code, int):
                sys.stderr.write("%s\n" % code)
                code = 1
        import threading  # noqa: PLC0415 - as python3's own shutdown
        threading._shutdown()
        import atexit  # noqa: PLC0415
        atexit._run_exitfuncs()
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:  # noqa: BLE001
                pass
    finally:
        os._exit(code & 0xFF)


def keep(template):
    """bwrap's child, whose end ends the sandbox (bwrap's pid 1 exits with it) and so every
    guest in it: a reaper that outlives the template. A template that dies (killed, out of
    memory) leaves its guests here (inits and runs), which run on until deleted; it ends
    once none is left. Meanwhile the template gives it each run's guest socket ("add PID",
    "done PID" once it said the status itself): a run the template leaves running has its
    status said here (no timeout kept then). It imports nothing and never runs anyone's
    code."""
    os.close(3)  # the launch's ready signal is the template's
    libc.prctl(PR_SET_NAME, b"fork-keeper", 0, 0, 0)
    ctls = {}
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(template, 64, 1)
        except OSError:
            msg, fds = b"", []
        if not msg:
            break  # the template is gone
        verb, pid = msg.split()
        if verb == b"add" and fds:
            ctls[int(pid)] = fds[0]
        elif verb == b"done" and int(pid) in ctls:
            os.close(ctls.pop(int(pid)))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid in ctls:
            try:
                os.write(ctls.pop(pid), status_line(os.waitstatus_to_exitcode(status)))
            except OSError:
                pass


def main():
    # Subreaper first: whatever the template leaves when it dies comes to the keeper.
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    global KEEPER, RESTORE_NOFILE
    try:  # before the keeper's fork: it holds a descriptor for each run in flight too
        RESTORE_NOFILE = raise_nofile()
    except (ImportError, OSError, ValueError):
        pass  # the limit it has: fewer runs in flight before a clone is refused
    KEEPER, template = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() != 0:
        KEEPER.close()
        keep(template)
    template.close()
    program = open(SPOOL + "/seccomp.bpf", "rb").read()
    seccomp = SockFprog(len(program) // 8, program)
    # Its clones and their inits inherit it empty (empty_bounding_set()); what it holds (its
    # effective and ambient capabilities) is unchanged.
    empty_bounding_set()
    # The waiter's code, not run: its _preload (the image's modules, guestflow:runner's
    # expansion) here, its _main/_run in each run.
    sys.argv = ["-c", "/tmp/.fork-template", ",".join(PRELOAD)] + MAIN
    waiter = {"__name__": "guestflow_waiter", "__builtins__": __builtins__, "_FORKED": True}
    exec(compile(WAITER, "<python_waiter>", "exec"), waiter)
    if PRELOAD:
        waiter["_preload"](PRELOAD)
    import gc  # noqa: PLC0415
    gc.freeze()  # as the python waiter: the preload is never garbage, forks copy less
    collapse_heap()
    problems = []
    try:
        with open("/tmp/.fork-template.preload", "rb") as f:
            problems = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        pass
    # The guests' init (made by the host: guest_init/init.cpp), run from a memfd, and a pipe
    # only the template writes to: waiting runs end at its EOF.
    init_fd = os.memfd_create("guestflow-init")
    alive, alive_w = os.pipe()
    with open(SPOOL + "/guest-init", "rb") as f:
        os.write(init_fd, f.read())
    # Its children (runs, inits) are reaped here: a SIGCHLD wakes the select below.
    wake, wake_w = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(wake_w, False)
    _signal.set_wakeup_fd(wake_w)
    _signal.signal(_signal.SIGCHLD, lambda *_: None)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ctl.connect(SPOOL + "/ctl.sock")
    ctl.sendall(b"template\n" + b"".join(b"problem %s\n" % p.encode() for p in problems) +
                b"ready\n")
    os.write(3, b"r")
    os.close(3)
    runs = {}  # run pid -> Run
    while True:
        deadlines = [r.deadline for r in runs.values() if r.deadline is not None]
        wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        fds = [wake] + ([ctl.fileno()] if ctl else []) + [r.timeouts for r in runs.values()
                                                          if r.timeouts is not None]
        ready = readable(fds, wait)
        if wake in ready:
            try:
                os.read(wake, 512)
            except BlockingIOError:
                pass
        if ctl and ctl.fileno() in ready:
            try:
                line = read_line(ctl)
            except EOFError:
                # The host is done with it. Its guests live in its pid namespace, which
                # ends with it: it waits for their runs until the host kills it.
                ctl = None
            else:
                gid, host = line.split(" ", 1)
                clone_guest(gid, host, seccomp, waiter, init_fd, alive, runs)
        wait_runs(runs, ready)
        reap(runs)


main()
