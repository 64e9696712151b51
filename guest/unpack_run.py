"""Unpacks a flow run's bundle into the run directory and runs runner.py there as
`python3 runner.py spec.json` would. Run as
`python3 -c THIS /workspace/.run-bundle /tmp/run` (guest/README.md)."""
import os
import runpy
import sys
import zlib


def unpack(bundle, into):
    """Reads the bundle, removes it, and writes each file (a b"<size> <name>\\n" line, then
    its bytes; `X.gz` is X gzipped) into `into`, made 0700."""
    with open(bundle, "rb", buffering=0) as f:
        data = f.readall()
    # Before anything is written: ext4 drops an unlinked file's pages not yet written back, so
    # the bundle (the secrets too) is normally never written to the workspace's disk.
    os.unlink(bundle)
    os.mkdir(into, 0o700)
    # Views, not copies, and plain descriptors, not file objects: 0.16 ms of a pooled run's
    # CPU (bench/README.md, "The pooled run's own Python path").
    view = memoryview(data)
    at = 0
    while at < len(data):
        end = data.find(b"\n", at, at + 300)
        size, _, name = data[at:max(end, at)].decode("ascii", "replace").partition(" ")
        if end < 0 or not size.isdigit() or not name or "/" in name or name in (".", ".."):
            raise ValueError(f"run bundle: no valid header at byte {at}")
        at = end + 1 + int(size)
        if at > len(data):
            raise ValueError(f"run bundle: {name} is cut short")
        body = view[end + 1:at]
        if name.endswith(".gz"):
            name, body = name[:-3], memoryview(zlib.decompress(body, 31))
        # As open(path, "wb"): created 0666 less the umask, truncated, not inherited.
        fd = os.open(os.path.join(into, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                     os.O_CLOEXEC, 0o666)
        try:
            while body:
                body = body[os.write(fd, body):]
        finally:
            os.close(fd)
    return into


def main(argv):
    if len(argv) != 3:
        raise SystemExit("usage: python3 -c UNPACK_RUN /workspace/.run-bundle /tmp/run")
    here = unpack(argv[1], os.path.abspath(argv[2]))
    runner = os.path.join(here, "runner.py")
    sys.argv = [runner, os.path.join(here, "spec.json")]
    sys.path[0] = here  # as for `python3 runner.py`: the script's directory, not the cwd
    runpy.run_path(runner, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv)
