package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// Helpers shared by truncate_test.go, roll_test.go, open_test.go,
// race_test.go and fulldisk_test.go. They carry an "lt" prefix so they do
// not collide with helpers of other test files of the package.

// ltBatch is one batch as it lies in the log.
type ltBatch struct {
	Base, Last int64
	Epoch      int32
	Bytes      []byte
}

// ltState is what a log exposes, captured for comparison.
type ltState struct {
	LSO, LEO int64
	Segs     []int64
	Epochs   []EpochEntry
	Batches  []ltBatch
}

// ltOpts are small options: segments of a few batches, indexed often.
func ltOpts(t testing.TB) *Options {
	o := smallOpts(t)
	o.SegmentBytes = 8 << 10
	o.MaxIndexBytes = 4096
	o.IndexIntervalBytes = 512
	return o
}

// ltAppend appends n leader batches of three records each, ~1 KB apiece,
// with the epoch epochOf(i), and returns what the log reported.
func ltAppend(t testing.TB, l *Log, n int, epochOf func(i int) int32) []AppendInfo {
	t.Helper()
	var out []AppendInfo
	for i := 0; i < n; i++ {
		info, err := l.AppendAsLeader(makeBatch(t, 3, 300, 1_700_000_000_000+int64(i)*10), epochOf(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, info)
	}
	return out
}

// ltBatches reads the whole log batch by batch and returns copies of the
// batches, failing on any invalid or out-of-order batch.
func ltBatches(t testing.TB, l *Log) []ltBatch {
	t.Helper()
	var out []ltBatch
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		v, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		if len(v.Records) == 0 {
			v.Release()
			t.Fatalf("empty read at %d below LEO %d", next, l.LogEndOffset())
		}
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if b.LastOffset() < next {
				continue
			}
			out = append(out, ltBatch{Base: b.BaseOffset(), Last: b.LastOffset(), Epoch: b.PartitionLeaderEpoch(), Bytes: bytes.Clone(b)})
			next = b.NextOffset()
		}
		err = it.Err()
		v.Release()
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
	}
	return out
}

// ltCapture captures the observable state of l.
func ltCapture(t testing.TB, l *Log) ltState {
	t.Helper()
	return ltState{LSO: l.LogStartOffset(), LEO: l.LogEndOffset(), Segs: l.Segments(),
		Epochs: l.LeaderEpochs(), Batches: ltBatches(t, l)}
}

// ltSameState fails unless two captured states are equal.
func ltSameState(t testing.TB, what string, got, want ltState) {
	t.Helper()
	if got.LSO != want.LSO || got.LEO != want.LEO {
		t.Fatalf("%s: LSO/LEO %d/%d, want %d/%d", what, got.LSO, got.LEO, want.LSO, want.LEO)
	}
	if !slices.Equal(got.Segs, want.Segs) {
		t.Fatalf("%s: segments %v, want %v", what, got.Segs, want.Segs)
	}
	if !ltEpochsEqual(got.Epochs, want.Epochs) {
		t.Fatalf("%s: epochs %v, want %v", what, got.Epochs, want.Epochs)
	}
	if len(got.Batches) != len(want.Batches) {
		t.Fatalf("%s: %d batches, want %d", what, len(got.Batches), len(want.Batches))
	}
	for i := range got.Batches {
		if !reflect.DeepEqual(got.Batches[i], want.Batches[i]) {
			t.Fatalf("%s: batch %d differs (base %d vs %d)", what, i, got.Batches[i].Base, want.Batches[i].Base)
		}
	}
}

func ltEpochsEqual(a, b []EpochEntry) bool {
	return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b))
}

// ltCheckReads reads every offset of every batch (Read(o, 1, LEO)) and
// checks that the first batch returned is the one holding o, byte for
// byte.
func ltCheckReads(t testing.TB, l *Log, batches []ltBatch) {
	t.Helper()
	for _, b := range batches {
		for o := max(b.Base, l.LogStartOffset()); o <= b.Last; o++ {
			v, err := l.Read(o, 1, l.LogEndOffset())
			if err != nil {
				t.Fatalf("read %d: %v", o, err)
			}
			got, err := batch.Check(v.Records)
			if err != nil {
				v.Release()
				t.Fatalf("read %d: %v", o, err)
			}
			if !bytes.Equal(got, b.Bytes) {
				v.Release()
				t.Fatalf("read %d: got batch at %d, want the batch at %d", o, got.BaseOffset(), b.Base)
			}
			v.Release()
		}
	}
}

