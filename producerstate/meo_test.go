package producerstate

import (
	"testing"
	"time"
)

// TestNegativeOffsetsKeepMEOValid: offsets are ≥ 0, so no input may
// store a negative MEO: not a negative base offset given to Validate, nor
// a negative MEO given to SetMapEndOffset, Reset or LoadSnapshot (when a
// negative MEO marked a known batch's commit in flight, these left
// every reader of entries waiting for ever); readers still return.
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
				t.Fatalf("MEO %d is negative", v)
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
