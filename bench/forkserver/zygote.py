# guestflow fork-server prototype: the template ("zygote") of a pool (issue 39).
# GUEST-SIDE CODE: it runs only inside the template's bwrap sandbox that
# bench/forkserver/forkserver.py starts (uid 60000 in its own user namespace, with ambient
# CAP_SYS_ADMIN and CAP_SETPCAP there and nowhere else). Never run it on the host.
#
# `python3 zygote.py SPOOL PRELOAD`: imports PRELOAD (comma-separated modules; one written
# `?name` may be absent, as the waiter's lfx entries: the bench passes the python waiter's
# own expansion of guestflow:runner) once, prints "ready", then makes a guest per line "ID MODE" on
# stdin (spawn() says the two modes). It never runs anyone's code itself. A guest, before anything else, leaves the
# template's namespaces: mount, pid, net, ipc, uts of its own (inside the template's user
# namespace), then forks again to be pid 1 of its pid namespace; mounts a fresh /proc,
# /tmp, /dev/shm and /dev/pts; connects to SPOOL/ctl.sock (the host reads its pid from
# SO_PEERCRED and moves it into the guest's cgroups, then says "go" with the workspace as a
# detached mount); attaches that at /workspace (the template never sees a workspace) and
# covers the spool (its control socket); enters a
# cgroup namespace rooted at its own cgroup; drops every capability (bounding set
# included, as a bwrap guest has none); stacks the guest's seccomp program (SPOOL/
# seccomp.bpf, the host's deny-list); says "ready". Then, as the guest's init, it takes one
# "run" with the exec's stdout and stderr (SCM_RIGHTS), forks the program (runner.py
# spec.json as __main__, what the python waiter would do), reaps every process of its
# namespace and reports the program's status.
import _signal
import ctypes
import os
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.PyDLL(None, use_errno=True)  # clone() with the GIL held, as fork() is made

SPOOL, PRELOAD = sys.argv[1], [m for m in sys.argv[2].split(",") if m]
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
SYS_clone, SYS_move_mount, AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = 56, 429, -100, 4
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 24, 38, 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER, PR_SET_DUMPABLE = 4, 2, 4
CAP_SETPCAP, CAP_LAST = 8, 40
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
    for cap in list(range(CAP_LAST + 1)):
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


