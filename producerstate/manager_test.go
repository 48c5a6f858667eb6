package producerstate

import (
	"testing"
)

func TestOriginString(t *testing.T) {
	for o, want := range originNames {
		if got := Origin(o).String(); got != want {
			t.Errorf("Origin(%d) = %q, want %q", o, got, want)
		}
	}
	for o, want := range map[Origin]string{Origin(len(originNames)): "Origin(5)", -1: "Origin(-1)"} {
		if got := o.String(); got != want {
			t.Errorf("Origin(%d) = %q, want %q", int(o), got, want)
		}
	}
}
