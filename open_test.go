package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// openCopyDir copies every regular file of src into a new directory.
func openCopyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range ltNames(t, src) {
		in, err := os.Open(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		_ = in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// openBuild makes a closed log of several segments with epochs and
// returns its directory and state.
func openBuild(t *testing.T, opts *Options, n int) (string, ltState) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ltAppend(t, l, n, ltEpochOf)
	st := ltCapture(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func TestReopenSameState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, l *Log)
	}{
		{"plain", func(*testing.T, *Log) {}},
		{"empty active segment", func(t *testing.T, l *Log) {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}},
		{"after SetLogStartOffset at a segment base", func(t *testing.T, l *Log) {
			if err := l.SetLogStartOffset(l.Segments()[2]); err != nil {
				t.Fatal(err)
			}
		}},
		{"after truncation into a sealed segment", func(t *testing.T, l *Log) {
			if err := l.TruncateTo(l.Segments()[1] + 3); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ltOpts(t)
			l, dir := openTestLog(t, opts)
			ltAppend(t, l, 30, ltEpochOf)
			tc.setup(t, l)
			want := ltCapture(t, l)
			for i := 0; i < 2; i++ {
				l = ltReopen(t, l, dir, opts)
				got := ltCapture(t, l)
				ltSameState(t, "reopened", got, want)
				ltCheckReads(t, l, want.Batches)
				ltCheckEpochFile(t, dir, want.Epochs)
				if l.RecoveryPoint() != want.LEO || l.HighWatermark() != want.LSO {
					t.Fatalf("reopened: RP %d HW %d", l.RecoveryPoint(), l.HighWatermark())
				}
			}
			// Without the clean-shutdown marker the whole log is
			// validated by recovery first: same state, nothing repaired,
			// and the recovery point is the one given (never advanced).
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("unclean reopen: %v", err)
			}
			ltSameState(t, "unclean reopen", ltCapture(t, l), want)
			if rep := l.RecoveryReport(); rep == nil || rep.Truncation != nil {
				t.Fatalf("unclean reopen of a cleanly closed log: report %+v", rep)
			}
			if l.RecoveryPoint() != want.LSO {
				t.Fatalf("unclean reopen: RP %d, want the log start %d (RecoveryPoint option 0)", l.RecoveryPoint(), want.LSO)
			}
			// And it keeps working: appends follow the old end.
			infos := ltAppend(t, l, 2, func(int) int32 { return 30 })
			if infos[0].FirstOffset != want.LEO {
				t.Fatalf("append after reopen at %d, want %d", infos[0].FirstOffset, want.LEO)
			}
		})
	}
}

func TestOpenLocked(t *testing.T) {
	opts := ltOpts(t)
	l, dir := openTestLog(t, opts)
	ltAppend(t, l, 3, ltEpochOf)
	for i := 0; i < 2; i++ {
		if l2, err := Open(dir, opts); !errors.Is(err, ErrLocked) {
			if l2 != nil {
				_ = l2.Close()
			}
			t.Fatalf("second Open: %v, want ErrLocked", err)
		}
	}
	// The failed Opens changed nothing.
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 1, 1), 1); err != nil {
		t.Fatal(err)
	}
	want := ltCapture(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	defer l2.Close()
	ltSameState(t, "after Close", ltCapture(t, l2), want)
	if l3, err := Open(dir, opts); !errors.Is(err, ErrLocked) {
		if l3 != nil {
			_ = l3.Close()
		}
		t.Fatalf("Open while reopened: %v, want ErrLocked", err)
	}
}

