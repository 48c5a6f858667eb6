#!/usr/bin/env bash
# bench/run.sh: runs partlog's benchmarks (./bench) and the peer
# comparison (./bench/peers, a module of its own) with -count $COUNT
# -benchmem, keeps the raw outputs in $OUT, and prints one table of
# medians and ratios, also written to bench/RESULTS.md.
#
#   bash bench/run.sh                 # full run, about 20 minutes on 2 cores
#   COUNT=3 bash bench/run.sh         # shorter
#   OUT=/tmp/results bash bench/run.sh
#
# Iteration counts are fixed per batch size (-benchtime Nx) so that every
# library appends the same bytes and no timed run writes more than ~1 GiB.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
COUNT=${COUNT:-5}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/partlog-bench.XXXXXX")}
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
export GOWORK=off
mkdir -p "$OUT"
echo "raw outputs in $OUT (count $COUNT)" >&2

# benchstat, into a temporary GOBIN when it is not installed.
if command -v benchstat >/dev/null 2>&1; then
	benchstat=$(command -v benchstat)
else
	gobin=$(mktemp -d "${TMPDIR:-/tmp}/benchstat-bin.XXXXXX")
	GOBIN=$gobin go install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION" >&2 || true
	benchstat=$gobin/benchstat
fi

# Warm memory: these VMs hand idle memory back to the host and the first
# touch of a page is slow. Each benchmark also warms before its timed run.
dd if=/dev/zero of="$OUT/warm.scratch" bs=4M count=512 status=none
rm -f "$OUT/warm.scratch"

# Compile each suite once.
(cd "$root" && go test -c -o "$OUT/bench.test" ./bench)
(cd "$here/peers" && go test -c -o "$OUT/peers.test" .)

# run SUITE FILE BENCHTIME REGEXP: appends to $OUT/FILE.txt.
run() {
	local suite=$1 file=$2 bt=$3 re=$4
	echo "== $suite -bench '$re' -benchtime $bt" >&2
	(cd "$OUT" && "./$suite.test" -test.run '^$' -test.bench "$re" -test.benchtime "$bt" \
		-test.count "$COUNT" -test.benchmem -test.timeout 0) | tee -a "$OUT/$file.txt" | grep -E '^Benchmark' >&2
}
rm -f "$OUT"/bench.txt "$OUT"/peers.txt

# ./bench: the engine beside its ceilings.
run bench bench 500000x '^BenchmarkAppend$/^size=256B$'
run bench bench 250000x '^BenchmarkAppend$/^size=1KiB$'
run bench bench 40000x '^BenchmarkAppend$/^size=16KiB$'
run bench bench 800x '^BenchmarkAppend$/^size=1MiB$'
run bench bench 2000x '^Benchmark(DurableAppend|DurableCeiling)$'
run bench bench 0.5s '^Benchmark(Ceiling|Read|IndexLookup)$'
run bench bench 200000x '^BenchmarkProducerAppend$'
run bench bench 10x '^BenchmarkProducerSnapshot$'
run bench bench 5x '^BenchmarkRecovery$'
run bench bench 20x '^BenchmarkOpen$'

# ./bench/peers: the same batches appended to other stores, and decoding.
run peers peers 200000x '^BenchmarkPeerAppend$/^size=256B$'
run peers peers 100000x '^BenchmarkPeerAppend$/^size=1KiB$'
run peers peers 20000x '^BenchmarkPeerAppend$/^size=16KiB$'
run peers peers 500x '^BenchmarkPeerAppend$/^size=1MiB$'
run peers peers 1000x '^BenchmarkPeerAppendDurable$/^size=(256B|1KiB|16KiB)$'
run peers peers 50x '^BenchmarkPeerAppendDurable$/^size=1MiB$'
run peers peers 0.5s '^BenchmarkDecode$'

if [ -x "$benchstat" ]; then
	"$benchstat" "$OUT/bench.txt" >"$OUT/benchstat-bench.txt" 2>&1 || true
	"$benchstat" "$OUT/peers.txt" >"$OUT/benchstat-peers.txt" 2>&1 || true
fi

# The table: medians computed here (benchstat's own tables are kept in
# $OUT), ratios of throughput (baseline ns/op / this ns/op: > 1 is faster).
tab=$(mktemp -d "${TMPDIR:-/tmp}/partlog-table.XXXXXX")
cat >"$tab/main.go" <<'EOF'
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type stat struct{ ns, mbs, allocs []float64 }

var (
	stats = map[string]*stat{}
	order []string
	procs = regexp.MustCompile(`-\d+$`)
)

func med(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func load(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || !strings.HasPrefix(fs[0], "Benchmark") {
			continue
		}
		name := procs.ReplaceAllString(strings.TrimPrefix(fs[0], "Benchmark"), "")
		st := stats[name]
		if st == nil {
			st = &stat{}
			stats[name] = st
			order = append(order, name)
		}
		for i := 2; i+1 < len(fs); i += 2 {
			v, err := strconv.ParseFloat(fs[i], 64)
			if err != nil {
				continue
			}
			switch fs[i+1] {
			case "ns/op":
				st.ns = append(st.ns, v)
			case "MB/s":
				st.mbs = append(st.mbs, v)
			case "allocs/op":
				st.allocs = append(st.allocs, v)
			}
		}
	}
}

