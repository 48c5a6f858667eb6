package partlog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// TestCrashBeforeFirstIndexEntry: a new active segment makes its index
// files with its first entry, so a crash image taken before that (a fresh
// partition, a synced batch below the index interval, a roll with nothing
// appended since) has no .index or .timeindex for the active segment.
// Reopening the image (unclean, as after a crash) recovers every synced
// batch, appends go on, and a clean close leaves both index files.
func TestCrashBeforeFirstIndexEntry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches int  // small batches appended and synced
		roll    bool // roll after them (the new active segment is empty)
	}{
		{"fresh", 0, false},
		{"synced-below-interval", 1, false},
		{"rolled", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := smallOpts(t)
			opts.IndexIntervalBytes = 64 << 10 // no index entry in this test's appends
			l, dir := openTestLog(t, opts)
			src := makeBatch(t, 2, 50, 1000)
			for range tc.batches {
				if _, err := l.AppendAsLeader(src, 1); err != nil {
					t.Fatal(err)
				}
			}
			if tc.roll {
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Sync(context.Background(), l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			leo := l.LogEndOffset()
			base, _ := l.activeSegment()
			for _, kind := range []string{filenames.Index, filenames.TimeIndex} {
				if _, err := os.Lstat(filenames.Path(dir, base, kind)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("active %s exists before its first entry: %v", kind, err)
				}
			}
			// The crash image: the files as they are now.
			img := filepath.Join(t.TempDir(), "t-0")
			if err := os.Mkdir(img, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range readDirFiles(t, dir) {
				if err := os.WriteFile(filepath.Join(img, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Open(img, smallOpts(t))
			if err != nil {
				t.Fatal(err)
			}
			if r.LogEndOffset() != leo {
				t.Fatalf("recovered log end %d, want %d", r.LogEndOffset(), leo)
			}
			if leo > 0 {
				if err := crashScan(r, 0, leo, func(batch.View) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.AppendAsLeader(src, 1); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{filenames.Index, filenames.TimeIndex} {
				if _, err := os.Stat(filenames.Path(img, base, kind)); err != nil {
					t.Fatalf("after a clean close: %v", err)
				}
			}
			c, err := Open(img, &Options{CleanShutdown: true, RecoveryPoint: leo + 2, SegmentBytes: opts.SegmentBytes, MaxIndexBytes: opts.MaxIndexBytes, PrefaultBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Trusted as cleanly closed: nothing recovered (an older
			// producer snapshot may be dropped, as Kafka's load does).
			if rep := c.RecoveryReport(); c.LogEndOffset() != leo+2 || rep != nil && !onlySnapshotRemovals(rep.Changes) {
				t.Fatalf("clean reopen: log end %d (want %d), report %v", c.LogEndOffset(), leo+2, rep)
			}
		})
	}
}

// TestPrepareIndexes: Log.PrepareIndexes makes the active segment's index
// files, empty, before any entry (Kafka makes them with the segment), a crash
// image taken then opens with every synced batch, and the log appends and
// closes as usual; a closed log refuses.
func TestPrepareIndexes(t *testing.T) {
	opts := smallOpts(t)
	l, dir := openTestLog(t, opts)
	if err := l.PrepareIndexes(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{filenames.Index, filenames.TimeIndex} {
		// Empty, no slot reserved: a crash image taken now holds no zeros
		// that Kafka's tools would read as an entry.
		if st, err := os.Stat(filenames.Path(dir, 0, kind)); err != nil || st.Size() != 0 {
			t.Fatalf("prepared %s: %v %v", kind, st, err)
		}
	}
	if err := l.PrepareIndexes(); err != nil {
		t.Fatalf("prepared twice: %v", err)
	}
	src := makeBatch(t, 2, 50, 1000)
	for range 3 {
		if _, err := l.AppendAsLeader(src, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background(), l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	img := t.TempDir()
	for name, data := range readDirFiles(t, dir) {
		if err := os.WriteFile(filepath.Join(img, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(img, smallOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.LogEndOffset() != l.LogEndOffset() {
		t.Fatalf("crash image: log end %d, want %d", r.LogEndOffset(), l.LogEndOffset())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.PrepareIndexes(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v", err)
	}
}