// ltEpochFileText is the leader-epoch-checkpoint text for entries.
func ltEpochFileText(entries []EpochEntry) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&sb, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return sb.String()
}

// ltCheckEpochFile checks the leader-epoch-checkpoint on disk.
func ltCheckEpochFile(t testing.TB, dir string, want []EpochEntry) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "leader-epoch-checkpoint"))
	if err != nil {
		t.Fatalf("leader-epoch-checkpoint: %v", err)
	}
	if got := string(b); got != ltEpochFileText(want) {
		t.Fatalf("leader-epoch-checkpoint %q, want %q", got, ltEpochFileText(want))
	}
}

// ltNames lists the directory.
func ltNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// ltCheckFiles checks that the directory holds a .log for exactly the
// given segments, no index without its .log, and no transient leftovers.
func ltCheckFiles(t testing.TB, dir string, segs []int64) {
	t.Helper()
	var logs []int64
	for _, name := range ltNames(t, dir) {
		if strings.HasSuffix(name, ".tmp") {
			t.Fatalf("leftover %s", name)
		}
		n, err := filenames.Parse(name)
		if err != nil {
			continue
		}
		if n.Transient != "" {
			t.Fatalf("leftover %s", name)
		}
		if n.Kind == filenames.Log {
			logs = append(logs, n.Offset)
		} else if n.Kind == filenames.Snapshot && n.Offset >= segs[len(segs)-1] {
			// The producer snapshot at the log end (written by a
			// truncation, or at close) may follow the last segment base.
			continue
		} else if !slices.Contains(segs, n.Offset) {
			t.Fatalf("%s belongs to no segment of %v", name, segs)
		}
	}
	slices.Sort(logs)
	if !slices.Equal(logs, segs) {
		t.Fatalf(".log files for %v, want %v", logs, segs)
	}
}

