package producerstate

import (
	"testing"
	"time"
)

// TestNegativeOffsetsKeepMEOValid: a negative MEO is the mark of a known
// batch's commit in flight (Commit, beginRead), so no input may store
// one: a negative base offset given to Validate, or a negative MEO given
// to SetMapEndOffset, Reset or LoadSnapshot, used to leave it negative,
// and then every reader of entries (Producer, Producers, SnapshotEntries)
// waited for ever, MapEndOffset returned ^MEO, and the next known commit
// stored ^MEO ≥ 0, letting readers in while it wrote without the lock.
func TestNegativeOffsetsKeepMEOValid(t *testing.T) {
	setters := []struct {
		name string
		set  func(t *testing.T, m *Manager)
	}{
		{"Validate", func(t *testing.T, m *Manager) {
			var a Append
			m.Begin(&a, Client, 0)
			if err := m.Validate(&a, build(t, data(1, 0, 1, 1)), -10); err == nil {
				t.Error("Validate accepted base offset -10")
			}
			m.Commit(&a)
		}},
		{"SetMapEndOffset", func(t *testing.T, m *Manager) { m.SetMapEndOffset(-3) }},
		{"Reset", func(t *testing.T, m *Manager) { m.Reset(-3) }},
		{"LoadSnapshot", func(t *testing.T, m *Manager) { m.LoadSnapshot(nil, -3, 0) }},
	}
	for _, tc := range setters {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Config{})
			var a Append
			m.Begin(&a, Client, 0)
			if err := m.Validate(&a, build(t, data(1, 0, 0, 1)), 0); err != nil {
				t.Fatal(err)
			}
			m.Commit(&a)
			tc.set(t, m)
			if v := m.mapEndOffset.Load(); v < 0 {
				t.Fatalf("MEO word %d: readers of entries wait for ever (MapEndOffset says %d)", v, m.MapEndOffset())
			}
			done := make(chan bool)
			go func() { _, ok := m.Producer(1); done <- ok }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Producer does not return")
			}
		})
	}
}
