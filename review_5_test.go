package partlog

import (
	"testing"
)

// R5: cleanly closed logs that partlog itself wrote, reopened under Strict
// with the clean-shutdown marker.
func TestRegression_ReviewStrictCleanReopen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, l *Log)
	}{
		{"plain", func(*testing.T, *Log) {}},
		{"truncation then rolls", func(t *testing.T, l *Log) {
			if err := l.TruncateTo(l.Segments()[1] + 3); err != nil {
				t.Fatal(err)
			}
			ltAppend(t, l, 30, func(int) int32 { return 2 })
		}},
		{"empty active", func(t *testing.T, l *Log) {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}},
		{"log start raised inside a segment", func(t *testing.T, l *Log) {
			if err := l.SetLogStartOffset(l.Segments()[1] + 3); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ltOpts(t)
			dir := t.TempDir()
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ltAppend(t, l, 30, func(int) int32 { return 1 })
			tc.setup(t, l)
			lso := l.LogStartOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			o := *opts
			o.CleanShutdown = true
			o.Strict = true
			o.LogStartOffset = lso
			l2, err := Open(dir, &o)
			if err != nil {
				t.Fatalf("strict clean reopen: %v", err)
			}
			_ = l2.Close()
		})
	}
}