// ltCheckZeroTail checks that the active .log holds exactly the data of
// the batches at or above the active base, then zeros to the preallocated
// length.
func ltCheckZeroTail(t testing.TB, l *Log, dir string, batches []ltBatch) {
	t.Helper()
	segs := l.Segments()
	base := segs[len(segs)-1]
	var want []byte
	for _, b := range batches {
		if b.Base >= base {
			want = append(want, b.Bytes...)
		}
	}
	data, err := os.ReadFile(filenames.Path(dir, base, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	// The file holds the data and possibly a reservation beyond it
	// (grown in steps, never past SegmentBytes).
	if len(data) < len(want) || int64(len(data)) > l.opts.SegmentBytes {
		t.Fatalf("active .log is %d bytes: want between its %d bytes of data and SegmentBytes %d", len(data), len(want), l.opts.SegmentBytes)
	}
	if !bytes.Equal(data[:len(want)], want) {
		t.Fatalf("active .log does not start with its %d bytes of batches", len(want))
	}
	if i := slices.IndexFunc(data[len(want):], func(c byte) bool { return c != 0 }); i >= 0 {
		t.Fatalf("active .log has a non-zero byte at %d, after its data ends at %d", len(want)+i, len(want))
	}
}

// ltReopen closes l and opens dir again, closing the new log at cleanup.
func ltReopen(t testing.TB, l *Log, dir string, opts *Options) *Log {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The log was closed cleanly: reopen it as a log directory with its
	// clean-shutdown marker would (only the active tail is verified).
	o := *opts
	o.CleanShutdown = true
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { _ = l2.Close() })
	return l2
}

// ltKeep returns the batches strictly below offset.
func ltKeep(batches []ltBatch, offset int64) []ltBatch {
	var out []ltBatch
	for _, b := range batches {
		if b.Base < offset {
			out = append(out, b)
		}
	}
	return out
}

// ltEpochsBelow returns the entries starting below offset.
func ltEpochsBelow(entries []EpochEntry, offset int64) []EpochEntry {
	var out []EpochEntry
	for _, e := range entries {
		if e.StartOffset < offset {
			out = append(out, e)
		}
	}
	return out
}

// ltEpochOf gives epochs 1..: a new epoch every seven batches.
func ltEpochOf(i int) int32 { return int32(1 + i/7) }

func TestTruncateTo(t *testing.T) {
	const n = 40
	// Each case picks the target from the batches and segments written.
	cases := []struct {
		name string
		// target returns the truncation offset.
		target func(b []ltBatch, segs []int64) int64
		// wantSegs returns the segments expected after the truncation.
		wantSegs func(segs []int64, target int64) []int64
	}{
		{"active segment, batch boundary", func(b []ltBatch, segs []int64) int64 {
			last := segs[len(segs)-1]
			for _, x := range b {
				if x.Base > last+3 { // not the first batch of the segment
					return x.Base
				}
			}
			t.Fatal("active segment has a single batch")
			return 0
		}, func(segs []int64, _ int64) []int64 { return segs }},
		{"segment boundary", func(_ []ltBatch, segs []int64) int64 { return segs[2] },
			func(segs []int64, _ int64) []int64 { return segs[:3] }},
		{"inside a sealed segment", func(b []ltBatch, segs []int64) int64 {
			for _, x := range b {
				if x.Base > segs[1] && x.Last+1 < segs[2] {
					return x.Base
				}
			}
			t.Fatal("segment 1 has a single batch")
			return 0
		}, func(segs []int64, _ int64) []int64 { return segs[:2] }},
		{"active segment to empty", func(_ []ltBatch, segs []int64) int64 { return segs[len(segs)-1] },
			func(segs []int64, _ int64) []int64 { return segs }},
		{"first batch of the log", func(_ []ltBatch, _ []int64) int64 { return 0 },
			func(segs []int64, _ int64) []int64 { return segs[:1] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := ltOpts(t)
			l, dir := openTestLog(t, opts)
			ltAppend(t, l, n, ltEpochOf)
			segs := l.Segments()
			if len(segs) < 4 {
				t.Fatalf("want at least 4 segments, got %v", segs)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			l.SetHighWatermark(l.LogEndOffset())
			before := ltCapture(t, l)
			target := tc.target(before.Batches, segs)
			if err := l.TruncateTo(target); err != nil {
				t.Fatalf("TruncateTo(%d): %v", target, err)
			}
			want := ltState{LSO: 0, LEO: target, Segs: tc.wantSegs(segs, target),
				Epochs: ltEpochsBelow(before.Epochs, target), Batches: ltKeep(before.Batches, target)}
			got := ltCapture(t, l)
			ltSameState(t, "after truncation", got, want)
			if rp := l.RecoveryPoint(); rp > target {
				t.Fatalf("recovery point %d above the truncation offset %d", rp, target)
			}
			if hw := l.HighWatermark(); hw > l.LogEndOffset() || hw != target {
				t.Fatalf("high watermark %d, want %d", hw, target)
			}
			ltCheckEpochFile(t, dir, want.Epochs)
			ltCheckFiles(t, dir, want.Segs)
			ltCheckZeroTail(t, l, dir, want.Batches)
			ltCheckReads(t, l, want.Batches)
			if _, err := l.Read(target+1, 100, target+10); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read past the new LEO: %v", err)
			}

			// Appends continue at the new LEO, in the last remaining segment.
			activeBase := want.Segs[len(want.Segs)-1]
			infos := ltAppend(t, l, 3, func(int) int32 { return 20 })
			if infos[0].FirstOffset != target || infos[0].SegmentBaseOffset != activeBase {
				t.Fatalf("append after truncation: first offset %d in segment %d, want %d in %d",
					infos[0].FirstOffset, infos[0].SegmentBaseOffset, target, activeBase)
			}
			if infos[2].LastOffset != target+8 || l.LogEndOffset() != target+9 {
				t.Fatalf("appends after truncation end at %d (LEO %d), want %d", infos[2].LastOffset, l.LogEndOffset(), target+8)
			}
			want.Epochs = append(want.Epochs, EpochEntry{Epoch: 20, StartOffset: target})
			after := ltCapture(t, l)
			if !ltEpochsEqual(after.Epochs, want.Epochs) {
				t.Fatalf("epochs %v, want %v", after.Epochs, want.Epochs)
			}
			ltCheckEpochFile(t, dir, want.Epochs)
			ltCheckReads(t, l, after.Batches)

			// Closed and reopened (a clean Open), the files give the same log.
			l2 := ltReopen(t, l, dir, opts)
			ltSameState(t, "after reopen", ltCapture(t, l2), after)
			ltCheckReads(t, l2, after.Batches)
		})
	}
}

// TestTruncateInsideBatch: an offset strictly inside a batch removes the
// whole batch (Kafka's LogSegment.truncateTo), TruncateAt reports the
// batch's base offset as the new log end, and the result is the same log
// as a truncation at that base: inside the first batch of the log, a batch
// of a sealed segment and the last batch of the active segment.
func TestTruncateInsideBatch(t *testing.T) {
	opts := ltOpts(t)
	probe, _ := openTestLog(t, opts)
	ltAppend(t, probe, 30, ltEpochOf)
	segs := probe.Segments()
	all := ltCapture(t, probe)
	type tcase struct {
		name   string
		target int64
		want   int64
	}
	var cases []tcase
	for _, b := range all.Batches {
		switch {
		case b.Base == 0:
			cases = append(cases, tcase{"first batch +1", b.Base + 1, b.Base}, tcase{"first batch last", b.Last, b.Base})
		case b.Base == segs[1]+3:
			cases = append(cases, tcase{"sealed segment +1", b.Base + 1, b.Base}, tcase{"sealed segment last", b.Last, b.Base})
		case b.Last == all.LEO-1:
			cases = append(cases, tcase{"last batch +1", b.Base + 1, b.Base}, tcase{"last batch last", b.Last, b.Base})
		}
	}
	if len(cases) != 6 {
		t.Fatalf("cases %v", cases)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inside, dir := openTestLog(t, opts)
			ltAppend(t, inside, 30, ltEpochOf)
			at, _ := openTestLog(t, opts)
			ltAppend(t, at, 30, ltEpochOf)
			leo, err := inside.TruncateAt(c.target)
			if err != nil || leo != c.want {
				t.Fatalf("TruncateAt(%d) = %d, %v; want %d", c.target, leo, err, c.want)
			}
			if err := at.TruncateTo(c.want); err != nil {
				t.Fatal(err)
			}
			want := ltCapture(t, at)
			ltSameState(t, "inside vs at the batch start", ltCapture(t, inside), want)
			ltCheckReads(t, inside, want.Batches)
			// The log takes appends at the new end and reopens the same.
			infos := ltAppend(t, inside, 1, func(int) int32 { return 9 })
			if infos[0].FirstOffset != c.want {
				t.Fatalf("append at %d, want %d", infos[0].FirstOffset, c.want)
			}
			after := ltCapture(t, inside)
			l2 := ltReopen(t, inside, dir, opts)
			ltSameState(t, "after reopen", ltCapture(t, l2), after)
		})
	}
	// TruncateTo (no result) has the same semantics.
	l, _ := openTestLog(t, opts)
	ltAppend(t, l, 3, ltEpochOf)
	if err := l.TruncateTo(4); err != nil || l.LogEndOffset() != 3 {
		t.Fatalf("TruncateTo(4) inside [3,5]: %v, LEO %d", err, l.LogEndOffset())
	}
}