def reap_all(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def read_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        b = sock.recv(1)
        if not b:
            raise OSError("control socket closed")
        data += b
    return data[:-1].decode()


def spawn(gid, seccomp, mode):
    """A new guest: `fork` (os.fork, then the child unshares and forks its pid 1) or `clone`
    (one clone() with the namespaces' flags: the child is pid 1 at once, one copy of the
    template's page tables fewer)."""
    if mode == "fork":
        if os.fork() == 0:
            guest(gid, seccomp, None)
        return
    # "clone-nonet" prices the network namespace: the guest keeps the template's (the
    # bench's pricing row only; it would share one netns between guests).
    flags = (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | _signal.SIGCHLD |
             (0 if mode == "clone-nonet" else CLONE_NEWNET))
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = raw.syscall(SYS_clone, ctypes.c_ulong(flags), None, None, None, None)
    if pid == 0:
        api.PyOS_AfterFork_Child()  # what os.fork does in the child
        guest(gid, seccomp, mode)
    api.PyOS_AfterFork_Parent()


def guest(gid, seccomp, cloned):
    """`cloned`: the clone mode (None: forked, namespaces still to make)."""
    """The new guest: never returns."""
    try:
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the template ignores it
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)  # the template's pipes: nothing of the host's stays open
        # fd 2 stays the template's log until the run's own stderr replaces it.
        t = [time.monotonic_ns()]
        os.setsid()
        if not cloned:
            check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID |
                               CLONE_NEWNET), "unshare")
            if os.fork():
                os._exit(0)  # the template's reaper (bwrap's pid 1) collects this one
        # pid 1 of the guest's pid namespace from here on.
        t.append(time.monotonic_ns())
        mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates to the template
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=620")
        name = ("gf-" + gid)[:63].encode()
        check(libc.sethostname(name, len(name)), "sethostname")
        t.append(time.monotonic_ns())
        if cloned != "clone-nonet":
            lo_up()
        t.append(time.monotonic_ns())
        ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ctl.connect(SPOOL + "/ctl.sock")
        ctl.sendall(gid.encode() + b"\n")
        # "go": the host moved this process into the guest's cgroups; with it, the workspace
        # as a detached mount (open_tree/fsmount on the host), attached here.
        msg, fds, _, _ = socket.recv_fds(ctl, 16, 1)
        if msg != b"go\n" or len(fds) != 1:
            os._exit(3)
        t.append(time.monotonic_ns())
        check(libc.syscall(SYS_move_mount, fds[0], b"", AT_FDCWD, b"/workspace",
                           MOVE_MOUNT_F_EMPTY_PATH), "move_mount workspace")
        os.close(fds[0])
        # The spool's mount is locked (bwrap's --disable-userns nests a user namespace):
        # covered by an empty read-only tmpfs instead, which no capability is left to lift.
        mount("tmpfs", SPOOL, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
        check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")
        os.chdir("/workspace")
        drop_capabilities()
        install_seccomp(seccomp)
        # Not dumpable: a run (same uid) can then neither pidfd_getfd nor ptrace this init
        # and take its control socket; the run itself is made dumpable again, as any guest's.
        check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
        t.append(time.monotonic_ns())
        # Wall µs per step: unshare+fork, mounts, lo, connect+cgroups, workspace..seccomp.
        ctl.sendall(("ready %s\n" % " ".join(str((b - a) // 1000) for a, b in zip(t, t[1:])))
                    .encode())
        msg, fds, _, _ = socket.recv_fds(ctl, 65536, 2)
        argv = msg.decode().split("\0")
        pid = os.fork()
        if pid == 0:
            libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            os.close(fds[0])
            os.close(fds[1])
            ctl.close()
            os.environ.clear()
            os.environ.update(PATH="/usr/bin:/bin", HOME="/workspace", LANG="C.UTF-8")
            run(argv)
            os._exit(0)
        for fd in fds:
            os.close(fd)
        os.dup2(0, 2)  # /dev/null: the template's log stays out of the guest from here on
        while True:  # the init: reap everything, report the program's status
            child, status = os.wait()
            if child == pid:
                break
        ctl.sendall(b"status %d\n" % os.waitstatus_to_exitcode(status))
        # The guest's init until it is deleted: reaps what later execs orphan.
        _signal.signal(_signal.SIGCHLD, reap_all)
        reap_all()
        ctl.recv(1)  # the host closed it, or the cgroup's kill ends this
        os._exit(0)
    except BaseException as e:  # noqa: BLE001 - a guest that cannot be made just ends
        try:
            import traceback  # noqa: PLC0415
            os.write(2, ("zygote guest %s: %r at %s\n" % (
                gid, e, traceback.extract_tb(e.__traceback__)[-1].line)).encode())
        finally:
            os._exit(4)


def run(argv):
    import runpy  # noqa: PLC0415 - preloaded
    path = os.path.abspath(argv[0])
    sys.argv = [path] + argv[1:]
    sys.path[0] = os.path.dirname(path)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        sys.stdout.flush()
        os._exit(e.code if isinstance(e.code, int) else 1)
    sys.stdout.flush()
    sys.stderr.flush()


def main():
    seccomp = open(SPOOL + "/seccomp.bpf", "rb").read()
    null = os.open("/dev/null", os.O_WRONLY)
    saved = os.dup(1)
    os.dup2(null, 1)  # what a module prints while it imports is nobody's output
    for name in PRELOAD:
        try:
            __import__(name.lstrip("?"))
        except ImportError:
            if not name.startswith("?"):
                raise
    sys.stdout.flush()
    os.dup2(saved, 1)
    os.close(saved)
    os.close(null)
    import gc  # noqa: PLC0415
    gc.freeze()  # as the python waiter: the preload is never garbage, forks copy less
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # forked intermediates reap themselves
    rss = [ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmRSS:")][0]
    sys.stdout.write("ready %s\n" % rss)
    sys.stdout.flush()
    for line in sys.stdin:  # "ID fork" or "ID clone"
        gid, mode = line.split()
        spawn(gid, seccomp, mode)


main()
