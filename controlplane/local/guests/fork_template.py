# guestflow fork template: a fork-server pool's template (guests/fork_template.hpp).
# GUEST-SIDE CODE: it runs only inside the template's bwrap sandbox the control plane
# launches (uid 60000 in its own user namespace, CAP_SYS_ADMIN, CAP_SETPCAP and
# CAP_NET_ADMIN there and nowhere else, no seccomp). Never run it on the host.
#
# `python3 -c THIS SPOOL PRELOAD WAITER`: imports PRELOAD as the python waiter does (WAITER
# is python_waiter.py's source: its _preload, and its request handling for the run), backs
# what that made with huge pages where it can (collapse_heap), then connects to
# SPOOL/ctl.sock, says "template", one "problem ..." line per module that failed, and
# "ready"; signals the launch on fd 3. It is the child of a keeper (keep())
# that holds the sandbox up while a clone lives. It never runs anyone's code itself: per
# line "ID HOSTNAME" from the host it clones a guest (the prototype, bench/forkserver/zygote.py
# at ca8cb9d, and its lab notes): mount, pid, net, ipc, uts namespaces of its own; connects
# to SPOOL/ctl.sock ("guest ID": the host moves it into the guest's cgroups by its
# SO_PEERCRED pid, then says "go" with the workspace as a detached mount); a fresh /proc,
# /tmp, /dev/shm, /dev/pts; lo up; attaches it at /workspace, covers the spool, enters a
# cgroup namespace, drops every capability, stacks SPOOL/seccomp.bpf, is not dumpable, says
# "ready". Then, as the guest's init, it forks the process that takes at most one request
# (the python waiter's, with the exec's stdout and stderr) and runs it (it says "run" from
# its own pid, so that the host learns it), reports "status N" once it ended, and reaps
# forever.
import _signal
import ctypes
import os
import select
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.PyDLL(None, use_errno=True)  # clone() with the GIL held, as fork() is made

SPOOL, PRELOAD, WAITER = sys.argv[1], [m for m in sys.argv[2].split(",") if m], sys.argv[3]
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
SYS_clone, SYS_move_mount, AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = 56, 429, -100, 4
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 24, 38, 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER, PR_SET_DUMPABLE = 4, 2, 4
PR_SET_NAME, PR_SET_CHILD_SUBREAPER = 15, 36
MADV_COLLAPSE, HUGE = 25, 2 << 20
CAP_SETPCAP, CAP_LAST = 8, 40
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
    import fcntl  # noqa: PLC0415 - a C module python3 ships; cheap
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    s.close()


def drop_capabilities():
    # The bounding set first (CAP_SETPCAP last: dropping it needs it), then every set.
    for cap in range(CAP_LAST + 1):
        if cap != CAP_SETPCAP:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    check(libc.prctl(PR_CAPBSET_DROP, CAP_SETPCAP, 0, 0, 0), "bounding set")
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = ctypes.create_string_buffer(24)  # 2 x {effective, permitted, inheritable}: 0
    check(libc.capset(ctypes.c_char_p(header), data), "capset")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient")


def install_seccomp(program):
    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    prog = SockFprog(len(program) // 8, program)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def collapse_heap():
    """Backs the preload's anonymous memory with transparent huge pages where it spans an
    aligned 2 MiB (MADV_COLLAPSE, Linux 6.1; best effort): a clone's fork, and the run's fork
    in it, then copy one entry per 2 MiB instead of 512 and their exits free as few, while a
    write splits only the range written, in the writer's own page tables."""
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


def reap_all(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def read_line(sock):
    data = sock.recv(4096)  # SOCK_SEQPACKET: one message per packet
    if not data:
        raise EOFError("control socket closed")
    return data.rstrip(b"\n").decode()


def clone_guest(gid, host, seccomp, waiter):
    flags = (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET |
             _signal.SIGCHLD)
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = raw.syscall(SYS_clone, ctypes.c_ulong(flags), None, None, None, None)
    if pid == 0:
        api.PyOS_AfterFork_Child()  # what os.fork does in the child
        guest(gid, host, seccomp, waiter)
    api.PyOS_AfterFork_Parent()


def guest(gid, host, seccomp, waiter):
    """The new guest, pid 1 of its pid namespace: never returns."""
    try:
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the template ignores it
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)  # the template's: nothing of the host's stays open
        os.setsid()
        # First: the spool may be under /tmp (a state dir there), which the fresh /tmp hides.
        ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctl.connect(SPOOL + "/ctl.sock")
        ctl.sendall(b"guest " + gid.encode() + b"\n")
        mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates to the template
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=620")
        name = host.encode()[:64]
        check(libc.sethostname(name, len(name)), "sethostname")
        lo_up()
        msg, fds, _, _ = socket.recv_fds(ctl, 16, 1)
        if msg != b"go\n" or len(fds) != 1:
            os._exit(3)
        check(libc.syscall(SYS_move_mount, fds[0], b"", AT_FDCWD, b"/workspace",
                           MOVE_MOUNT_F_EMPTY_PATH), "move_mount workspace")
        os.close(fds[0])
        # The spool's mount is locked (bwrap's --disable-userns nests a user namespace):
        # covered by an empty read-only tmpfs, which no capability is left to lift.
        if os.path.isdir(SPOOL):  # else under /tmp, hidden already
            mount("tmpfs", SPOOL, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                  "size=4k")
        check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
        os.chdir("/workspace")
        drop_capabilities()
        install_seccomp(seccomp)
        # Not dumpable: a run (same uid) can neither pidfd_getfd nor ptrace this init and
        # take its control socket; the run is made dumpable again, as any guest's process.
        check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
        ctl.sendall(b"ready\n")
    except BaseException as e:  # noqa: BLE001 - a guest that cannot be made says why, ends
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(SPOOL + "/ctl.sock")
            s.sendall(("error %s %r\n" % (gid, e)).encode()[:4000])
        finally:
            os._exit(4)
    try:
        # The run's process is forked now, while the guest waits in its pool (the template's
        # page tables copied ahead, charged to the guest): a take's first run forks nothing.
        timeouts, timeout_w = os.pipe()  # the run's `timeout`, once it read its request
        run = os.fork()
        if run == 0:
            os.close(timeouts)
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 2)  # one packet: the whole request
            if not msg or len(fds) != 2:
                os._exit(0)  # the host dropped it: an exec it does not serve comes instead
            serve(ctl, fds, msg, waiter, timeout_w)
        os.close(timeout_w)
        code = wait_run(run, timeouts)
        ctl.sendall(b"status %d %d\n" % (code, time.monotonic_ns()))
    except BaseException:  # noqa: BLE001 - the host went away: the init only reaps
        pass
    try:
        ctl.close()
    except BaseException:  # noqa: BLE001
        pass
    _signal.signal(_signal.SIGCHLD, reap_all)
    while True:  # the guest's init until it is deleted: reaps what later execs orphan
        reap_all()
        _signal.pause()