func TestTruncateToAtOrPastEnd(t *testing.T) {
	opts := ltOpts(t)
	l, dir := openTestLog(t, opts)
	ltAppend(t, l, 20, ltEpochOf)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset() - 5)
	before := ltCapture(t, l)
	rp, hw := l.RecoveryPoint(), l.HighWatermark()
	for _, target := range []int64{before.LEO, before.LEO + 1, before.LEO + 1000} {
		if err := l.TruncateTo(target); err != nil {
			t.Fatalf("TruncateTo(%d): %v", target, err)
		}
		ltSameState(t, fmt.Sprintf("after TruncateTo(%d)", target), ltCapture(t, l), before)
		if l.RecoveryPoint() != rp || l.HighWatermark() != hw {
			t.Fatalf("RP/HW %d/%d, want %d/%d", l.RecoveryPoint(), l.HighWatermark(), rp, hw)
		}
		ltCheckEpochFile(t, dir, before.Epochs)
	}
	if err := l.TruncateTo(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("TruncateTo(-1): %v", err)
	}
}

func TestTruncateToBelowFirstSegment(t *testing.T) {
	opts := ltOpts(t)
	l, dir := openTestLog(t, opts)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	ltAppend(t, l, 20, ltEpochOf)
	segs := l.Segments()
	if segs[0] != 1000 || len(segs) < 2 {
		t.Fatalf("segments %v", segs)
	}
	for _, target := range []int64{999, 500} {
		if err := l.TruncateTo(target); err != nil {
			t.Fatalf("TruncateTo(%d): %v", target, err)
		}
		if l.LogStartOffset() != target || l.LogEndOffset() != target || l.HighWatermark() != target || l.RecoveryPoint() != target {
			t.Fatalf("after TruncateTo(%d): LSO %d LEO %d HW %d RP %d", target,
				l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.RecoveryPoint())
		}
		if got := l.Segments(); !slices.Equal(got, []int64{target}) {
			t.Fatalf("segments %v, want [%d]", got, target)
		}
		if e := l.LeaderEpochs(); len(e) != 0 {
			t.Fatalf("epochs %v, want none", e)
		}
		ltCheckEpochFile(t, dir, nil)
		ltCheckFiles(t, dir, []int64{target})
		v, err := l.Read(target, 100, target+100)
		if err != nil || len(v.Records) != 0 {
			t.Fatalf("read at the restarted end: %v, %d bytes", err, len(v.Records))
		}
		v.Release()
		// Refill so the next round has segments to lose.
		infos := ltAppend(t, l, 12, ltEpochOf)
		if infos[0].FirstOffset != target {
			t.Fatalf("first append at %d, want %d", infos[0].FirstOffset, target)
		}
	}
	after := ltCapture(t, l)
	l2 := ltReopen(t, l, dir, opts)
	ltSameState(t, "after reopen", ltCapture(t, l2), after)
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	for _, n := range []int64{0, 7, 12, 5000, 1 << 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			opts := ltOpts(t)
			l, dir := openTestLog(t, opts)
			ltAppend(t, l, 25, ltEpochOf)
			if err := l.TruncateFullyAndStartAt(n); err != nil {
				t.Fatal(err)
			}
			for what, got := range map[string]int64{"LogStartOffset": l.LogStartOffset(), "LogEndOffset": l.LogEndOffset(),
				"HighWatermark": l.HighWatermark(), "RecoveryPoint": l.RecoveryPoint()} {
				if got != n {
					t.Fatalf("%s %d, want %d", what, got, n)
				}
			}
			if e := l.LeaderEpochs(); len(e) != 0 {
				t.Fatalf("epochs %v", e)
			}
			ltCheckEpochFile(t, dir, nil)
			if got := l.Segments(); !slices.Equal(got, []int64{n}) {
				t.Fatalf("segments %v", got)
			}
			ltCheckFiles(t, dir, []int64{n})
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%020d.log", n))); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				if _, err := l.Read(n-1, 100, n+10); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read below the new start: %v", err)
				}
			}
			ltCheckZeroTail(t, l, dir, nil)
			infos := ltAppend(t, l, 10, func(int) int32 { return 4 })
			if infos[0].FirstOffset != n || l.LogEndOffset() != n+30 {
				t.Fatalf("appends at %d, LEO %d", infos[0].FirstOffset, l.LogEndOffset())
			}
			if e := l.LeaderEpochs(); !slices.Equal(e, []EpochEntry{{Epoch: 4, StartOffset: n}}) {
				t.Fatalf("epochs %v", e)
			}
			after := ltCapture(t, l)
			l2 := ltReopen(t, l, dir, opts)
			ltSameState(t, "after reopen", ltCapture(t, l2), after)
		})
	}
}

