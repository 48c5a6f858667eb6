package partlog

import (
	"reflect"
	"testing"
)

// TestLogColdApart: the fields no append touches live in a logCold
// allocated apart from the Log, so that the Log an append reads fits the
// 768-byte size class (five to a page of heap): the Logs of a thousand
// partitions appended to in turn then spread over fewer pages.
func TestLogColdApart(t *testing.T) {
	lt := reflect.TypeFor[Log]()
	if size := lt.Size(); size > 768 {
		t.Errorf("Log is %d bytes, more than the 768-byte size class", size)
	}
	for _, name := range []string{"dir", "lock", "truncated", "commit", "mu", "keys", "deletions", "recoveryPoint", "highWatermark", "cache"} {
		f, ok := lt.FieldByName(name)
		if !ok {
			t.Fatalf("Log has no field %s", name)
		}
		if len(f.Index) != 2 || lt.Field(f.Index[0]).Name != "logCold" {
			t.Errorf("%s is in the Log itself, not in its logCold", name)
		}
	}
}
