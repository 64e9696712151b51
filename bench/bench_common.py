"""What the Python benches share (flowpool/flowpool.py, isolation/isolation_bench.py):
percentiles and the closed-loop run of N calls by K workers. Standard library only."""

import statistics
import threading
import time


def pct(xs, q):
    """The q-quantile (0..1) of xs, nearest rank; NaN for no samples."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def p50(xs):
    """The median (the mean of the middle two for an even count)."""
    return statistics.median(xs)


def closed_loop(call, total, workers, before_each=None):
    """Calls call(i) for i in 0..total-1, `workers` at a time, each worker back to back (or
    after before_each()). Returns (what the calls returned, wall seconds). After a failure
    no new call starts; the first one is raised once the workers have stopped."""
    out, errors, lock = [], [], threading.Lock()
    todo = list(range(total))

    def worker():
        while True:
            with lock:
                if not todo or errors:
                    return
                i = todo.pop()
            try:
                if before_each:
                    before_each()
                r = call(i)
                with lock:
                    out.append(r)
            except Exception as e:  # noqa: BLE001 - raised after the window
                with lock:
                    errors.append(e)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        raise errors[0]
    return out, wall
