package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/interop/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Recovery, Kafka against partlog on the same damage. Every case damages
// a copy of a corpus partition (and sets the log directory's state: its
// recovery point and log start entries, the clean-shutdown marker); one
// copy goes into a partition directory of a Kafka broker, which recovers
// it when it starts and is then stopped cleanly, the other into a log
// directory that `partlog recover --apply` repairs. Then both must hold
// the same .log bytes, log end, log start, producer state and leader
// epochs. All the cases of one marker state share one broker start.

// recoveryCase is one damage of the catalogue.
type recoveryCase struct {
	name   string
	source string // corpus partition directory, e.g. "txn-0"
	// damage changes the copy of the partition directory in place.
	damage func(t *testing.T, dir string)
	clean  bool // the clean-shutdown marker is present
	// recoveryPoint and logStart set the log directory's entries for the
	// partition from the source's (its checkpointed recovery point and
	// log start, and its log end); ok false leaves no entry. Nil keeps
	// the source's entries.
	recoveryPoint, logStart func(src sourceState) (int64, bool)
	// force runs `recover --apply --force`: the damage lies below the
	// recovery point, where partlog keeps flushed data unless told.
	force bool
	// kafkaRefuses, when set, is the error with which Kafka's log loader
	// refuses the partition: its broker then takes the log directory
	// offline, or stops. partlog's result must equal Kafka's for the case
	// named by like (the recovery of the same data undamaged), and
	// docs/recovery.md says why.
	kafkaRefuses, like string
	// epochsLike, when set, names the case whose Kafka leader epochs
	// partlog's must equal (the rest is compared with this case's).
	epochsLike string
	// deviation names the item of docs/recovery.md §2.16 that says why
	// partlog's result is not Kafka's here (like or epochsLike say what
	// it is instead).
	deviation string
}

// sourceState is what the log directory says about a source partition.
type sourceState struct {
	recoveryPoint int64
	logStart      int64 // 0 when the checkpoint has no entry
	logEnd        int64
}

// recoveryOutcome is one side's result for a case.
type recoveryOutcome struct {
	logs      map[string][]byte // .log file name -> bytes
	logEnd    int64
	logStart  int64
	producers []producerEntry
	epochs    [][2]int64 // (epoch, start offset)
	// staleEpoch and leaderEpoch are the epochs at which Kafka's broker
	// became the partition's leader after loading it (Kafka's outcomes
	// only): first the one it led at when it was killed, from its own
	// metadata, then the one its controller gave it.
	staleEpoch, leaderEpoch int64
}

// segmentsOf lists dir's .log files, sorted.
func segmentsOf(t *testing.T, dir string) []string {
	t.Helper()
	logs, err := kafka.Files(dir, ".log")
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// batchPositions returns the start position of every complete entry of a
// .log file, and the file's bytes.
func batchPositions(t *testing.T, path string) ([]int, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int
	for p := 0; p < len(data); {
		n, err := batch.Frame(data[p:])
		if err != nil {
			break
		}
		pos = append(pos, p)
		p += n
	}
	return pos, data
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// lastSegment is the path of dir's last .log.
func lastSegment(t *testing.T, dir string) string {
	logs := segmentsOf(t, dir)
	return logs[len(logs)-1]
}

// lastSegmentBatch returns the last segment's path, its last batch's position
// and the segment's bytes.
func lastSegmentBatch(t *testing.T, dir string) (string, int, []byte) {
	seg := lastSegment(t, dir)
	pos, data := batchPositions(t, seg)
	return seg, pos[len(pos)-1], data
}

// flipAt flips the low bit of the byte at position at of the last
// segment's batch number which (negative: from the end).
func flipAt(which, at int) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		seg := lastSegment(t, dir)
		pos, data := batchPositions(t, seg)
		if which < 0 {
			which += len(pos)
		}
		data[pos[which]+at] ^= 0x01
		mustWrite(t, seg, data)
	}
}

// sameAs keeps the source's value.
func sameAs(v int64) func(sourceState) (int64, bool) {
	return func(sourceState) (int64, bool) { return v, true }
}

