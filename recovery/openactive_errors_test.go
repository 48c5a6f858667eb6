package recovery

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestOpenActiveIndexPastCapacity: the last segment's time index is
// longer than Segment.MaxIndexBytes and its length is no multiple of an
// entry (a torn tail): the check through the files opened for appending
// must find what the read-only check finds, not cut the file first.
func TestOpenActiveIndexPastCapacity(t *testing.T) {
	dir := fixture(t)
	idx, _ := filepath.Glob(filepath.Join(dir, "*.timeindex"))
	sort.Strings(idx)
	last := idx[len(idx)-1]
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 24 {
		t.Fatalf("%s holds %d bytes", last, st.Size())
	}
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	o := clean()
	o.Segment.MaxIndexBytes = st.Size()
	want, ld, _ := runBothWays(t, dir, o)
	if ld.Active != nil {
		defer ld.Active.Close()
	}
	if len(want.Problems) == 0 {
		t.Fatalf("the read-only check found nothing: %s", want.Summary())
	}
	if len(ld.Report.Problems) != len(want.Problems) || ld.Active != nil {
		t.Fatalf("with OpenActive: %s (active handed over: %v); without: %s", ld.Report.Summary(), ld.Active != nil, want.Summary())
	}
}

// TestOpenActiveIndexOpenFails: the last segment of a cleanly closed
// directory cannot be opened for appending (its time index's open fails,
// as EACCES or EMFILE would): Load with OpenActive must return the open's
// error, not panic (checkTrusted closed the Pending that was never
// made).
func TestOpenActiveIndexOpenFails(t *testing.T) {
	dir := fixture(t)
	idx, _ := filepath.Glob(filepath.Join(dir, "*.timeindex"))
	sort.Strings(idx)
	last := idx[len(idx)-1]
	o := clean()
	o.OpenActive = true
	denied := errors.New("permission denied (injected)")
	o.hooks = &hooks{open: func(p string) error {
		if p == last {
			return denied
		}
		return nil
	}}
	ld, err := Load(dir, o)
	if err == nil {
		if ld.Active != nil {
			_ = ld.Active.Close()
		}
		t.Fatal("Load succeeded though the last time index could not be opened")
	}
	if !errors.Is(err, denied) {
		t.Fatalf("Load: %v, want the open's error", err)
	}
}
