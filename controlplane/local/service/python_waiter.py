# guestflow python waiter: a python3 started in a warm-pool guest before anyone takes it,
# so that the guest's first `python3 FILE ARGS...` or `python3 -c CODE ARGS...` (or either
# under `timeout --kill-after=5 N`) pays no interpreter start-up. Run as `python3 -c THIS FIFO`; the server
# (service/python_waiter.cpp) writes one request into FIFO and makes this process the
# exec's. Standard library only; it must behave exactly as the command it replaces.
# Imports cost start-up CPU the waiter must not add: C modules only (`_signal`, not `signal`
# and its enum), and what python3 itself already loaded. With a PRELOAD argument
# (`python3 -c THIS FIFO M1,M2`: the image's preload) it imports those modules first, the
# same for every guest of the pool and nothing of any caller's. With guestflow:runner in it,
# MAIN (`python3 -c THIS FIFO PRELOAD MAIN`: guest/unpack_run.py, every flow run's `-c`
# program) is compiled too: a `-c` run of exactly that source then runs that code object,
# the one compile() would make.
import _signal
import os
import select
import sys

_SourceFileLoader = sys.modules["_frozen_importlib_external"].SourceFileLoader

_FIFO = sys.argv[1]
_PRELOAD = [m for m in sys.argv[2].split(",") if m] if len(sys.argv) > 2 else []
_MAIN = sys.argv[3] if len(sys.argv) > 3 else None
_COMPILED = {}  # a `-c` source -> its code object, made by the preload
_MAGIC = b"guestflow-waiter-1"
_KILL_AFTER = 5  # the only `--kill-after` the server hands over
_RUNNER = "guestflow:runner"
# What guest/runner.py, unpack_run.py and their pieces import from the standard library
# (both executors; pkgutil: runpy.run_path's own lazy import), then lfx as lfx_path.load()
# imports it, when the image has lfx.
# (tests/python/test_waiter_preload.py keeps this list up with guest/*.py.)
_RUNNER_STDLIB = ("json", "heapq", "io", "math", "threading", "time", "types", "runpy", "zlib",
                  "importlib.util", "asyncio", "copy", "inspect", "traceback", "uuid",
                  "collections", "importlib.metadata", "subprocess", "keyword", "linecache",
                  "pkgutil")
_RUNNER_LFX = ("lfx", "lfx.memory", "lfx.events.event_manager", "lfx.exceptions.component",
               "lfx.graph.graph.base", "lfx.schema.message", "lfx.schema.data",
               "lfx.schema.dataframe")


def _import_all(names, quiet):
    """Imports each name; returns "name: why" for those that failed (unless quiet)."""
    failed = []
    for name in names:
        try:
            __import__(name)
        except BaseException as e:  # noqa: BLE001 - any failure: go on without it
            if quiet:
                return failed  # lfx absent or broken: the run says why
            failed.append("%s: %s: %s" % (name, type(e).__name__, e))
    return failed


def _preload(names):
    # Before the FIFO exists (the guest is offered only then). fd 1 and 2 are the first
    # exec's, untouched: what a module writes while it imports goes to /dev/null.
    null = os.open("/dev/null", os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        failed = []
        for name in names:
            if name == _RUNNER:
                failed += _import_all(_RUNNER_STDLIB, False)
                _import_all(_RUNNER_LFX, True)
                if _MAIN is not None:
                    try:
                        _COMPILED[_MAIN] = compile(_MAIN, "<string>", "exec", dont_inherit=True)
                    except (SyntaxError, ValueError) as e:  # its runs then fail as python3's
                        failed.append("%s: %s: %s" % (name, type(e).__name__, e))
            else:
                failed += _import_all([name], False)
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()  # into /dev/null, not into the exec's output
            except BaseException:  # noqa: BLE001
                pass
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null,) + saved:
            os.close(fd)
    if failed:
        # The server reads it once the FIFO exists, logs each failure once and removes it.
        fd = os.open(_FIFO + ".preload", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, "\n".join(failed).encode("utf-8", "replace")[:65536])
        os.close(fd)


def _receive():
    try:
        os.unlink(_FIFO)  # a stale one (an earlier waiter's)
    except FileNotFoundError:
        pass
    os.mkfifo(_FIFO, 0o600)
    fd = os.open(_FIFO, os.O_RDONLY)  # blocks until the server opens it for writing
    os.unlink(_FIFO)
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


def _parse(data):
    # NUL-separated (no argv or env string can hold a NUL): magic, timeout ("" none), cwd,
    # argc, argv..., envc, env...
    f = data.split(b"\0")
    if len(f) < 5 or f[0] != _MAGIC or f[-1] != b"":
        raise ValueError("bad request")
    timeout, cwd, argc = f[1], f[2], int(f[3])
    argv = f[4:4 + argc]
    envc = int(f[4 + argc])
    env = f[5 + argc:5 + argc + envc]
    if len(argv) != argc or len(env) != envc or 5 + argc + envc != len(f) - 1:
        raise ValueError("bad request")
    return timeout.decode(), cwd, argv, env


