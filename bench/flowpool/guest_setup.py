#!/usr/bin/env python3
"""A fork template's guest setup, two versions of fork_template.py interleaved, priced by CPU:
`python3 bench/flowpool/guest_setup.py [--no-store] A.py B.py SECCOMP.bpf N` (root). Runs
itself in a throwaway bwrap sandbox as the template's (uid 60000, a nested user namespace,
CAP_SYS_ADMIN, CAP_SETPCAP, CAP_NET_ADMIN, /usr only; never the host's root): imports pandas,
freezes and collapses its heap as a template does, then N guests of each version, ABBA: a
thread enters fresh mount, uts, ipc, net and pid namespaces, runs that version's namespace
setup (B's guest_namespaces(), if it has one), forks a pid 1 and the clone, which runs the
rest of its guest() setup (A: every mount, hostname, lo up; both: /proc, the cgroup
namespace, capabilities, SECCOMP.bpf, not dumpable). Medians of the thread's CPU, the clone's
setup CPU and the clone's CPU from its fork to ready (its copied pages included). No
workspace, control socket or init: what both versions do alike is left out. Stored as
bench/results/DATE-HOST-COMMIT[-dirty]-flowpool-guest-setup.txt unless --no-store."""
import json
import os
import subprocess
import sys
import time

INNER = "GUESTFLOW_GUEST_SETUP_INNER"


