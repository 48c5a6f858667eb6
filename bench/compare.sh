#!/usr/bin/env bash
# compare.sh OLD [NEW] — benchmark ratios of two revisions from one run.
#
# Builds the benchmark binaries of the append, read, recovery and sync
# benchmarks (packages bench, the root package and recovery) at both
# revisions, from `git archive` copies in a temporary directory (no
# checkout or worktree is touched), then runs them alternately, ROUNDS
# rounds, the order of the two revisions swapped every round, so that both
# see the same machine. Prints, for each benchmark, the median time/op of
# each revision and OLD/NEW: above 1, NEW is faster.
#
#   bash bench/compare.sh fa77cd8            # against HEAD
#   ROUNDS=5 BENCHTIME=500ms bash bench/compare.sh fa77cd8 h-refactor
#   ROUNDS=1 BENCHTIME=1x bash bench/compare.sh fa77cd8   # a smoke run
#   BENCH_RE='^BenchmarkAppend$' bash bench/compare.sh fa77cd8   # some rows
#
# On a shared machine the figures move with the other tenants: read the
# ratios of one run (never medians of separate runs), and run it again in
# a quiet window before drawing conclusions.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: compare.sh OLD [NEW]}
NEW=${2:-HEAD}
ROUNDS=${ROUNDS:-3}
BENCHTIME=${BENCHTIME:-300ms}
# Benchmarks per package: the append path (leader, follower, paired,
# round robin, idempotent producers, LogAppendTime), reads, recovery and
# opens, durable appends (group commit).
declare -A BENCH=(
	[bench]='^(BenchmarkAppend|BenchmarkAppendPaired|BenchmarkRoundRobin|BenchmarkProducerAppendPaired|BenchmarkRead|BenchmarkRecovery|BenchmarkOpen|BenchmarkDurableAppend)$'
	[root]='^(BenchmarkAppendTimestampType|BenchmarkOffsets|BenchmarkAppendWaiters)$'
	[recovery]='^BenchmarkRecover$'
)
declare -A PKG=([bench]=./bench [root]=. [recovery]=./recovery)
# BENCH_RE, when set, replaces every package's pattern (a package runs
# the benchmarks it has): a second, narrower run of the rows that moved.
if [[ -n ${BENCH_RE:-} ]]; then
	for p in "${!BENCH[@]}"; do BENCH[$p]=$BENCH_RE; done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/partlog-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
for rev in OLD NEW; do
	r=${!rev}
	mkdir -p "$work/$rev/src"
	git archive "$r" | tar -x -C "$work/$rev/src"
	for p in "${!PKG[@]}"; do
		(cd "$work/$rev/src" && go test -c -o "$work/$rev/$p.test" "${PKG[$p]}")
	done
	echo "built $rev ($r)" >&2
done

out="$work/out"
for ((round = 0; round < ROUNDS; round++)); do
	order=(OLD NEW)
	if ((round % 2 == 1)); then order=(NEW OLD); fi
	for p in "${!PKG[@]}"; do
		for rev in "${order[@]}"; do
			# Benchmarks run in the package's directory of that revision
			# (testdata, relative paths).
			(cd "$work/$rev/src/${PKG[$p]}" && "$work/$rev/$p.test" -test.run '^$' -test.bench "${BENCH[$p]}" \
				-test.benchtime "$BENCHTIME" -test.benchmem -test.short=${SHORT:-false}) |
				sed -n "s/^\(Benchmark[^ ]*\)/$rev $p \1/p" >>"$out" || true
		done
	done
	echo "round $((round + 1)) of $ROUNDS done" >&2
done

python3 - "$out" "$OLD" "$NEW" <<'PY'
import sys, statistics, collections
path, old, new = sys.argv[1:4]
t = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(path):
    f = line.split()
    if len(f) < 5 or 'ns/op' not in f:
        continue
    rev, pkg, name = f[0], f[1], f[2]
    ns = float(f[f.index('ns/op') - 1])
    t[(pkg, name)][rev].append(ns)
def fmt(ns):
    for unit, d in (('s', 1e9), ('ms', 1e6), ('µs', 1e3)):
        if ns >= d:
            return f'{ns / d:.3g} {unit}'
    return f'{ns:.3g} ns'
print(f'| benchmark | {old} | {new} | {old}/{new} |')
print('|---|---:|---:|---:|')
for (pkg, name), revs in sorted(t.items()):
    if not revs['OLD'] or not revs['NEW']:
        continue
    a, b = statistics.median(revs['OLD']), statistics.median(revs['NEW'])
    print(f'| {pkg} {name} | {fmt(a)} | {fmt(b)} | {a / b:.2f} |')
PY