def _seconds(text):
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    mult = 1
    if text and text[-1] in units:
        text, mult = text[:-1], units[text[-1]]
    return float(text) * mult


def _exec_real(argv):
    # What the waiter does not emulate (a directory or a zip as FILE) runs as the real
    # python3, in this process (with a timeout: the forked child, the parent still times it).
    os.execvp("python3", ["python3"] + argv)


def _wait_with_deadline(pid, seconds):
    # coreutils `timeout --kill-after=5`: on expiry TERM the child and the group (not this
    # process) and exit 124 once the child ended; a child still alive 5 s later is KILLed
    # with the whole group (this process included, so the exec's status is signal 9).
    # Without expiry: the child's status (a signal re-raised on this process).
    pidfd = os.pidfd_open(pid)
    timed_out = False
    if seconds > 0:
        ready, _, _ = select.select([pidfd], [], [], seconds)
        if not ready:
            timed_out = True
            _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)
            os.kill(pid, _signal.SIGTERM)
            os.kill(0, _signal.SIGTERM)
            ready, _, _ = select.select([pidfd], [], [], _KILL_AFTER)
            if not ready:
                os.kill(pid, _signal.SIGKILL)
                os.kill(0, _signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if timed_out:
            os._exit(137 if sig == _signal.SIGKILL else 124)
        try:
            _signal.signal(sig, _signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(124 if timed_out else os.waitstatus_to_exitcode(status))


def _main(data=None, timed_by=None):
    # `data`: a request handed over by a fork template's guest (guests/fork_template.py),
    # which imported the preload before it was forked; `timed_by(seconds)`: that guest's
    # init keeps the request's timeout instead of a forked watcher here.
    if _PRELOAD and data is None:
        _preload(_PRELOAD)
        # What the preload made is never garbage: kept out of every collection, so the run's
        # collections do not walk it, and the timeout's fork (below) does not copy the
        # preload's pages on the first collection that would touch every object (gc.freeze
        # is for pre-fork servers; the A/B is in bench/README.md, "heavy engine").
        import gc
        gc.freeze()
    try:
        timeout, cwd, argv, env = _parse(_receive() if data is None else data)
    except (OSError, ValueError):
        os._exit(125)  # not a request the server wrote: this waiter is done
    argv = [os.fsdecode(a) for a in argv]
    os.environ.clear()
    for e in env:
        k, _, v = e.partition(b"=")
        os.environb[k] = v
    os.chdir(cwd)
    if timeout and timed_by:
        timed_by(_seconds(timeout))
    elif timeout:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # already a group (session) leader
        child = os.fork()
        if child:
            _wait_with_deadline(child, _seconds(timeout))
    path = argv[0]
    if path == "-c":  # `python3 -c CODE ARGS...`: argv is ["-c", ARGS...]
        return None, ["-c"] + argv[2:], argv[1]  # a str: python3 reads no coding cookie
    if os.path.isdir(path):
        _exec_real(argv)
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        sys.stderr.write("python3: can't open file %r: [Errno %d] %s\n"
                         % (os.path.abspath(path), e.errno, e.strerror))
        sys.stderr.flush()
        os._exit(2)
    return path, argv, source


def _run(path, argv, source):
    main = type(sys)("__main__")
    if path is None:  # -c: as python3 has it, no file, the cwd first on sys.path
        sys.orig_argv = ["python3", "-c", source] + argv[1:]
        sys.path[0] = ""
        main.__loader__ = sys.modules["_frozen_importlib"].BuiltinImporter
        name = "<string>"
    else:
        sys.orig_argv = ["python3"] + argv
        sys.path[0] = os.path.dirname(os.path.realpath(path))
        name = path = os.path.abspath(path)  # python3's __file__ and traceback name
        main.__file__ = path
        main.__cached__ = None
        main.__loader__ = _SourceFileLoader("__main__", path)
    sys.argv = argv
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    try:
        try:
            code = _COMPILED.get(source) if path is None else None
            if code is None:
                code = compile(source, name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            if path is not None and b"PK\x05\x06" in source[-65558:]:  # a zip: python3 runs it
                _exec_real(argv)
            raise
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        # As python3 reports it: no frame of the waiter's in the traceback.
        tb = e.__traceback__.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        if isinstance(e, KeyboardInterrupt):
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
            os.kill(os.getpid(), _signal.SIGINT)
        raise SystemExit(1)


if not globals().get("_FORKED"):  # a fork template runs this file's code, not the file
    _run(*_main())
