package segment

import (
	"testing"
	"time"
)

// TestSegmentStartWritebackHint: StartWriteback is a hint that never
// waits and never fails the caller: it returns at once while the segment
// is held (a Flush, a seal or a close), and does nothing once the segment
// is sealed or closed.
func TestSegmentStartWritebackHint(t *testing.T) {
	cfg := Config{SegmentBytes: 1 << 20, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 4096}
	s, err := Create(t.TempDir(), 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		var out Appended
		if err := appendChecked(s, segMakeBatch(t, 1, 20<<10, 1000), Stamp{Assign: true, NextOffset: s.NextOffset(), Write: true}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StartWriteback(0, s.Size()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	returned := make(chan error)
	go func() { returned <- s.StartWriteback(0, s.Size()) }()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StartWriteback waited for the segment's holder")
	}
	s.mu.Unlock()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.StartWriteback(0, s.Size()); err != nil {
		t.Fatalf("sealed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StartWriteback(0, s.Size()); err != nil {
		t.Fatalf("closed: %v", err)
	}
}
