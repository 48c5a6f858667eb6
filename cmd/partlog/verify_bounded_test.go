package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
)

// TestVerifyHugeZeroFilledFiles: zero-filled small files of a crashed file
// system (3 GiB here, sparse) are reported by verify, which neither reads
// them whole nor quotes them: memory stays small and the output short.
func TestVerifyHugeZeroFilledFiles(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 5)
	for _, p := range []string{
		filepath.Join(dir, checkpoint.LeaderEpochFile),
		filepath.Join(filepath.Dir(dir), checkpoint.RecoveryPointFile),
	} {
		if err := os.Truncate(p, 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(3 << 30); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	for _, args := range [][]string{{"verify", dir}, {"verify", "--json", dir}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		code, out, errOut := runCLI(t, "", args...)
		runtime.ReadMemStats(&after)
		if code != exitProblems {
			t.Fatalf("%v: exit %d, want %d\n%.2000s\n%.2000s", args, code, exitProblems, out, errOut)
		}
		if !strings.Contains(out, checkpoint.LeaderEpochFile) || !strings.Contains(out+errOut, "too large") {
			t.Fatalf("%v: the oversized files are not reported:\n%s%s", args, out, errOut)
		}
		if n := len(out) + len(errOut); n > 8<<10 {
			t.Fatalf("%v: %d bytes of output", args, n)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
			t.Fatalf("%v: %d bytes allocated", args, d)
		}
	}
}
