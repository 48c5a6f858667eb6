package partlog

import (
	"reflect"
	"testing"

	"github.com/partlog/partlog/producerstate"
)

// TestLogAppendLines: the fields of Log (and of its Options) that every
// leader append reads or writes lie on its first three cache lines, and
// the stage it writes (a producerstate.Append) starts a line and has
// those fields on its first two (see the Log struct): five lines in all.
// A Log is large enough that the allocator places it on a 64-byte
// boundary, so offset/64 is the line.
func TestLogAppendLines(t *testing.T) {
	lt := reflect.TypeFor[Log]()
	ot := reflect.TypeFor[Options]()
	opts, _ := lt.FieldByName("opts")
	hot := map[string]uintptr{}
	for _, name := range []string{"appendMu", "failed", "closed", "tsRules", "activeSeg", "logEndOffset",
		"latestEpoch", "psm", "jitterMs", "writes"} {
		f, ok := lt.FieldByName(name)
		if !ok {
			t.Fatalf("Log has no field %s", name)
		}
		if len(f.Index) != 1 {
			t.Errorf("%s is not in the Log itself", name)
		}
		hot[name] = f.Offset + f.Type.Size()
	}
	w, _ := lt.FieldByName("waiters")
	hot["waiters.logEnd.waiting"] = w.Offset + 4
	for _, name := range []string{"SegmentBytes", "WritePath", "SegmentMs", "MaxBatchBytes", "MessageTimestampType"} {
		f, ok := ot.FieldByName(name)
		if !ok {
			t.Fatalf("Options has no field %s", name)
		}
		hot["opts."+name] = opts.Offset + f.Offset + f.Type.Size()
	}
	for name, end := range hot {
		if end > 3*64 {
			t.Errorf("%s ends at byte %d of Log, past the first three cache lines", name, end)
		}
	}
	st, _ := lt.FieldByName("stage")
	if st.Offset%64 != 0 {
		t.Errorf("stage starts at byte %d, not on a cache line", st.Offset)
	}
	at := reflect.TypeFor[producerstate.Append]()
	for _, name := range []string{"m", "origin", "failed", "committed", "afterBarrier", "hasOffsets", "tryKnown",
		"knownPending", "nowMs", "lastOffset", "accIndex", "ops", "accs", "completed"} {
		f, ok := at.FieldByName(name)
		if !ok {
			t.Fatalf("producerstate.Append has no field %s", name)
		}
		if end := f.Offset + f.Type.Size(); end > 2*64 {
			t.Errorf("Append.%s ends at byte %d, past the stage's first two lines", name, end)
		}
	}
	// Begin truncates barriers: its length (the second word) is touched.
	if b, _ := at.FieldByName("barriers"); b.Offset+16 > 2*64 {
		t.Errorf("Append.barriers' length ends at byte %d, past the stage's first two lines", b.Offset+16)
	}
}
