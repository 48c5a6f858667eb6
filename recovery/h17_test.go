package recovery

import (
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
	t.Skip("h17: known defect, not fixed: segment.OpenPending cuts an index longer than MaxIndexBytes to it (index openActive) before recovery's sanity check, so a torn over-long index passes a clean reopen")
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
	dir2 := filepath.Join(t.TempDir(), filepath.Base(dir))
	copyDir(t, dir, dir2)
	want := mustRun(t, dir, o)
	o.OpenActive = true
	ld, err := Load(dir2, o)
	if err != nil {
		t.Fatal(err)
	}
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
// directory cannot be opened for appending (its time index holds more
// entries than a lowered MaxIndexBytes lets an active index hold): Load
// with OpenActive must return an error, not panic (checkTrusted closed
// the Pending that OpenPending had not returned).
func TestOpenActiveIndexOpenFails(t *testing.T) {
	dir := fixture(t)
	o := clean()
	o.Segment.MaxIndexBytes = 24 // two time-index entries; the fixture's last segment has more
	o.OpenActive = true
	ld, err := Load(dir, o)
	if err == nil {
		if ld.Active != nil {
			_ = ld.Active.Close()
		}
		t.Skip("the fixture's last time index fits: nothing to check")
	}
	t.Logf("Load: %v", err)
}
