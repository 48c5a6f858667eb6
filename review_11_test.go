package partlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/segment"
)

// R11: a symlink named like the first segment's .log is reported as
// "ignored" (never read, written, renamed or removed) but recovery's
// planned empty segment is renamed over it.
func TestRegression_ReviewSymlinkLogReplaced(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target.log")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := segment.Path(dir, 0, segment.LogSuffix)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, ltOpts(t))
	if err == nil {
		_ = l.Close()
		t.Fatal("open succeeded: it had to replace the link to make segment 0")
	}
	if !strings.Contains(err.Error(), "left alone") {
		t.Errorf("open: %v, want it to say the link is left alone", err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink reported as ignored was replaced (lstat %v, %v)", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Errorf("outside file changed: %q", b)
	}
}