// TestOpenUncleanTail: with Strict, a directory whose active segment
// does not end exactly after its last batch is refused, not repaired
// (recovery's own tests cover the repair).
func TestOpenUncleanTail(t *testing.T) {
	opts := ltOpts(t)
	opts.Strict = true
	activeLog := func(dir string) string {
		segs := []int64{}
		for _, name := range ltNames(t, dir) {
			if n, err := filenames.Parse(name); err == nil && n.Kind == filenames.Log && n.Transient == "" {
				segs = append(segs, n.Offset)
			}
		}
		last := segs[0]
		for _, s := range segs {
			last = max(last, s)
		}
		return filenames.Path(dir, last, filenames.Log)
	}
	appendBytes := func(t *testing.T, path string, b []byte) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		make func(t *testing.T) string
	}{
		{"garbage appended", func(t *testing.T) string {
			dir, _ := openBuild(t, opts, 20)
			appendBytes(t, activeLog(dir), []byte("not a record batch at all"))
			return dir
		}},
		{"half a batch appended", func(t *testing.T) string {
			dir, _ := openBuild(t, opts, 20)
			b := makeFollowerBatch(t, 60, 3, 3, 100, 5)
			appendBytes(t, activeLog(dir), b[:len(b)/2])
			return dir
		}},
		{"zeros appended", func(t *testing.T) string {
			dir, _ := openBuild(t, opts, 20)
			appendBytes(t, activeLog(dir), make([]byte, 4096))
			return dir
		}},
		{"copied while open (preallocated zeros)", func(t *testing.T) string {
			dir := t.TempDir()
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ltAppend(t, l, 20, ltEpochOf)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			cp := openCopyDir(t, dir)
			if st, err := os.Stat(activeLog(cp)); err != nil || st.Size() != opts.SegmentBytes {
				t.Fatalf("copied active .log: %v (size %d)", err, st.Size())
			}
			return cp
		}},
		{"copied while open, empty active segment", func(t *testing.T) string {
			dir := t.TempDir()
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ltAppend(t, l, 20, ltEpochOf)
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			return openCopyDir(t, dir)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.make(t)
			l, err := Open(dir, opts)
			if err == nil {
				_ = l.Close()
			}
			if !errors.Is(err, ErrNeedsRecovery) {
				t.Fatalf("Open: %v, want ErrNeedsRecovery", err)
			}
			// The failed Open released the directory.
			if _, err := Open(dir, opts); errors.Is(err, ErrLocked) {
				t.Fatal("failed Open left the directory locked")
			}
		})
	}
}

// TestOpenLeftovers: with Strict, leftovers of interrupted operations
// make Open refuse the directory.
func TestOpenLeftovers(t *testing.T) {
	opts := ltOpts(t)
	opts.Strict = true
	for _, name := range []string{
		"00000000000000000000.log.deleted",
		"00000000000000000000.index.deleted",
		"00000000000000000009.log.swap",
		"00000000000000000009.timeindex.swap",
		"00000000000000000000.log.cleaned",
		"00000000000000000000.log.tmp",
		"00000000000000099999.index", // an index without its .log
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := openBuild(t, opts, 20)
			if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, opts)
			if err == nil {
				_ = l.Close()
			}
			if !errors.Is(err, ErrNeedsRecovery) {
				t.Fatalf("Open with %s: %v, want ErrNeedsRecovery", name, err)
			}
			// Without the leftover the directory is clean again.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			l, err = Open(dir, opts)
			if err != nil {
				t.Fatalf("Open without %s: %v", name, err)
			}
			_ = l.Close()
		})
	}
}

// TestOpenCorruptSealedIndex: a directory trusted as cleanly closed loads
// without reading sealed segments; a corrupt index is found when a read
// needs it and reported as an error, never a panic.
func TestOpenCorruptSealedIndex(t *testing.T) {
	opts := ltOpts(t)
	opts.CleanShutdown = true
	entry := func(rel, pos uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, rel)
		return binary.BigEndian.AppendUint32(b, pos)
	}
	cases := map[string][]byte{
		"length not a multiple of 8": []byte("garbage!!"),
		"offsets decreasing":         append(entry(6, 1000), entry(3, 2000)...),
		"positions decreasing":       append(entry(3, 2000), entry(6, 1000)...),
		"negative position":          entry(3, 0x80000000),
		"negative relative offset":   entry(0xfffffff0, 100),
		"zero padding":               append(entry(3, 1000), make([]byte, 16)...),
	}
	for name, garbage := range cases {
		t.Run(name, func(t *testing.T) {
			dir, st := openBuild(t, opts, 30)
			bad := st.Segs[1]
			if err := os.WriteFile(filenames.Path(dir, bad, filenames.Index), garbage, 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			// The load (package recovery, also under the clean-shutdown
			// marker) checks every sealed segment's indexes, so the corrupt
			// one is rebuilt and named in the report.
			rep := l.RecoveryReport()
			if rep == nil || !slices.Contains(rep.IndexesRebuilt, bad) {
				t.Fatalf("report %+v: index of segment %d not rebuilt", rep, bad)
			}
			ltCheckReads(t, l, st.Batches)
			checkLog(t, l)
		})
	}
}