def outer(argv):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import flowpool as fp  # noqa: PLC0415
    store = "--no-store" not in argv
    argv = [a for a in argv if a != "--no-store"]
    a_py, b_py, bpf, n = argv[0], argv[1], argv[2], int(argv[3])
    import tempfile  # noqa: PLC0415
    work = tempfile.mkdtemp(prefix="guestflow-guest-setup-")
    os.chmod(work, 0o755)
    for src, dst in ((a_py, "a.py"), (b_py, "b.py"), (bpf, "seccomp.bpf"),
                     (os.path.abspath(__file__), "bench.py")):
        with open(src, "rb") as f, open(os.path.join(work, dst), "wb") as g:
            g.write(f.read())
        os.chmod(os.path.join(work, dst), 0o644)
    os.mkdir(os.path.join(work, "spool"), 0o755)
    commit, dirty = fp.head_commit(), fp.tree_dirty()
    lines, say = fp.reporter()
    say("guest_setup: fork_template.py's guest setup, A %s against B %s, %d guests each, ABBA"
        % (a_py, b_py, n))
    say(fp.run_header(commit, dirty))
    cmd = ["setpriv", "--reuid", "60000", "--regid", "60000", "--clear-groups", "bwrap",
           "--unshare-user", "--uid", "60000", "--gid", "60000", "--unshare-pid",
           "--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--unshare-net",
           "--die-with-parent", "--new-session", "--disable-userns", "--ro-bind", "/usr", "/usr",
           "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink",
           "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir",
           "/etc", "--ro-bind-try", "/etc/alternatives", "/etc/alternatives", "--ro-bind", work,
           "/s", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--cap-add",
           "CAP_NET_ADMIN", "--setenv", INNER, str(n), "--", "python3", "/s/bench.py"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    finally:
        subprocess.run(["rm", "-rf", work])
    if out.returncode != 0:
        sys.exit("the sandbox failed: " + out.stderr[-2000:])
    for line in out.stdout.splitlines():
        say(line)
    say(fp.load_line())
    fp.store_tool_result(store, "flowpool-guest-setup", commit, dirty, lines, "guest_setup.py")


def load(path):
    src = open(path).read().rsplit("\nmain()", 1)[0]
    g = {"__name__": "fork_template"}
    sys.argv = ["x", "/s/spool", "", ""]
    exec(compile(src, path, "exec"), g)
    return g


def inner(n):
    import _thread  # noqa: PLC0415
    import gc  # noqa: PLC0415
    versions = {"A": load("/s/a.py"), "B": load("/s/b.py")}
    import pandas  # noqa: F401, PLC0415 - a heavy preload, as the flow engine's
    gc.freeze()
    versions["A"]["collapse_heap"]()
    program = open("/s/seccomp.bpf", "rb").read()
    for c in versions.values():  # as each version's main() has it
        c["PROG"] = c["SockFprog"](len(program) // 8, program) if "SockFprog" in c else program
        if "empty_bounding_set" in c:
            c["empty_bounding_set"]()
    clock = time.thread_time_ns

    def clone_setup(c):
        t = clock()
        m, check, libc = c["mount"], c["check"], c["libc"]
        if "guest_namespaces" not in c:  # all of it here, as guest() did
            m(None, "/", None, c["MS_REC"] | c["MS_PRIVATE"])
        m("proc", "/proc", "proc", c["MS_NOSUID"] | c["MS_NODEV"] | c["MS_NOEXEC"])
        if "guest_namespaces" not in c:
            m("tmpfs", "/tmp", "tmpfs", c["MS_NOSUID"] | c["MS_NODEV"], "mode=1777")
            m("tmpfs", "/dev/shm", "tmpfs", c["MS_NOSUID"] | c["MS_NODEV"], "mode=1777")
            m("devpts", "/dev/pts", "devpts", c["MS_NOSUID"] | c["MS_NOEXEC"],
              "newinstance,ptmxmode=0666,mode=620")
            check(libc.sethostname(b"guest", 5), "sethostname")
            c["lo_up"]()
            m("tmpfs", "/s/spool", "tmpfs",
              c["MS_NOSUID"] | c["MS_NODEV"] | c["MS_NOEXEC"] | c["MS_RDONLY"], "size=4k")
        check(libc.unshare(c["CLONE_NEWCGROUP"]), "unshare cgroup")
        os.chdir("/")
        c["drop_capabilities"]()
        c["install_seccomp"](c["PROG"])
        check(libc.prctl(c["PR_SET_DUMPABLE"], 0, 0, 0, 0), "dumpable")
        return clock() - t

    res = {"A": [], "B": []}
    for i in range(2 * n):
        v = "AB"[(i + i // 2) % 2]
        c = versions[v]
        r, w = os.pipe()
        done, out = _thread.allocate_lock(), {}
        done.acquire()

        def spawn(c=c, w=w, out=out, done=done):
            try:
                c["check"](c["libc"].unshare(c["CLONE_NEWNS"] | c["CLONE_NEWUTS"] |
                                             c["CLONE_NEWIPC"] | c["CLONE_NEWNET"] |
                                             c["CLONE_NEWPID"]), "unshare")
                t = clock()
                if "guest_namespaces" in c:
                    c["guest_namespaces"]("guest")
                out["thread"] = clock() - t
                init = os.fork()
                if init == 0:
                    os.close(w)
                    time.sleep(60)
                    os._exit(0)
                run = os.fork()
                if run == 0:
                    try:
                        setup = clone_setup(c)
                        os.write(w, json.dumps([setup, clock()]).encode())
                    finally:
                        os._exit(0)
                out["pids"] = (init, run)
            except BaseException as e:  # noqa: BLE001
                out["error"] = repr(e)
            finally:
                done.release()

        _thread.start_new_thread(spawn, ())
        done.acquire()
        os.close(w)
        data = b""
        while True:
            b = os.read(r, 4096)
            if not b:
                break
            data += b
        os.close(r)
        if "error" in out or not data:
            sys.exit("guest %s failed: %s" % (v, out.get("error", "no answer")))
        os.waitpid(out["pids"][1], 0)
        os.kill(out["pids"][0], 9)
        os.waitpid(out["pids"][0], 0)
        setup, to_ready = json.loads(data)
        res[v].append((out["thread"], setup, to_ready))

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] / 1e3

    for v in "AB":
        rs = res[v]
        print("%s: us a guest (medians of %d): thread %.1f, clone's setup %.1f, both %.1f, "
              "clone's CPU fork to ready %.1f, with the thread's %.1f" % (
                  v, len(rs), med([x[0] for x in rs]), med([x[1] for x in rs]),
                  med([x[0] + x[1] for x in rs]), med([x[2] for x in rs]),
                  med([x[0] + x[2] for x in rs])))


if __name__ == "__main__":
    if os.environ.get(INNER):
        inner(int(os.environ[INNER]))
    else:
        outer(sys.argv[1:])
