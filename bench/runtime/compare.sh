#!/usr/bin/env bash
# Two builds of bench_runtime side by side, interleaved in one session, so that a change can
# say whether it slowed the runtime: bench/runtime/compare.sh BEFORE_BIN AFTER_BIN [PAIRS]
# Runs PAIRS (default 5) before/after pairs at 1,000 and 10,000 in flight over the Unix
# socket and prints the median sustained CPU and RSS per run of each side and their ratio,
# with "met" when after/before ≤ 1.10 (this VM's run-to-run noise is ~±10%).
set -euo pipefail
before=$1 after=$2 pairs=${3:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((i = 0; i < pairs; ++i)); do
  for side in before after; do
    bin=${!side}
    "$bin" --inflight 1000 --inflight 10000 --transport unix --out /dev/null >"$tmp/$side.$i" 2>&1
  done
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "bench_runtime, unix socket, sustained, $pairs interleaved pairs (median per side)"
printf '%-8s %8s %14s %14s %8s %14s %14s %8s\n' inflight "" "CPU us before" "CPU us after" ratio \
  "RSS B before" "RSS B after" ratio
for k in 1000 10000; do
  for side in before after; do
    cat "$tmp/$side".* | awk -v k=$k '$1 == "unix" && $2 == k && $3 == "sustained" {print $7}' |
      median >"$tmp/cpu.$side"
    cat "$tmp/$side".* | awk -v k=$k '$1 == "unix" && $2 == k && $3 == "sustained" {print $9}' |
      median >"$tmp/rss.$side"
  done
  read -r cb <"$tmp/cpu.before"; read -r ca <"$tmp/cpu.after"
  read -r rb <"$tmp/rss.before"; read -r ra <"$tmp/rss.after"
  cr=$(awk -v a="$ca" -v b="$cb" 'BEGIN {printf "%.2f", a / b}')
  rr=$(awk -v a="$ra" -v b="$rb" 'BEGIN {printf "%.2f", a / b}')
  printf '%-8s %8s %14s %14s %8s %14s %14s %8s\n' "$k" "" "$cb" "$ca" "$cr" "$rb" "$ra" "$rr"
  for side in before after; do # every pair's figure, to show the spread behind the medians
    echo "  CPU us $side, each run: $(cat "$tmp/$side".* |
      awk -v k=$k '$1 == "unix" && $2 == k && $3 == "sustained" {print $7}' | sort -n | xargs)"
  done
  for what in "CPU:$cr" "RSS:$rr"; do
    ratio=${what#*:}
    verdict=$(awk -v r="$ratio" 'BEGIN {print (r <= 1.10) ? "met" : "MISSED"}')
    echo "target ${what%%:*} per run after/before <= 1.10 at $k in flight: $ratio ($verdict)"
  done
done