func TestOpenKafkaSample(t *testing.T) {
	const src = "cmd/partlog/testdata/sample"
	dir := t.TempDir()
	var orig = map[string][]byte{}
	for _, name := range []string{"00000000000000000000.log", "00000000000000000000.index",
		"00000000000000000000.timeindex", "00000000000000000018.snapshot"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		orig[name] = b
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := smallOpts(t)
	opts.SegmentBytes = 1 << 20
	opts.CleanShutdown = true // a directory Kafka closed cleanly
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 18 {
		t.Fatalf("LSO %d LEO %d, want 0 and 18", l.LogStartOffset(), l.LogEndOffset())
	}
	// The batches straight from Kafka's file.
	var want []ltBatch
	it := batch.NewIterator(orig["00000000000000000000.log"], 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		want = append(want, ltBatch{Base: v.BaseOffset(), Last: v.LastOffset(), Epoch: v.PartitionLeaderEpoch(), Bytes: bytes.Clone(v)})
	}
	if it.Err() != nil || len(want) == 0 || want[len(want)-1].Last != 17 {
		t.Fatalf("sample .log: %v", it.Err())
	}
	ltCheckReads(t, l, want)
	got := ltBatches(t, l)
	if len(got) != len(want) {
		t.Fatalf("%d batches read, the file has %d", len(got), len(want))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00000000000000000000.log", "00000000000000000000.timeindex", "00000000000000000000.index"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, orig[name]) {
			t.Fatalf("%s changed by open and close: %d bytes, was %d", name, len(b), len(orig[name]))
		}
	}
	// And it opens again, clean.
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ltCheckReads(t, l, want)
	_ = l.Close()
}

func TestCloseIdempotentAndClosedErrors(t *testing.T) {
	opts := ltOpts(t)
	l, dir := openTestLog(t, opts)
	ltAppend(t, l, 12, ltEpochOf)
	held, err := l.Read(0, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	heldCopy := bytes.Clone(held.Records)
	want := ltCapture(t, l)
	for i := 0; i < 3; i++ {
		if err := l.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	calls := map[string]func() error{
		"AppendAsLeader": func() error { _, err := l.AppendAsLeader(makeBatch(t, 1, 1, 1), 1); return err },
		"AppendAsFollower": func() error {
			_, err := l.AppendAsFollower(makeFollowerBatch(t, want.LEO, 1, 1, 1, 1))
			return err
		},
		"Read":                    func() error { _, err := l.Read(0, 100, 10); return err },
		"Roll":                    l.Roll,
		"Flush":                   l.Flush,
		"TruncateTo":              func() error { return l.TruncateTo(3) },
		"TruncateFullyAndStartAt": func() error { return l.TruncateFullyAndStartAt(5) },
		"SetLogStartOffset":       func() error { return l.SetLogStartOffset(3) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	// A view taken before Close keeps its bytes.
	if !bytes.Equal(held.Records, heldCopy) {
		t.Fatal("view changed by Close")
	}
	held.Release()
	// Nothing changed on disk: it reopens to the same state.
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	ltSameState(t, "reopened", ltCapture(t, l2), want)
}

// TestLogStartOffsetPersisted: a log start offset raised inside a
// segment survives Close and reopen (Kafka keeps it in
// log-start-offset-checkpoint): deleted records are never readable
// again.
func TestLogStartOffsetPersisted(t *testing.T) {
	opts := ltOpts(t)
	l, dir := openTestLog(t, opts)
	ltAppend(t, l, 30, ltEpochOf)
	lso := l.Segments()[1] + 4 // inside a batch of segment 1
	if err := l.SetLogStartOffset(lso); err != nil {
		t.Fatal(err)
	}
	// The log directory's log-start-offset-checkpoint carries it across
	// a restart; a caller passes it back through Options.LogStartOffset.
	opts.LogStartOffset = lso
	l2 := ltReopen(t, l, dir, opts)
	if got := l2.LogStartOffset(); got != lso {
		t.Fatalf("reopened LogStartOffset %d, want %d", got, lso)
	}
	if _, err := l2.Read(lso-1, 100, l2.LogEndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start after reopen: %v, want ErrOffsetOutOfRange", err)
	}
}