func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.1f ns", ns)
}

// comparisons returns the baselines of a benchmark, by full name.
func comparisons(name string) []string {
	parts := strings.Split(name, "/")
	last := parts[len(parts)-1]
	prefix := strings.Join(parts[:len(parts)-1], "/")
	sib := func(s ...string) []string {
		var out []string
		for _, x := range s {
			out = append(out, prefix+"/"+x)
		}
		return out
	}
	switch {
	case parts[0] == "Append" && (last == "leader" || last == "follower"):
		return sib("write+crc", "copy+crc")
	case parts[0] == "Ceiling" && (last == "validate" || last == "mmap-walk"):
		return sib("crc32c-only")
	case parts[0] == "Recovery" && last == "recover":
		return sib("header-walk")
	case parts[0] == "DurableAppend" && last == "group-commit":
		return append(sib("fsync-per-append"), "DurableCeiling/size=16KiB/write+fdatasync")
	case parts[0] == "DurableAppend" && last == "fsync-per-append":
		return []string{"DurableCeiling/size=16KiB/write+fdatasync"}
	case parts[0] == "ProducerAppend" && last != "no-producer":
		return []string{"ProducerAppend/no-producer"}
	case parts[0] == "Read" && strings.HasPrefix(last, "log-"):
		return []string{"Read/pread-1MB-random"}
	case (parts[0] == "PeerAppend" || parts[0] == "PeerAppendDurable") && last == "partlog":
		return sib("tidwall-wal", "nats-filestore", "pebble", "bbolt")
	case parts[0] == "Decode" && last == "partlog":
		return sib("kmsg")
	}
	return nil
}

func main() {
	for _, p := range os.Args[1:] {
		load(p)
	}
	fmt.Println("| benchmark | median time/op | median MB/s | allocs/op | compared with | ratio |")
	fmt.Println("|---|---:|---:|---:|---|---:|")
	for _, name := range order {
		st := stats[name]
		ns := med(st.ns)
		mbs := "—"
		if len(st.mbs) > 0 {
			mbs = fmt.Sprintf("%.1f", med(st.mbs))
		}
		allocs := "—"
		if len(st.allocs) > 0 {
			allocs = fmt.Sprintf("%g", med(st.allocs))
		}
		cmp := comparisons(name)
		if len(cmp) == 0 {
			fmt.Printf("| %s | %s | %s | %s | | |\n", name, dur(ns), mbs, allocs)
			continue
		}
		for i, c := range cmp {
			ratio := "n/a"
			if b, ok := stats[c]; ok && ns > 0 && len(b.ns) > 0 {
				ratio = fmt.Sprintf("%.2fx", med(b.ns)/ns)
			}
			if i == 0 {
				fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", name, dur(ns), mbs, allocs, c, ratio)
			} else {
				fmt.Printf("| | | | | %s | %s |\n", c, ratio)
			}
		}
	}
}
EOF
(cd "$tab" && go mod init partlogtable >/dev/null 2>&1 && go build -o table .)
table=$("$tab/table" "$OUT/bench.txt" "$OUT/peers.txt")
rm -rf "$tab"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
machine="- machine: $(nproc) CPUs, $cpu, Linux $(uname -r)
- $(go version)
- date: $(date -u '+%Y-%m-%d %H:%M UTC')
- $COUNT runs of each benchmark (-count $COUNT -benchmem); iteration counts per size in bench/run.sh"

# The hand-written sections after the generated table (from the first
# "## Measurements" heading on) are kept as they are.
kept=""
if [ -f "$here/RESULTS.md" ]; then
	kept=$(sed -n '/^## Measurements/,$p' "$here/RESULTS.md")
fi

{
	cat <<EOF
# Benchmark results

Produced by \`bash bench/run.sh\` (raw outputs and benchstat's tables were
kept outside the repository). Medians of $COUNT runs. **ratio** is the
throughput of the row's benchmark relative to the one it is compared with
(that one's time/op divided by this one's): above 1 means the row is
faster. Comparisons:

- Append leader/follower vs write+crc (CRC-32C + write(2) to a file) and
  vs copy+crc (CRC-32C + copy into a hot heap buffer, the ceiling);
- Ceiling validate (batch.Iterator) and mmap-walk (the same over a
  read-only mapping of a file) vs crc32c-only over the same bytes;
- Recovery recover (recovery.Run, full unclean) vs header-walk (mapped
  walk + CRC of the same files);
- DurableAppend group-commit vs fsync-per-append at the same number of
  writers, and both vs write+fdatasync per 16 KiB batch (DurableCeiling);
- ProducerAppend with 1 000 / 1 000 000 producers vs the same batch
  without a producer id;
- PeerAppend / PeerAppendDurable: partlog vs each peer at the same size
  (same batches, same iteration count, fresh directory);
- Decode: partlog (Check + RecordIterator) vs kmsg (ReadFrom + CRC-32C +
  Record.ReadFrom).

$machine

EOF
	echo "$table"
	if [ -n "$kept" ]; then
		echo
		echo "$kept"
	fi
} >"$here/RESULTS.md"

echo "$machine"
echo
echo "$table"
echo
echo "raw outputs: $OUT; table written to $here/RESULTS.md" >&2
