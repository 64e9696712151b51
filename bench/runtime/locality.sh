#!/usr/bin/env bash
# What the hand-offs between guestflow's threads cost in wake-ups of another CPU:
# bench/runtime/locality.sh [PAIRS] (default 3), from a build in build/.
# Interleaves runs with the threads free and pinned to one CPU (bench_runtime --one-cpu:
# its CAF worker, clock and client I/O thread; bench_bridge --server-cpu: every thread of
# `guestflow serve`), the control plane and the load generator left free, and prints the
# median CPU per run of each side and pinned/free. A lab instrument for the design note in
# bench/README.md ("Hand-offs across CPUs"), not a target: pinning caps a node at one CPU.
set -euo pipefail
pairs=${1:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
rt=$here/build/bench/runtime/bench_runtime
br=$here/build/bench/bridge/bench_bridge
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$here/bench/flowfarm" && python3 -c "import flows; flows.write('$tmp', 5)")
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { grep -o "$1=[0-9.]*" | head -1 | cut -d= -f2; }
echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < pairs; ++i)); do
  for side in free pinned; do
    pin=(); [ $side = pinned ] && pin=(--one-cpu 1)
    "$rt" --inflight 1000 --transport unix --rounds 10 --out /dev/null "${pin[@]}" >"$tmp/rt.$side.$i" 2>&1
    pin=(); [ $side = pinned ] && pin=(--server-cpu 1)
    for s in 100 1000; do
      "$br" --streams $s --no-baseline --transport unix --warmup-s 2 --duration-s 8 --latency-ms 50 \
        --flow "$tmp/flow-5.json" --frames "$tmp/frames-5.ndjson" --out /dev/null \
        --env GUESTFLOW_MAX_INFLIGHT=$((2 * s)) "${pin[@]}" >"$tmp/br$s.$side.$i" 2>&1
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $pairs interleaved pairs, medians"
printf '%-44s %12s %12s %8s\n' "" free pinned pinned/free
row() { # label, file prefix, raw-line filter, field
  local f p
  f=$(for x in "$tmp/$2".free.*; do grep "$3" "$x" | field "$4"; done | median)
  p=$(for x in "$tmp/$2".pinned.*; do grep "$3" "$x" | field "$4"; done | median)
  printf '%-44s %12s %12s %8s\n' "$1" "$f" "$p" "$(awk -v a="$p" -v b="$f" 'BEGIN {printf "%.2f", a / b}')"
}
row "runtime code runs, 1000 in flight: CPU us/run" rt '^via=unix inflight=1000 load=sustained' cpu_us_per_run
row "  runs/s" rt '^via=unix inflight=1000 load=sustained' runs_per_s
row "serve 5-vertex, 100 streams: CPU us/run" br100 '^streams=' server_cpu_us_per_run
row "  runs/s" br100 '^streams=' runs_per_s
row "serve 5-vertex, 1000 streams: CPU us/run" br1000 '^streams=' server_cpu_us_per_run
row "  runs/s" br1000 '^streams=' runs_per_s
echo "by thread (CPU us/run), each run:"
for side in free pinned; do
  for x in "$tmp"/rt.$side.*; do echo "  runtime $side: $(grep 'unix 1000 sustained:' "$x" | sed 's/.*sustained: //')"; done
  for s in 100 1000; do
    for x in "$tmp"/br$s.$side.*; do echo "  serve $s $side: $(grep -A1 'by thread' "$x" | tail -1 | sed 's/.*streams: //')"; done
  done
done