// recoveryCatalogue is every damage case: the torn tail cut at every byte
// of txn-0's last batch (the open transaction's) and at every 16th of
// codec-zstd-0's, flipped header and record bytes, zeroed ranges,
// damaged indexes, snapshots and checkpoints, interrupted renames.
func recoveryCatalogue(t *testing.T, c *kafka.Corpus) []recoveryCase {
	var cs []recoveryCase
	add := func(rc recoveryCase) { cs = append(cs, rc) }
	for _, clean := range []bool{false, true} {
		for _, src := range []string{"txn-0", "codec-zstd-0", "java-0", "retention-0", "logappend-0"} {
			add(recoveryCase{name: fmt.Sprintf("untouched/%s/clean=%v", src, clean), source: src, clean: clean})
		}
	}
	// Torn tails: with PARTLOG_KAFKA_RECOVERY_FULL=1 at every byte of
	// txn-0's last batch and every 16th of codec-zstd-0's; by default (CI)
	// at every byte of the first 18 of txn-0's batch (where Kafka's reader
	// starts to read an entry's length), every 4th of the rest of its
	// header, every 16th of its records and its middle byte, and every
	// 64th of codec-zstd-0's.
	full := os.Getenv("PARTLOG_KAFKA_RECOVERY_FULL") == "1"
	for _, src := range []struct {
		name       string
		step, fast int
	}{{"txn-0", 1, 16}, {"codec-zstd-0", 16, 64}} {
		_, start, data := lastSegmentBatch(t, filepath.Join(c.LogDir, src.name))
		middle := (start + len(data)) / 2
		for cut := start; cut < len(data); cut++ {
			step := src.step
			switch {
			case full || (src.name == "txn-0" && cut-start < 18):
			case src.name == "txn-0" && cut-start < batch.HeaderSize:
				step = 4
			default:
				step = src.fast
			}
			if (cut-start)%step != 0 && !(src.name == "txn-0" && cut == middle) {
				continue
			}
			cut := cut
			add(recoveryCase{name: fmt.Sprintf("torn-tail/%s/at-%d", src.name, cut), source: src.name,
				damage: func(t *testing.T, dir string) {
					seg := lastSegment(t, dir)
					if err := os.Truncate(seg, int64(cut)); err != nil {
						t.Fatal(err)
					}
				}})
		}
	}
	// Flipped bytes: every header byte of txn-0's last batch, and of
	// codec-zstd-0's last batch a byte of each header field and of its
	// records; then the same fields of a middle batch (valid data after
	// it) and of a batch of the first segment (below the recovery point).
	// Where partlog cuts a batch Kafka keeps, its result is Kafka's for
	// the log cut at that batch (K1: a base offset out of the segment's
	// range or going back, K2: a magic other than 0-2).
	_, txnLast, _ := lastSegmentBatch(t, filepath.Join(c.LogDir, "txn-0"))
	zstdSeg := lastSegment(t, filepath.Join(c.LogDir, "codec-zstd-0"))
	zstdPos, _ := batchPositions(t, zstdSeg)
	cutAt := func(src string, pos int) string { return fmt.Sprintf("torn-tail/%s/at-%d", src, pos) }
	fields := []int{7, 11, 15, 16, 20, 22, 26, 34, 42, 50, 52, 56, 60, 61, 70}
	// Every header byte of txn-0's last batch in the full run; by
	// default (CI) the first and last of its base offset and a byte of
	// each other field.
	flips := map[int]bool{0: true, 3: true}
	for _, at := range fields {
		flips[at] = at < batch.HeaderSize
	}
	for at := 0; at < batch.HeaderSize; at++ {
		if !full && !flips[at] {
			continue
		}
		rc := recoveryCase{name: fmt.Sprintf("flip/txn-0/last-batch/byte-%d", at), source: "txn-0", damage: flipAt(-1, at)}
		switch {
		case at < 4: // a base offset beyond the segment's 32-bit range
			rc.like, rc.deviation = cutAt("txn-0", txnLast), "K1"
		case at == batch.OffMagic:
			rc.like, rc.deviation = cutAt("txn-0", txnLast), "K2"
		}
		add(rc)
	}
	add(recoveryCase{name: cutAt("codec-zstd-0", zstdPos[1]), source: "codec-zstd-0", damage: func(t *testing.T, dir string) {
		if err := os.Truncate(lastSegment(t, dir), int64(zstdPos[1])); err != nil {
			t.Fatal(err)
		}
	}})
	for _, at := range fields {
		last := recoveryCase{name: fmt.Sprintf("flip/codec-zstd-0/last-batch/byte-%d", at), source: "codec-zstd-0", damage: flipAt(-1, at)}
		middle := recoveryCase{name: fmt.Sprintf("flip/codec-zstd-0/middle-batch/byte-%d", at), source: "codec-zstd-0", damage: flipAt(1, at)}
		switch at {
		case 7: // the base offset goes back into the previous batch's
			last.like, last.deviation = cutAt("codec-zstd-0", zstdPos[len(zstdPos)-1]), "K1"
			middle.like, middle.deviation = cutAt("codec-zstd-0", zstdPos[1]), "K1"
		case batch.OffMagic:
			last.like, last.deviation = cutAt("codec-zstd-0", zstdPos[len(zstdPos)-1]), "K2"
			middle.like, middle.deviation = cutAt("codec-zstd-0", zstdPos[1]), "K2"
		case 15: // epoch 2 becomes 3 in the middle of epoch 2's batches
			middle.epochsLike, middle.deviation = "untouched/codec-zstd-0/clean=false", "K3"
		}
		add(last)
		add(middle)
	}
	for _, at := range []int{7, 15, 20, 61} {
		at := at
		add(recoveryCase{name: fmt.Sprintf("flip/java-0/first-segment/byte-%d", at), source: "java-0",
			damage: func(t *testing.T, dir string) {
				seg := segmentsOf(t, dir)[0]
				pos, data := batchPositions(t, seg)
				data[pos[len(pos)/2]+at] ^= 0x01
				mustWrite(t, seg, data)
			}})
	}
	// Zeroed ranges.
	add(recoveryCase{name: "zero/txn-0/last-100-bytes", source: "txn-0", damage: func(t *testing.T, dir string) {
		seg := lastSegment(t, dir)
		_, data := batchPositions(t, seg)
		clear(data[len(data)-100:])
		mustWrite(t, seg, data)
	}})
	add(recoveryCase{name: "zero/codec-zstd-0/hole-in-last-segment", source: "codec-zstd-0", damage: func(t *testing.T, dir string) {
		seg := lastSegment(t, dir)
		pos, data := batchPositions(t, seg)
		clear(data[pos[1]+10 : pos[2]+5])
		mustWrite(t, seg, data)
	}})
	add(recoveryCase{name: "zero/java-0/whole-last-segment", source: "java-0", damage: func(t *testing.T, dir string) {
		seg := lastSegment(t, dir)
		_, data := batchPositions(t, seg)
		mustWrite(t, seg, make([]byte, len(data)))
	}})
	add(recoveryCase{name: "zero/txn-0/preallocated-tail", source: "txn-0", damage: func(t *testing.T, dir string) {
		seg := lastSegment(t, dir)
		_, data := batchPositions(t, seg)
		mustWrite(t, seg, append(data, make([]byte, 8192)...))
	}})
	// Indexes.
	indexCase := func(name, src, suffix string, which int, change func(data []byte) []byte) {
		add(recoveryCase{name: "index/" + src + "/" + name, source: src, damage: func(t *testing.T, dir string) {
			logs := segmentsOf(t, dir)
			if which < 0 {
				which += len(logs)
			}
			p := strings.TrimSuffix(logs[which], ".log") + suffix
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if out := change(data); out == nil {
				mustRemove(t, p)
			} else {
				mustWrite(t, p, out)
			}
		}})
	}
	indexCase("last-index-missing", "txn-0", ".index", -1, func([]byte) []byte { return nil })
	indexCase("last-timeindex-missing", "txn-0", ".timeindex", -1, func([]byte) []byte { return nil })
	indexCase("first-index-missing", "codec-zstd-0", ".index", 0, func([]byte) []byte { return nil })
	indexCase("last-index-partial-entry", "codec-zstd-0", ".index", -1, func(b []byte) []byte { return b[:len(b)-3] })
	indexCase("last-index-oversized", "txn-0", ".index", -1, func(b []byte) []byte { return append(b, make([]byte, 1<<20)...) })
	indexCase("last-timeindex-oversized", "txn-0", ".timeindex", -1, func(b []byte) []byte { return append(b, make([]byte, 12<<16)...) })
	indexCase("first-index-garbage", "java-0", ".index", 0, func(b []byte) []byte { return bytes.Repeat([]byte{0xff, 0x13, 0x7f}, 8) })
	indexCase("first-txnindex-missing", "txn-0", ".txnindex", 0, func([]byte) []byte { return nil })
	indexCase("first-txnindex-partial", "txn-0", ".txnindex", 0, func(b []byte) []byte { return b[:len(b)-5] })
	// Snapshots.
	snapCase := func(name, src string, change func(t *testing.T, dir string, snaps []string)) {
		add(recoveryCase{name: "snapshot/" + src + "/" + name, source: src, damage: func(t *testing.T, dir string) {
			snaps, err := kafka.Files(dir, ".snapshot")
			if err != nil {
				t.Fatal(err)
			}
			change(t, dir, snaps)
		}})
	}
	for _, src := range []string{"txn-0", "java-0", "retention-0"} {
		snapCase("all-missing", src, func(t *testing.T, _ string, snaps []string) { mustRemove(t, snaps...) })
		snapCase("latest-missing", src, func(t *testing.T, _ string, snaps []string) { mustRemove(t, snaps[len(snaps)-1]) })
		snapCase("latest-corrupt", src, func(t *testing.T, _ string, snaps []string) {
			data, err := os.ReadFile(snaps[len(snaps)-1])
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-3] ^= 0x10
			mustWrite(t, snaps[len(snaps)-1], data)
		})
	}
	snapCase("stale-at-log-end", "txn-0", func(t *testing.T, dir string, snaps []string) {
		// An older state under the log end's name.
		latest := snaps[len(snaps)-1]
		data, err := os.ReadFile(snaps[0])
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, latest, data)
	})
	snapCase("beyond-log-end", "java-0", func(t *testing.T, dir string, snaps []string) {
		data, err := os.ReadFile(snaps[len(snaps)-1])
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(dir, "00000000000000099999.snapshot"), data)
	})
	// Checkpoints of the log directory and the leader-epoch checkpoint.
	add(recoveryCase{name: "checkpoint/txn-0/no-recovery-point", source: "txn-0",
		recoveryPoint: func(sourceState) (int64, bool) { return 0, false }})
	add(recoveryCase{name: "checkpoint/txn-0/recovery-point-0-torn-tail", source: "txn-0", recoveryPoint: sameAs(0),
		damage: func(t *testing.T, dir string) {
			seg, start, _ := lastSegmentBatch(t, dir)
			if err := os.Truncate(seg, int64(start+20)); err != nil {
				t.Fatal(err)
			}
		}})
	add(recoveryCase{name: "checkpoint/codec-zstd-0/recovery-point-above-log-end-torn-tail", source: "codec-zstd-0", force: true,
		recoveryPoint: func(s sourceState) (int64, bool) { return s.logEnd + 1000, true },
		damage: func(t *testing.T, dir string) {
			seg, start, _ := lastSegmentBatch(t, dir)
			if err := os.Truncate(seg, int64(start+30)); err != nil {
				t.Fatal(err)
			}
		}})
	add(recoveryCase{name: "checkpoint/java-0/recovery-point-in-first-segment-flip-in-last", source: "java-0",
		recoveryPoint: sameAs(3), damage: flipAt(-1, 40)})
	add(recoveryCase{name: "checkpoint/retention-0/no-log-start", source: "retention-0",
		logStart: func(sourceState) (int64, bool) { return 0, false }})
	add(recoveryCase{name: "checkpoint/retention-0/log-start-above-log-end", source: "retention-0",
		logStart: func(s sourceState) (int64, bool) { return s.logEnd + 50, true }})
	add(recoveryCase{name: "checkpoint/txn-0/log-start-mid-segment", source: "txn-0", logStart: sameAs(57)})
	epochCase := func(name, src string, content func(old string) string) {
		add(recoveryCase{name: "epochs/" + src + "/" + name, source: src, damage: func(t *testing.T, dir string) {
			p := filepath.Join(dir, "leader-epoch-checkpoint")
			old, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if c := content(string(old)); c == "" {
				mustRemove(t, p)
			} else {
				mustWrite(t, p, []byte(c))
			}
		}})
	}
	epochCase("missing", "txn-0", func(string) string { return "" })
	cs[len(cs)-1].epochsLike, cs[len(cs)-1].deviation = "untouched/txn-0/clean=false", "K4"
	epochCase("garbage", "txn-0", func(string) string { return "0\n2\nnot an entry\n" })
	cs[len(cs)-1].kafkaRefuses = "Error while reading checkpoint file"
	cs[len(cs)-1].like, cs[len(cs)-1].deviation = "untouched/txn-0/clean=false", "K5"
	epochCase("stale-entry-past-log-end", "java-0", func(old string) string {
		lines := strings.Split(strings.TrimSpace(old), "\n")
		n, _ := strconv.Atoi(lines[1])
		return fmt.Sprintf("0\n%d\n%s\n9 100000\n", n+1, strings.Join(lines[2:], "\n"))
	})
	// Leftovers of interrupted renames.
	add(recoveryCase{name: "leftover/txn-0/deleted-segment", source: "txn-0", damage: func(t *testing.T, dir string) {
		// A segment deleted before the crash, its files renamed .deleted.
		for _, suf := range []string{".log", ".index", ".timeindex", ".txnindex"} {
			src := filepath.Join(dir, "00000000000000000000"+suf)
			if data, err := os.ReadFile(src); err == nil {
				mustWrite(t, filepath.Join(dir, "00000000000000000000"+suf+".deleted"), data)
			}
		}
	}})
	add(recoveryCase{name: "leftover/codec-zstd-0/cleaned", source: "codec-zstd-0", damage: func(t *testing.T, dir string) {
		logs := segmentsOf(t, dir)
		data, err := os.ReadFile(logs[1])
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, logs[1]+".cleaned", data)
	}})
	add(recoveryCase{name: "leftover/codec-zstd-0/swap-same", source: "codec-zstd-0", damage: func(t *testing.T, dir string) {
		logs := segmentsOf(t, dir)
		data, err := os.ReadFile(logs[1])
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, logs[1]+".swap", data)
	}})
	add(recoveryCase{name: "leftover/codec-zstd-0/swap-compacted", source: "codec-zstd-0", damage: func(t *testing.T, dir string) {
		// A cleaner's output, swapped in when the broker died: the
		// middle segment without two batches, neither a producer's last
		// (the cleaner keeps those for their sequence numbers).
		logs := segmentsOf(t, dir)
		pos, data := batchPositions(t, logs[1])
		mustWrite(t, logs[1]+".swap", append(append([]byte(nil), data[pos[1]:pos[2]]...), data[pos[3]:]...))
	}})
	add(recoveryCase{name: "leftover/codec-zstd-0/swap-after-cleaned", source: "codec-zstd-0", damage: func(t *testing.T, dir string) {
		// A swap at or above a .cleaned file is invalid: deleted.
		logs := segmentsOf(t, dir)
		for _, seg := range logs[1:] {
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, seg+".cleaned", data[:0])
			mustWrite(t, seg+".swap", data)
		}
	}})
	// The clean-shutdown marker present: Kafka trusts the segments.
	for _, rc := range append([]recoveryCase(nil), cs...) {
		switch rc.name {
		case "torn-tail/txn-0/at-" + strconv.Itoa(tornMiddle(t, c)), "index/txn-0/last-index-missing", "index/txn-0/first-txnindex-missing",
			"snapshot/txn-0/all-missing", "snapshot/java-0/latest-corrupt", "leftover/codec-zstd-0/swap-compacted",
			"leftover/txn-0/deleted-segment", "checkpoint/retention-0/log-start-above-log-end", "epochs/txn-0/missing",
			"zero/txn-0/preallocated-tail":
			unclean := rc.name
			rc.name += "/clean=true"
			rc.clean = true
			switch {
			case strings.HasPrefix(rc.name, "zero/txn-0/preallocated-tail"):
				// Trusting the segment, Kafka reads the zeros as an
				// entry of size 0 and the broker dies.
				rc.kafkaRefuses = "Found record size 0 smaller than minimum record overhead"
				rc.like, rc.deviation = "untouched/txn-0/clean=true", "K6"
			case strings.HasPrefix(rc.name, "torn-tail/"):
				// partlog checks the active segment's tail whatever the
				// marker says: what Kafka does without it.
				rc.like, rc.deviation = unclean, "K7"
			case strings.HasPrefix(rc.name, "snapshot/txn-0/all-missing"):
				rc.like, rc.deviation = unclean, "K8"
			case strings.HasPrefix(rc.name, "epochs/txn-0/missing"):
				rc.epochsLike, rc.deviation = "untouched/txn-0/clean=true", "K4"
			}
			cs = append(cs, rc)
		}
	}
	return cs
}

