package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// TestQuarantineTailCopyNoSpace: a full disk in the middle of the copy of
// a cut tail into the quarantine fails Run, cuts nothing and leaves no
// partial copy; the next run quarantines one complete copy under the
// name, not a second one beside a partial first.
func TestQuarantineTailCopyNoSpace(t *testing.T) {
	dir := fixture(t)
	setField(t, dir, 300, batchAt(t, dir, 300, 500).pos, 17, []byte{9, 9, 9, 9})
	logPath := segPath(dir, 300, filenames.Log)
	s1, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	o := unclean(300)
	o.Quarantine = filepath.Join(t.TempDir(), "q")
	failed := 0
	o.hooks = &hooks{copy: func(p string) error {
		if strings.Contains(filepath.Base(p), ".tail@") {
			failed++
			return syscall.ENOSPC
		}
		return nil
	}}
	if _, err := Run(dir, o); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run with a full disk: %v", err)
	}
	if failed == 0 {
		t.Fatal("the tail copy was never written")
	}
	if st, err := os.Stat(logPath); err != nil || st.Size() != s1.Size() {
		t.Fatalf("segment cut although its tail was not quarantined: %v %v", st, err)
	}
	if names := quarantined(t, o.Quarantine, ".tail@"); len(names) != 0 {
		t.Fatalf("partial quarantine files left: %v", names)
	}

	o.hooks = nil
	r := mustRun(t, dir, o)
	want := fmt.Sprintf("00000000000000000300.log.tail@%d", r.Truncation.Position)
	names := quarantined(t, o.Quarantine, ".tail@")
	if len(names) != 1 || names[0] != want {
		t.Fatalf("quarantined tails %v, want only %s", names, want)
	}
	st, err := os.Stat(filepath.Join(o.Quarantine, want))
	if err != nil || st.Size() != s1.Size()-r.Truncation.Position {
		t.Fatalf("tail copy %v %v, want %d bytes", st, err, s1.Size()-r.Truncation.Position)
	}
	checkLoadable(t, dir)
}

// quarantined lists the files of the quarantine whose names contain sub
// (temporary files included).
func quarantined(t *testing.T, q, sub string) []string {
	t.Helper()
	des, err := os.ReadDir(q)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.Contains(de.Name(), sub) {
			out = append(out, de.Name())
		}
	}
	return out
}