def wait_run(run, timeouts):
    """The run's status as an exec's (128+N for a signal), reaping whatever else ends
    meanwhile. The run's `timeout --kill-after=5 N`, which it writes to `timeouts` once it
    read its request, is kept here as the python waiter's watcher keeps it (TERM to the
    run's group, 124; KILL to it 5 s later, 137): the init waits for the run anyway, and a
    watcher would be one more process holding the engine, forked and ended per run."""
    pidfd = os.pidfd_open(run)
    deadline = timed_out = killed = None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        fds = [pidfd] + ([timeouts] if timeouts is not None else [])
        ready, _, _ = select.select(fds, [], [], wait)
        if pidfd in ready:
            break
        if timeouts in ready:
            seconds = os.read(timeouts, 64)
            os.close(timeouts)
            timeouts = None
            if seconds and float(seconds) > 0:
                deadline = time.monotonic() + float(seconds)
        elif not ready and not timed_out:
            timed_out = True
            for target in (run, -run):  # the run and its group (its session: serve())
                try:
                    os.kill(target, _signal.SIGTERM)
                except OSError:
                    pass
            deadline = time.monotonic() + KILL_AFTER
        elif not ready:
            killed = True
            for target in (run, -run):
                try:
                    os.kill(target, _signal.SIGKILL)
                except OSError:
                    pass
            deadline = None
    os.close(pidfd)
    if timeouts is not None:
        os.close(timeouts)
    while True:
        child, status = os.wait()
        if child == run:
            break
    code = os.waitstatus_to_exitcode(status)
    if timed_out:
        return 137 if killed or code == -_signal.SIGKILL else 124
    return 128 - code if code < 0 else code


def serve(ctl, fds, msg, waiter, timeout_w):
    """The run: a process of its own session with the exec's pipes, as the waiter would be;
    its timeout, if any, is told to the init (wait_run) through `timeout_w`."""
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


def keep():
    """bwrap's child, whose end ends the sandbox (bwrap's pid 1 exits with it) and so every
    guest in it: a reaper that outlives the template. A template that dies (killed, out of
    memory) leaves its clones here, guests that run on until deleted; it ends once none is
    left. It imports nothing and never runs anyone's code."""
    os.close(3)  # the launch's ready signal is the template's
    libc.prctl(PR_SET_NAME, b"fork-keeper", 0, 0, 0)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            os._exit(0)


def main():
    # Subreaper first: whatever the template leaves when it dies comes to the keeper.
    check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    if os.fork() != 0:
        keep()
    seccomp = open(SPOOL + "/seccomp.bpf", "rb").read()
    # The waiter's code, not run: its _preload (the image's modules, guestflow:runner's
    # expansion) here, its _main/_run in each run.
    sys.argv = ["-c", "/tmp/.fork-template", ",".join(PRELOAD)]
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
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # guests are reaped by bwrap's pid 1
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ctl.connect(SPOOL + "/ctl.sock")
    ctl.sendall(b"template\n" + b"".join(b"problem %s\n" % p.encode() for p in problems) +
                b"ready\n")
    os.write(3, b"r")
    os.close(3)
    while True:
        try:
            line = read_line(ctl)
        except EOFError:
            # The host is done with it. Its guests live in its pid namespace, which ends
            # with it: it stays until the host kills it once none is left.
            while True:
                _signal.pause()
        gid, host = line.split(" ", 1)
        clone_guest(gid, host, seccomp, waiter)


main()