// tornMiddle is a cut in the middle of txn-0's last batch (one of the
// catalogue's torn tails in either mode).
func tornMiddle(t *testing.T, c *kafka.Corpus) int {
	_, start, data := lastSegmentBatch(t, filepath.Join(c.LogDir, "txn-0"))
	return (start + len(data)) / 2
}

// readEpochs reads a leader-epoch-checkpoint ((epoch, start offset)
// pairs); a missing or malformed file reads as none.
func readEpochs(path string) [][2]int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var out [][2]int64
	for _, l := range lines[min(2, len(lines)):] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil
		}
		e, err1 := strconv.ParseInt(f[0], 10, 64)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil
		}
		out = append(out, [2]int64{e, o})
	}
	return out
}

// becomeLeader applies to an epoch list what Kafka's broker does when it
// becomes the partition's leader at epoch e with log end end
// (LeaderEpochFileCache.assign): unless the last entry already has
// epoch e at or below end, entries with epoch at or above e or start at
// or above end are dropped and (e, end) appended.
func becomeLeader(epochs [][2]int64, e, end int64) [][2]int64 {
	if n := len(epochs); n > 0 && epochs[n-1][0] == e && epochs[n-1][1] <= end {
		return epochs
	}
	for len(epochs) > 0 && (epochs[len(epochs)-1][0] >= e || epochs[len(epochs)-1][1] >= end) {
		epochs = epochs[:len(epochs)-1]
	}
	return append(append([][2]int64(nil), epochs...), [2]int64{e, end})
}

