// The allocator of every process that hosts a runtime (the `guestflow` binary, benches):
// jemalloc, linked in, with these defaults. `MALLOC_CONF` in the environment overrides
// them (jemalloc's own variable, see jemalloc(3)).
//
// Why not glibc's malloc: a run's memory is allocated on one thread (a client completion,
// an actor spawn) and freed on another, thousands of times a second. glibc's per-thread
// arenas each kept their own high-water mark of such memory, and its malloc/free paths
// were ~12% of the runtime's CPU in `perf`. At 10,000 runs in flight (`bench_runtime`,
// sustained, runs alternated in one session) glibc kept 9.6-11.1 KB resident per run in
// flight, jemalloc with one arena 7.5-8.1 KB, at 0-27% less CPU per run (and the local
// control plane, the same binary, got cheaper too). glibc capped to one arena also kept
// ~7.6 KB, but at 5-40% more CPU than its default.
//
// narenas:1 — one arena: the runtime's busy threads are few (two actor workers, the
// client's I/O lane, the HTTP server's), and jemalloc's thread caches keep the common
// path off the arena lock; more arenas only added resident memory (8.8-9.9 KB per run).
//
// No background thread: without one jemalloc returns freed pages only while it allocates,
// so an idle process keeps what a burst freed (`guestflow serve` after 1,000 streams: 190
// MB resident 15 s later; glibc 131 MB). `MALLOC_CONF=background_thread:true` returns it
// (103 MB) but measured ~300 B more per run in flight at 10,000 (7.9-8.4 against 7.6-8.1
// KB, 4 pairs), too close to the 8 KiB budget to be the default.
//
// dirty_decay_ms:1000 — freed pages go back to the kernel after ~1 s unused instead of
// jemalloc's 10 s. Runs end in the order they started, so their memory frees whole slabs that
// the next runs' differently sized objects do not reuse at once; at 1,000 in flight those
// dirty pages were ~2 KB of the ~7.7 KB resident per run. 1 s: 6.8 against 7.2 KB per run in
// flight at 1,000 (6.2 against 6.7 at 10,000), CPU per run unchanged (5 interleaved pairs,
// bench/results/runtime_compare.txt).
extern "C" {
const char* malloc_conf = "narenas:1,dirty_decay_ms:1000";
}
