package fsutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// TestWriteFileAtomic: the content replaces the file whole, a stale
// temporary file is overwritten, nothing is left beside the file, and a
// write into a missing directory fails.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	const name = "recovery-point-offset-checkpoint"
	p := filepath.Join(dir, name)
	// A stale temporary file from a crash is overwritten, not appended to.
	if err := os.WriteFile(p+filenames.Temp, []byte("stale stale stale stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"0\n0\n", "0\n1\nt 0 5\n"} {
		if err := WriteFileAtomic(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("content %q, %v; want %q", got, err, content)
		}
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(des) != 1 || des[0].Name() != name {
			t.Fatalf("directory holds %v, want only %s", des, name)
		}
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

// TestWritePrivateFileAtomic: the secret is owner-only, also over a stale
// world-readable temporary file.
func TestWritePrivateFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	if err := os.WriteFile(p+filenames.Temp, []byte("stale"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivateFileAtomic(p, []byte("s3cret")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(p); string(b) != "s3cret" {
		t.Fatalf("content %q", b)
	}
}