// logFiles reads every .log file of dir, by name.
func logFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out, err := readLogFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readLogFiles(dir string) (map[string][]byte, error) {
	paths, err := kafka.Files(dir, ".log")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(p)] = data
	}
	return out, nil
}

// snapshotProducers is the producer state of the snapshot at the log end
// of dir, through DumpLogSegments; none when there is no snapshot there.
func snapshotProducers(t *testing.T, tl *kafka.Tools, dir string, logEnd int64) []producerEntry {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("%020d.snapshot", logEnd))
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	out, err := tl.Dump([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	es, err := parseSnapshotDump(out)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// recoverySession recovers every case once on each side: partlog's
// recover on a log directory of copies, and one Kafka broker with two
// log directories (without the clean-shutdown marker and with it), whose
// partitions of one topic get the copies placed in them, then one start
// that recovers them all and a clean stop. A case Kafka refuses is
// loaded by the broker's log loader alone.
type recoverySession struct {
	t      *testing.T
	in     *kafka.Install
	tl     *kafka.Tools
	corpus *kafka.Corpus
	cases  []recoveryCase
	// src are the corpus partitions' log-dir states.
	src map[string]sourceState
}

const recoveryTopic = "dmg"

// The broker's log directories in a recovery session.
const (
	uncleanDir = iota // no clean-shutdown marker
	cleanDir          // the marker
)

func (rc recoveryCase) logDir() int {
	if rc.clean {
		return cleanDir
	}
	return uncleanDir
}

// run returns Kafka's and partlog's outcomes by case name; Kafka's has
// none for the cases it refuses, whose refusal run checks.
func (s *recoverySession) run() (kafkaOut, partlogOut map[string]recoveryOutcome) {
	t := s.t
	n := int32(len(s.cases))
	work := t.TempDir()
	// The damaged copies.
	damaged := make([]string, n)
	for i, rc := range s.cases {
		damaged[i] = filepath.Join(work, "damaged", strconv.Itoa(i))
		copyDir(t, filepath.Join(s.corpus.LogDir, rc.source), damaged[i])
		if rc.damage != nil {
			rc.damage(t, damaged[i])
		}
	}
	rp := func(i int) (int64, bool) {
		rc, src := s.cases[i], s.src[s.cases[i].source]
		if rc.recoveryPoint != nil {
			return rc.recoveryPoint(src)
		}
		return src.recoveryPoint, true
	}
	ls := func(i int) (int64, bool) {
		rc, src := s.cases[i], s.src[s.cases[i].source]
		if rc.logStart != nil {
			return rc.logStart(src)
		}
		return src.logStart, src.logStart > 0
	}
	tp0 := time.Now()
	partlogOut = s.partlog(work, damaged, rp, ls)
	t.Logf("partlog side: %v", time.Since(tp0))
	tk0 := time.Now()
	defer func() { t.Logf("Kafka side: %v", time.Since(tk0)) }()

	bdir := ""
	if keep := os.Getenv("PARTLOG_KEEP_RECOVERY_BROKER"); keep != "" {
		bdir = keep
		os.RemoveAll(bdir)
	}
	b := s.in.StartBroker(t, kafka.BrokerConfig{Dir: bdir, LogDirs: 2, Props: map[string]string{"num.recovery.threads.per.data.dir": "2"}})
	if err := b.CreateTopic(recoveryTopic, n, nil); err != nil {
		t.Fatal(err)
	}
	// A clean restart before the broker is killed: the partitions' leader
	// epoch is then 2, as in the corpus's data, so that the leadership the
	// broker resumes after the kill keeps their epoch caches (one at a
	// lower epoch would drop the entries above it).
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	stale, err := b.WaitLeaders(recoveryTopic, n, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The broker killed under load: its "load" partition is one more
	// case, recovered by partlog from a copy taken now and by the broker
	// where it lies.
	killedCopy, killedRP, killedLS, killedStale := s.killUnderLoad(b, work)
	const killedName = "sigkill/load-0"
	partlogKilled := s.partlogOne(work, killedCopy, "load", 0, killedRP, killedLS)
	if err := b.MovePartition("load", 0, b.LogDirs[uncleanDir]); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(kafka.RecoveryPointCheckpoint, "load", 0, killedRP, killedRP >= 0); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(kafka.LogStartCheckpoint, "load", 0, killedLS, killedLS >= 0); err != nil {
		t.Fatal(err)
	}
	place := func(i int) {
		p := int32(i)
		if err := b.MovePartition(recoveryTopic, p, b.LogDirs[s.cases[i].logDir()]); err != nil {
			t.Fatal(err)
		}
		if err := b.PlacePartition(recoveryTopic, p, damaged[i]); err != nil {
			t.Fatal(err)
		}
		v, ok := rp(i)
		if err := b.SetCheckpoint(kafka.RecoveryPointCheckpoint, recoveryTopic, p, v, ok); err != nil {
			t.Fatal(err)
		}
		v, ok = ls(i)
		if err := b.SetCheckpoint(kafka.LogStartCheckpoint, recoveryTopic, p, v, ok); err != nil {
			t.Fatal(err)
		}
	}
	var served, refused []int32
	for i, rc := range s.cases {
		if rc.kafkaRefuses != "" {
			refused = append(refused, int32(i))
			continue
		}
		served = append(served, int32(i))
		place(i)
	}
	markers := func() {
		for d, clean := range []bool{false, true} {
			if err := b.SetCleanShutdownIn(b.LogDirs[d], clean); err != nil {
				t.Fatal(err)
			}
		}
	}
	markers()
	t.Logf("placed: %v", time.Since(tk0))
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted: %v", time.Since(tk0))
	leaders, err := b.WaitPartitionLeaders(recoveryTopic, served, 4*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.LogTail(30))
	}
	starts, ends, err := b.ListOffsets(recoveryTopic, served)
	if err != nil {
		t.Fatal(err)
	}
	loadLeader, err := b.WaitLeaders("load", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	loadStart, loadEnd, err := b.ListOffsets("load", []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped: %v", time.Since(tk0))
	kafkaOut = map[string]recoveryOutcome{}
	for _, p := range served {
		rc, dir := s.cases[p], b.PartitionDir(recoveryTopic, p)
		kafkaOut[rc.name] = recoveryOutcome{logs: logFiles(t, dir), logEnd: ends[p], logStart: starts[p],
			producers: snapshotProducers(t, s.tl, dir, ends[p]), epochs: readEpochs(filepath.Join(dir, "leader-epoch-checkpoint")),
			staleEpoch: int64(stale[p].LeaderEpoch), leaderEpoch: int64(leaders[p].LeaderEpoch)}
	}
	if partlogKilled != nil {
		dir := b.PartitionDir("load", 0)
		kafkaOut[killedName] = recoveryOutcome{logs: logFiles(t, dir), logEnd: loadEnd[0], logStart: loadStart[0],
			producers: snapshotProducers(t, s.tl, dir, loadEnd[0]), epochs: readEpochs(filepath.Join(dir, "leader-epoch-checkpoint")),
			staleEpoch: killedStale, leaderEpoch: int64(loadLeader[0].LeaderEpoch)}
		partlogOut[killedName] = *partlogKilled
	}
	// A case Kafka refuses is loaded by the broker's own loader
	// (UnifiedLog.create, which the broker's LogManager runs: its
	// exception takes the log directory offline, or ends the broker) in
	// the tool JVM; in the broker it would take the other cases with it,
	// and one more broker per case costs half a minute.
	for _, p := range refused {
		rc := s.cases[p]
		dir := filepath.Join(work, "dies", fmt.Sprintf("%s-%d", recoveryTopic, p))
		copyDir(t, damaged[p], dir)
		v, _ := rp(int(p))
		l, _ := ls(int(p))
		res, err := s.tl.Run(0, "LoadLog", dir, strconv.FormatBool(rc.clean), strconv.FormatInt(v, 10), strconv.FormatInt(l, 10))
		if err != nil {
			t.Fatal(err)
		}
		if res.Code == 0 || !strings.Contains(res.Stderr, rc.kafkaRefuses) {
			t.Errorf("%s: Kafka's log loader did not fail with %q: exit %d\n%s%s", rc.name, rc.kafkaRefuses, res.Code, res.Stdout, res.Stderr)
		}
	}
	return kafkaOut, partlogOut
}

// killUnderLoad creates topic "load" on the running broker, produces to
// it from an idempotent and a transactional producer, SIGKILLs the
// broker while they write, and returns a copy of the partition directory
// taken then with its recovery point and log start entries (-1: none)
// and the leader epoch it had.
func (s *recoverySession) killUnderLoad(b *kafka.Broker, work string) (string, int64, int64, int64) {
	t := s.t
	if err := b.CreateTopic("load", 1, map[string]string{"internal.segment.bytes": "30000", "index.interval.bytes": "300"}); err != nil {
		t.Fatal(err)
	}
	leader, err := b.WaitLeaders("load", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Records in flight when the broker dies fail after the delivery
	// timeout (kgo retries them forever otherwise).
	opts := []kgo.Opt{kgo.DefaultProduceTopic("load"), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(5 * time.Second)}
	idem := b.Client(t, opts...)
	txn := b.Client(t, append(opts, kgo.TransactionalID("load-txn"))...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var acked sync.WaitGroup
	acked.Add(2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		once := sync.OnceFunc(acked.Done)
		for i := 0; ctx.Err() == nil; i++ {
			if idem.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(fmt.Sprintf("idempotent %d", i))}).FirstErr() == nil && i > 20 {
				once()
			}
		}
		once()
	}()
	go func() {
		defer wg.Done()
		once := sync.OnceFunc(acked.Done)
		for i := 0; ctx.Err() == nil; i++ {
			if txn.BeginTransaction() != nil {
				break
			}
			for j := 0; j < 5; j++ {
				txn.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("txn %d/%d", i, j))}, nil)
			}
			if txn.Flush(ctx) != nil || txn.EndTransaction(ctx, kgo.TransactionEndTry(i%3 != 1)) != nil {
				break
			}
			if i > 5 {
				once()
			}
		}
		once()
	}()
	acked.Wait()
	time.Sleep(300 * time.Millisecond)
	b.Kill()
	cancel()
	idem.Close()
	txn.Close()
	wg.Wait()
	// Without its transaction log, the restarted coordinator knows no
	// open transaction of load-txn and writes no marker into "load" after
	// Kafka recovered it (a timed-out or prepared transaction would get
	// its ABORT or COMMIT there: the broker's doing, not its recovery's).
	for _, d := range b.LogDirs {
		if err := os.RemoveAll(filepath.Join(d, "__transaction_state-0")); err != nil {
			t.Fatal(err)
		}
	}
	dir := b.PartitionDir("load", 0)
	cp := filepath.Join(work, "killed", "load-0")
	copyDir(t, dir, cp)
	entry := func(file string) int64 {
		m, err := kafka.ReadCheckpoint(filepath.Join(filepath.Dir(dir), file))
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := m[kafka.TopicPartition{Topic: "load", Partition: 0}]; ok {
			return v
		}
		return -1
	}
	return cp, entry(kafka.RecoveryPointCheckpoint), entry(kafka.LogStartCheckpoint), int64(leader[0].LeaderEpoch)
}

// partlogOne recovers one partition directory copy with partlog, in a
// log directory of its own without the clean-shutdown marker.
func (s *recoverySession) partlogOne(work, src, topic string, p int32, rp, ls int64) *recoveryOutcome {
	t := s.t
	ldir := filepath.Join(work, "partlog-"+topic)
	dir := filepath.Join(ldir, fmt.Sprintf("%s-%d", topic, p))
	copyDir(t, src, dir)
	for file, v := range map[string]int64{kafka.RecoveryPointCheckpoint: rp, kafka.LogStartCheckpoint: ls} {
		m := map[kafka.TopicPartition]int64{}
		if v >= 0 {
			m[kafka.TopicPartition{Topic: topic, Partition: p}] = v
		}
		if err := kafka.WriteCheckpoint(filepath.Join(ldir, file), m); err != nil {
			t.Fatal(err)
		}
	}
	stdout, errOut, code := runPartlogSplit(t, "recover", "--apply", "--json", "--quarantine", filepath.Join(work, "quarantine-"+topic), dir)
	if code != 0 && code != 1 {
		t.Errorf("%s: partlog recover exited %d\n%s%s", dir, code, stdout, errOut)
		return nil
	}
	var rep recoverReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return &recoveryOutcome{logs: logFiles(t, dir), logEnd: rep.LogEndOffset, logStart: rep.LogStartOffset,
		producers: partlogProducers(t, dir), epochs: readEpochs(filepath.Join(dir, "leader-epoch-checkpoint"))}
}

// recoverReport is what the comparison reads of `partlog recover --json`.
type recoverReport struct {
	Dir            string `json:"dir"`
	LogStartOffset int64  `json:"logStartOffset"`
	LogEndOffset   int64  `json:"logEndOffset"`
}

// partlog runs `partlog recover --apply` on a log directory holding a
// copy of every case, with the same checkpoint entries and markers, and
// returns the outcomes by case name. partlog's log directory has one
// marker for all its partitions: the cases of each marker state get a
// log directory of their own.
func (s *recoverySession) partlog(work string, damaged []string, rp, ls func(int) (int64, bool)) map[string]recoveryOutcome {
	t := s.t
	out := map[string]recoveryOutcome{}
	for _, clean := range []bool{false, true} {
		pdir := filepath.Join(work, fmt.Sprintf("partlog-clean-%v", clean))
		rps, lss := map[kafka.TopicPartition]int64{}, map[kafka.TopicPartition]int64{}
		for i, rc := range s.cases {
			if rc.clean != clean {
				continue
			}
			copyDir(t, damaged[i], filepath.Join(pdir, fmt.Sprintf("%s-%d", recoveryTopic, i)))
			tp := kafka.TopicPartition{Topic: recoveryTopic, Partition: int32(i)}
			if v, ok := rp(i); ok {
				rps[tp] = v
			}
			if v, ok := ls(i); ok {
				lss[tp] = v
			}
		}
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := kafka.WriteCheckpoint(filepath.Join(pdir, kafka.RecoveryPointCheckpoint), rps); err != nil {
			t.Fatal(err)
		}
		if err := kafka.WriteCheckpoint(filepath.Join(pdir, kafka.LogStartCheckpoint), lss); err != nil {
			t.Fatal(err)
		}
		if clean {
			mustWrite(t, filepath.Join(pdir, kafka.CleanShutdownFile), nil)
		}
		// One recover for the partitions of this marker state (one for
		// each forced case), then their producers, a few at a time.
		var plain []string
		var force []int
		byDir := map[string]int{}
		for i, rc := range s.cases {
			if rc.clean != clean {
				continue
			}
			dir := filepath.Join(pdir, fmt.Sprintf("%s-%d", recoveryTopic, i))
			byDir[dir] = i
			if rc.force {
				force = append(force, i)
			} else {
				plain = append(plain, dir)
			}
		}
		reps := map[string]recoverReport{}
		recoverDirs := func(dirs []string, extra ...string) {
			if len(dirs) == 0 {
				return
			}
			args := append([]string{"recover", "--apply", "--json", "--quarantine", filepath.Join(work, "quarantine", filepath.Base(dirs[0]))}, extra...)
			stdout, errOut, code := runPartlogSplit(t, append(args, dirs...)...)
			if code != 0 && code != 1 {
				t.Errorf("partlog recover exited %d\n%s%s", code, stdout, errOut)
			}
			dec := json.NewDecoder(strings.NewReader(stdout))
			for dec.More() {
				var rep recoverReport
				if err := dec.Decode(&rep); err != nil {
					t.Fatalf("partlog recover --json: %v\n%s", err, stdout)
				}
				reps[rep.Dir] = rep
			}
		}
		recoverDirs(plain)
		for _, i := range force {
			recoverDirs([]string{filepath.Join(pdir, fmt.Sprintf("%s-%d", recoveryTopic, i))}, "--force")
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		jobs := make(chan string)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for dir := range jobs {
					rc := s.cases[byDir[dir]]
					rep, ok := reps[dir]
					if !ok {
						t.Errorf("%s: partlog recover reported nothing for %s", rc.name, dir)
						continue
					}
					logs, err := readLogFiles(dir)
					if err != nil {
						t.Errorf("%s: %v", rc.name, err)
						continue
					}
					producers, err := producersOf(dir)
					if err != nil {
						t.Errorf("%s: %v", rc.name, err)
						continue
					}
					o := recoveryOutcome{logs: logs, logEnd: rep.LogEndOffset, logStart: rep.LogStartOffset,
						producers: producers, epochs: readEpochs(filepath.Join(dir, "leader-epoch-checkpoint"))}
					mu.Lock()
					out[rc.name] = o
					mu.Unlock()
				}
			}()
		}
		for dir := range byDir {
			jobs <- dir
		}
		close(jobs)
		wg.Wait()
	}
	return out
}

