#!/usr/bin/env bash
# bench/goals.sh: the library goals of issue 30, each measured against
# this machine's own limit in the same benchmark (the engine and the
# limit alternated in rounds), run once and printed as goal, ratio and
# whether it is met. A few minutes on 2 cores.
#
#   bash bench/goals.sh
#   OUT=/tmp/goals bash bench/goals.sh   # keep the raw output there
#
#   - appends spread over 1 000 partitions, of the copies-only ceiling:
#     BenchmarkRoundRobin's of-ceiling-median, >= 0.9;
#   - 64 durable writers, of one pwrite+fdatasync per group of 64:
#     BenchmarkDurableAppend/writers=64's partlog/limit-median, >= 0.9;
#   - 256 B leader appends over write(2)+CRC:
#     BenchmarkAppendPaired/size=256B's write/leader, >= 10;
#   - 1 000 idempotent producers over no producer id:
#     BenchmarkProducerAppendPaired's idempotent/plain-median, <= 1.15.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/partlog-goals.XXXXXX")}
export GOWORK=off
mkdir -p "$OUT"
echo "raw output in $OUT/goals.txt" >&2

# Warm memory: the VM hands idle memory back to its host.
dd if=/dev/zero of="$OUT/warm.scratch" bs=4M count=256 status=none
rm -f "$OUT/warm.scratch"
sync

(cd "$root" && go test -c -o "$OUT/bench.test" ./bench)
rm -f "$OUT/goals.txt"
run() {
	(cd "$OUT" && "./bench.test" -test.run '^$' -test.bench "$2" -test.benchtime "$1" \
		-test.benchmem -test.timeout 0) | tee -a "$OUT/goals.txt" | grep -E '^Benchmark' >&2
}
run 200000x '^BenchmarkRoundRobin$'
run 4096x '^BenchmarkDurableAppend$/^writers=64$'
run 500000x '^BenchmarkAppendPaired$/^size=256B$'
run 200000x '^BenchmarkProducerAppendPaired$'

# metric BENCH UNIT: the value reported with UNIT on BENCH's line.
metric() {
	awk -v b="$1" -v u="$2" 'index($1, b) == 1 { for (i = 3; i < NF; i++) if ($(i+1) == u) print $i }' "$OUT/goals.txt" | tail -1
}
printf '| goal | ratio | target | met |\n|---|---:|---:|---|\n'
goal() { # NAME BENCH UNIT OP TARGET
	local v
	v=$(metric "$2" "$3")
	if [ -z "$v" ]; then
		printf '| %s | — | %s %s | not measured |\n' "$1" "$4" "$5"
		return
	fi
	if awk -v v="$v" -v op="$4" -v t="$5" 'BEGIN { exit !((op == ">=") ? v >= t : v <= t) }'; then
		printf '| %s | %.2f | %s %s | yes |\n' "$1" "$v" "$4" "$5"
	else
		printf '| %s | %.2f | %s %s | no |\n' "$1" "$v" "$4" "$5"
	fi
}
goal "appends over 1 000 partitions / copies-only ceiling (BenchmarkRoundRobin of-ceiling-median)" BenchmarkRoundRobin/ of-ceiling-median ">=" 0.9
goal "64 durable writers / one pwrite+fdatasync per group (BenchmarkDurableAppend/writers=64 partlog/limit-median)" BenchmarkDurableAppend/writers=64 partlog/limit-median ">=" 0.9
goal "256 B leader appends / write(2)+CRC (BenchmarkAppendPaired/size=256B write/leader)" BenchmarkAppendPaired/size=256B write/leader ">=" 10
goal "1 000 idempotent producers / no producer id, time (BenchmarkProducerAppendPaired idempotent/plain-median)" BenchmarkProducerAppendPaired idempotent/plain-median "<=" 1.15