func TestSetLogStartOffset(t *testing.T) {
	opts := ltOpts(t)
	l, dir := openTestLog(t, opts)
	ltAppend(t, l, 40, ltEpochOf)
	segs := l.Segments()
	all := ltCapture(t, l)
	if len(segs) < 5 {
		t.Fatalf("segments %v", segs)
	}
	// Pick a point strictly inside segment 2 and not at an epoch start.
	var lso int64 = -1
	for _, b := range all.Batches {
		if b.Base > segs[2] && b.Last+1 < segs[3] && !slices.ContainsFunc(all.Epochs, func(e EpochEntry) bool { return e.StartOffset == b.Base+1 }) {
			lso = b.Base + 1 // inside a batch: the start need not be a boundary
			break
		}
	}
	if lso < 0 {
		t.Fatal("no suitable offset")
	}
	if err := l.SetLogStartOffset(lso); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != lso {
		t.Fatalf("LSO %d, want %d", l.LogStartOffset(), lso)
	}
	if got := l.Segments(); !slices.Equal(got, segs[2:]) {
		t.Fatalf("segments %v, want %v", got, segs[2:])
	}
	ltCheckFiles(t, dir, segs[2:])
	if l.HighWatermark() < lso || l.RecoveryPoint() < lso {
		t.Fatalf("HW %d / RP %d below the log start %d", l.HighWatermark(), l.RecoveryPoint(), lso)
	}
	// Kafka's truncateFromStart: entries wholly below go, the last of them
	// stays with its start raised.
	var wantEpochs []EpochEntry
	for i, e := range all.Epochs {
		if e.StartOffset >= lso {
			wantEpochs = append(wantEpochs, e)
		} else if i+1 == len(all.Epochs) || all.Epochs[i+1].StartOffset > lso {
			wantEpochs = append(wantEpochs, EpochEntry{Epoch: e.Epoch, StartOffset: lso})
		}
	}
	if got := l.LeaderEpochs(); !slices.Equal(got, wantEpochs) {
		t.Fatalf("epochs %v, want %v", got, wantEpochs)
	}
	ltCheckEpochFile(t, dir, wantEpochs)
	for _, o := range []int64{0, segs[1], segs[2], lso - 1} {
		if _, err := l.Read(o, 100, l.LogEndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read %d below the log start %d: %v", o, lso, err)
		}
	}
	// At the start: the batch holding it.
	v, err := l.Read(lso, 1, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := batch.Check(v.Records); err != nil || b.BaseOffset() != lso-1 {
		t.Fatalf("read at the log start: %v", err)
	}
	v.Release()
	ltCheckReads(t, l, ltBatches(t, l))

	// Never lowered.
	for _, o := range []int64{lso - 1, 0, lso} {
		if err := l.SetLogStartOffset(o); err != nil {
			t.Fatalf("SetLogStartOffset(%d): %v", o, err)
		}
		if l.LogStartOffset() != lso {
			t.Fatalf("LSO moved to %d", l.LogStartOffset())
		}
	}
	// Beyond the end.
	if err := l.SetLogStartOffset(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("SetLogStartOffset past LEO: %v", err)
	}
	if l.LogStartOffset() != lso {
		t.Fatalf("LSO moved to %d", l.LogStartOffset())
	}
	// Up to the end: every sealed segment goes, the active one stays.
	leo := l.LogEndOffset()
	active := segs[len(segs)-1]
	if err := l.SetLogStartOffset(leo); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); !slices.Equal(got, []int64{active}) {
		t.Fatalf("segments %v, want [%d]", got, active)
	}
	ltCheckFiles(t, dir, []int64{active})
	lastEpoch := all.Epochs[len(all.Epochs)-1]
	if got := l.LeaderEpochs(); !slices.Equal(got, []EpochEntry{{Epoch: lastEpoch.Epoch, StartOffset: leo}}) {
		t.Fatalf("epochs %v", got)
	}
	v, err = l.Read(leo, 100, leo)
	if err != nil || len(v.Records) != 0 {
		t.Fatalf("read at LEO = LSO: %v", err)
	}
	v.Release()
	infos := ltAppend(t, l, 2, func(int) int32 { return lastEpoch.Epoch })
	if infos[0].FirstOffset != leo {
		t.Fatalf("append at %d, want %d", infos[0].FirstOffset, leo)
	}
}

// TestEpochTruncateFromStartAtEpochStart: raising the log start offset
// to exactly an epoch's start offset leaves one entry there, as Kafka's
// truncateFromStart (remove every entry starting at or below the
// offset, re-add the last one at it) does.
func TestEpochTruncateFromStartAtEpochStart(t *testing.T) {
	l, dir := openTestLog(t, ltOpts(t))
	ltAppend(t, l, 40, ltEpochOf)
	epochs := l.LeaderEpochs()
	if len(epochs) < 3 {
		t.Fatalf("epochs %v", epochs)
	}
	lso := epochs[2].StartOffset
	if err := l.SetLogStartOffset(lso); err != nil {
		t.Fatal(err)
	}
	want := epochs[2:]
	if got := l.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	ltCheckEpochFile(t, dir, want)
}
