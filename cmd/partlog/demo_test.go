package main

import (
	"strings"
	"testing"
)

// TestDemo runs the README's main command in-process: it must build the
// crashed directory, find the torn tail, repair it, and end clean.
func TestDemo(t *testing.T) {
	code, out, errOut := runCLI(t, "", "demo", "--dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"Found 40 invalid bytes at the end of 00000000000000000000.log",
		"MirrorPidReset {\"version\":0,\"sourceClusterId\":\"AAAAAAAAAAAAAAAAAAAAAQ\"}",
		"torn-tail",
		"repaired",
		"ok (nothing to do)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
