package partlog

import (
	"reflect"
	"testing"
)

// TestLogAppendLines: the fields of Log (and of its Options) that every
// append reads or writes lie on its first four cache lines (see the Log
// struct). A Log is large enough that the allocator places it on a
// 64-byte boundary, so offset/64 is the line.
func TestLogAppendLines(t *testing.T) {
	lt := reflect.TypeFor[Log]()
	ot := reflect.TypeFor[Options]()
	opts, _ := lt.FieldByName("opts")
	hot := map[string]uintptr{}
	for _, name := range []string{"appendMu", "failed", "closed", "tsRules", "segments", "logEndOffset",
		"epochs", "psm", "jitterMs", "now", "writes"} {
		f, ok := lt.FieldByName(name)
		if !ok {
			t.Fatalf("Log has no field %s", name)
		}
		hot[name] = f.Offset + f.Type.Size()
	}
	w, _ := lt.FieldByName("waiters")
	hot["waiters.logEnd.waiting"] = w.Offset + 4
	for _, name := range []string{"SegmentBytes", "WritePath", "SegmentMs", "MaxBatchBytes", "ValidateRecords"} {
		f, ok := ot.FieldByName(name)
		if !ok {
			t.Fatalf("Options has no field %s", name)
		}
		hot["opts."+name] = opts.Offset + f.Offset + f.Type.Size()
	}
	for name, end := range hot {
		if end > 4*64 {
			t.Errorf("%s ends at byte %d of Log, past the first four cache lines", name, end)
		}
	}
	if st, _ := lt.FieldByName("stage"); st.Offset%64 != 0 {
		t.Errorf("stage starts at byte %d, not on a cache line", st.Offset)
	}
}
