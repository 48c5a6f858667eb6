package mmapfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenNeverFollowsLinks: Open refuses a symbolic link (a writable
// open would preallocate its target, which may lie anywhere) and a path
// that is not a regular file (mapping a directory fails later with
// ENODEV).
func TestOpenNeverFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, writable := range []bool{true, false} {
		if f, err := Open(link, Options{ReadOnly: !writable, Reserve: 1 << 20}); err == nil {
			_ = f.Close()
			t.Fatalf("Open(link, writable %v) succeeded", writable)
		}
		if f, err := Open(dir, Options{ReadOnly: !writable, Reserve: 1 << 20}); err == nil {
			_ = f.Close()
			t.Fatalf("Open(directory, writable %v) succeeded", writable)
		} else if !writable && !errors.Is(err, ErrNotRegular) {
			t.Fatalf("Open(directory): %v, want ErrNotRegular", err)
		}
	}
	if st, err := os.Stat(target); err != nil || st.Size() != 3 {
		t.Fatalf("target changed: %v %v", st, err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "absent"), dangling); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(dangling, Options{Create: true, Reserve: 4096}); err == nil {
		_ = f.Close()
		t.Fatal("Create through a dangling link succeeded")
	}
	if _, err := os.Lstat(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("Create made the link's target")
	}
}
