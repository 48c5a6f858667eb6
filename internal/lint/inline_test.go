package lint

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestRecordWalkInlines: ReadVarint and ReadVarlong stay within the
// inliner's budget and parseRecord inlines them. They sit at its edge
// (cost 80): a longer body or a compiler that costs them higher keeps
// the record walk correct but slower by about a tenth of its
// instructions (bench/RESULTS.md, the record walk), which only this
// test would notice.
func TestRecordWalkInlines(t *testing.T) {
	touchSources(t)
	pkg := module + "/batch"
	out, err := exec.Command("go", "build", "-gcflags="+pkg+"=-m", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build -m: %v\n%s", err, out)
	}
	for _, want := range []string{
		`varint\.go:\d+:\d+: can inline ReadVarint\b`,
		`varint\.go:\d+:\d+: can inline ReadVarlong\b`,
		`record\.go:\d+:\d+: inlining call to ReadVarint\b`,
		`record\.go:\d+:\d+: inlining call to ReadVarlong\b`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the compiler's -m output has no %q", want)
		}
	}
}
