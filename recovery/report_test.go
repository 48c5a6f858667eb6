package recovery

import (
	"fmt"
	"strings"
	"testing"
)

// TestSummaryLimitsProblems: Summary names the first three problems and
// counts the rest.
func TestSummaryLimitsProblems(t *testing.T) {
	r := &Report{Status: StatusProblems}
	for i := range 5 {
		r.Problems = append(r.Problems, Problem{File: fmt.Sprintf("f%d", i), Position: -1, Kind: "k", Detail: "d"})
	}
	s := r.Summary()
	for i, want := range []bool{true, true, true, false, false} {
		if got := strings.Contains(s, fmt.Sprintf("f%d:", i)); got != want {
			t.Errorf("Summary %q names problem %d: %v, want %v", s, i, got, want)
		}
	}
	if !strings.Contains(s, "and 2 more problems") {
		t.Errorf("Summary %q does not count the other two problems", s)
	}
}
