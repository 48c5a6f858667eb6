package partlog

import "testing"

// TestEmptyReadViewRecordsNotNil: every empty view has a non-nil,
// zero-length Records (a nil one is encoded as MessageSetSize -1).
func TestEmptyReadViewRecordsNotNil(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	for i := 0; i < 3; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 10, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(2)
	for _, c := range []struct {
		name         string
		offset, upTo int64
	}{
		{"at the log end", 6, 6},
		{"at the high watermark", 2, 2},
		{"upTo below the offset", 4, 1},
		{"batch not below upTo", 2, 3},
	} {
		v, err := l.Read(c.offset, 1<<20, c.upTo)
		if err != nil {
			t.Fatal(err)
		}
		if v.Records == nil || len(v.Records) != 0 {
			t.Errorf("%s: Records %v (nil %v)", c.name, v.Records, v.Records == nil)
		}
		v.Release()
	}
	empty, _ := openTestLog(t, smallOpts(t))
	v, err := empty.Read(0, 100, 0)
	if err != nil || v.Records == nil {
		t.Fatalf("empty log: %v %v", v, err)
	}
	v.Release()
}
