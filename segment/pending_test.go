package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// TestPendingActivate checks OpenPending and Activate against OpenActive
// on the same cleanly closed segment: with the tail a check found (here
// the one OpenActive read), the activated segment has the same size, next
// offset and timestamps, reads back what was written and appends after it;
// a Pending that is closed instead leaves the files as they were.
func TestPendingActivate(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1000, 0)
	s, err := Create(dir, 0, segTestCfg, now)
	if err != nil {
		t.Fatal(err)
	}
	written := segFill(t, s, 30) // past the index interval: indexes hold entries
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st0, err := os.Stat(filenames.Path(dir, 0, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}

	// Closed without activating: nothing changed, nothing left open.
	p, err := OpenPending(dir, 0, segTestCfg, now, false)
	if err != nil {
		t.Fatal(err)
	}
	if f, size := p.Log(); f == nil || size != st0.Size() {
		t.Fatalf("Log() = %v, %d; want the open .log of %d bytes", f, size, st0.Size())
	}
	if p.OffsetIndex().Entries() == 0 || p.TimeIndex().Entries() == 0 || p.TxnIndex().Entries() != 0 {
		t.Fatalf("indexes: %d offset, %d time, %d txn entries", p.OffsetIndex().Entries(), p.TimeIndex().Entries(), p.TxnIndex().Entries())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Activate(Tail{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Activate after Close: %v", err)
	}
	if st, err := os.Stat(filenames.Path(dir, 0, filenames.Log)); err != nil || st.Size() != st0.Size() {
		t.Fatalf("after Close: %v, %v", st, err)
	}

	ref, err := OpenActive(dir, 0, segTestCfg, now, Opened{})
	if err != nil {
		t.Fatal(err)
	}
	refTs, refOff, _ := ref.MaxTimestampSoFar()
	tail := Tail{NextOffset: ref.NextOffset(), MaxTimestamp: refTs, OffsetOfMaxTimestamp: refOff, RollingTimestamp: ref.rollingTimestamp}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = OpenPending(dir, 0, segTestCfg, now, false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Activate(tail)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := p.Close(); err != nil {
		t.Fatalf("Close after Activate: %v", err)
	}
	ts, off, _ := a.MaxTimestampSoFar()
	if a.Size() != st0.Size() || a.NextOffset() != written[len(written)-1].last+1 || ts != refTs || off != refOff ||
		a.rollingTimestamp != tail.RollingTimestamp || a.rollingTimestamp == batch.NoTimestamp || !a.Active() {
		t.Fatalf("activated: size %d next %d max (%d, %d) rolling %d active %v; want %d, %+v",
			a.Size(), a.NextOffset(), ts, off, a.rollingTimestamp, a.Active(), st0.Size(), tail)
	}
	segCheckReads(t, a, written)
	more := segFill(t, a, 3)
	segCheckReads(t, a, append(written, more...))
}

// TestPendingRefusesLinks checks that OpenPending never opens a segment
// file through a symbolic link: ErrNeedsRecovery, nothing left open.
func TestPendingRefusesLinks(t *testing.T) {
	for _, kind := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Create(dir, 0, segTestCfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			segFill(t, s, 30)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			p := filenames.Path(dir, 0, kind)
			target := filepath.Join(t.TempDir(), "target")
			if err := os.Rename(p, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenPending(dir, 0, segTestCfg, time.Now(), false); !errors.Is(err, ErrNeedsRecovery) {
				t.Fatalf("OpenPending through a link: %v", err)
			}
		})
	}
}