// compareOutcome reports every difference between Kafka's and partlog's
// results of a case. Kafka's leader epochs include its steps of becoming
// the leader, which are applied to partlog's before they are compared.
func compareOutcome(t *testing.T, name string, k, p recoveryOutcome) {
	t.Helper()
	p.epochs = becomeLeader(becomeLeader(p.epochs, k.staleEpoch, p.logEnd), k.leaderEpoch, p.logEnd)
	var diffs []string
	names := map[string]bool{}
	for n := range k.logs {
		names[n] = true
	}
	for n := range p.logs {
		names[n] = true
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		kb, kok := k.logs[n]
		pb, pok := p.logs[n]
		switch {
		case !kok:
			diffs = append(diffs, fmt.Sprintf("%s: only partlog has it (%d bytes)", n, len(pb)))
		case !pok:
			diffs = append(diffs, fmt.Sprintf("%s: only Kafka has it (%d bytes)", n, len(kb)))
		case !bytes.Equal(kb, pb):
			diffs = append(diffs, fmt.Sprintf("%s: Kafka %d bytes, partlog %d bytes, first difference at %d", n, len(kb), len(pb), firstByteDiff(kb, pb)))
		}
	}
	if k.logEnd != p.logEnd {
		diffs = append(diffs, fmt.Sprintf("log end: Kafka %d, partlog %d", k.logEnd, p.logEnd))
	}
	if k.logStart != p.logStart {
		diffs = append(diffs, fmt.Sprintf("log start: Kafka %d, partlog %d", k.logStart, p.logStart))
	}
	if k.producers == nil {
		k.producers = []producerEntry{}
	}
	if !reflect.DeepEqual(k.producers, p.producers) {
		diffs = append(diffs, fmt.Sprintf("producers:\n    Kafka   %+v\n    partlog %+v", k.producers, p.producers))
	}
	if !reflect.DeepEqual(k.epochs, p.epochs) {
		diffs = append(diffs, fmt.Sprintf("leader epochs: Kafka %v, partlog %v", k.epochs, p.epochs))
	}
	if len(diffs) > 0 {
		t.Errorf("%s:\n  %s", name, strings.Join(diffs, "\n  "))
	}
}

func firstByteDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// sourceStates reads the corpus log directory's checkpoints.
func sourceStates(t *testing.T, c *kafka.Corpus) map[string]sourceState {
	t.Helper()
	rps, err := kafka.ReadCheckpoint(filepath.Join(c.LogDir, kafka.RecoveryPointCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	lss, err := kafka.ReadCheckpoint(filepath.Join(c.LogDir, kafka.LogStartCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sourceState{}
	for _, tp := range c.Topics {
		for p := int32(0); p < tp.Partitions; p++ {
			key := kafka.TopicPartition{Topic: tp.Name, Partition: p}
			name := fmt.Sprintf("%s-%d", tp.Name, p)
			// The log end: the snapshot Kafka wrote at its clean stop.
			snaps, _ := kafka.Files(filepath.Join(c.LogDir, name), ".snapshot")
			end := int64(0)
			if len(snaps) > 0 {
				end, _ = strconv.ParseInt(strings.TrimSuffix(filepath.Base(snaps[len(snaps)-1]), ".snapshot"), 10, 64)
			}
			out[name] = sourceState{recoveryPoint: rps[key], logStart: lss[key], logEnd: end}
		}
	}
	return out
}

// TestKafkaRecoveryMatches damages copies of corpus partitions in every
// way of the catalogue and checks that partlog's recovery leaves what
// Kafka's leaves: the .log bytes, log end and start, producer state and
// leader epochs.
func TestKafkaRecoveryMatches(t *testing.T) {
	c := sharedCorpus(t)
	in := kafka.Need(t)
	tl := in.StartTools(t)
	cases := recoveryCatalogue(t, c)
	s := &recoverySession{t: t, in: in, tl: tl, corpus: c, cases: cases, src: sourceStates(t, c)}
	t.Logf("%d cases", len(cases))
	kafkaOut, partlogOut := s.run()
	if k, ok := kafkaOut["sigkill/load-0"]; !ok {
		t.Error("no outcome for the broker killed under load")
	} else if p, ok := partlogOut["sigkill/load-0"]; ok {
		compareOutcome(t, "sigkill/load-0", k, p)
	}
	doc, err := os.ReadFile("../docs/recovery.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range cases {
		p, ok := partlogOut[rc.name]
		if !ok {
			continue // partlog failed, reported
		}
		ref := rc.name
		if rc.like != "" {
			ref = rc.like
		}
		k, ok := kafkaOut[ref]
		if !ok {
			t.Errorf("%s: no Kafka outcome for %s", rc.name, ref)
			continue
		}
		if rc.epochsLike != "" {
			e, ok := kafkaOut[rc.epochsLike]
			if !ok {
				t.Errorf("%s: no Kafka outcome for %s", rc.name, rc.epochsLike)
				continue
			}
			k.epochs, k.staleEpoch, k.leaderEpoch = e.epochs, e.staleEpoch, e.leaderEpoch
		}
		if rc.deviation != "" && !strings.Contains(string(doc), "- **"+rc.deviation+"**") {
			t.Errorf("%s: deviation %s is not in docs/recovery.md §2.16", rc.name, rc.deviation)
		}
		name := rc.name
		if ref != rc.name || rc.epochsLike != "" {
			name += " (partlog's deviation " + rc.deviation + ")"
		}
		compareOutcome(t, name, k, p)
	}
}
