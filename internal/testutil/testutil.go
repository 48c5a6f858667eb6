// Package testutil holds the helpers that tests of several packages of
// this module share, so that each is written once. It imports no package
// of ours (any package's tests may use it) and only tests import it.
package testutil

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// PresentPages counts the pages of b that are mapped in this process's
// page tables (bit 63 of their /proc/self/pagemap entries): what a
// mapping adds to the resident set, unlike mincore, which reports the
// page cache. It skips the test where pagemap cannot be read.
func PresentPages(t testing.TB, b []byte) int {
	t.Helper()
	addr, err := strconv.ParseUint(fmt.Sprintf("%p", &b[0])[2:], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer pm.Close()
	pageSize := os.Getpagesize()
	pages := (len(b) + pageSize - 1) / pageSize
	entries := make([]byte, 8*pages)
	if _, err := pm.ReadAt(entries, int64(addr/uint64(pageSize))*8); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range pages {
		if binary.LittleEndian.Uint64(entries[8*i:])>>63 != 0 {
			n++
		}
	}
	return n
}

// SettleTimeout bounds a test's wait for background work (a prefault
// pool's workers, a retire goroutine, a server's flusher). The waits end
// as soon as their condition holds; the bound is for a 2-core CI machine
// running other test packages beside this one under -race, where that
// work can be seconds late without anything being wrong.
const SettleTimeout = 30 * time.Second

// ProcessCPU is the CPU time (user and system) this process has used
// so far.
func ProcessCPU(t testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TempPath returns the path of name in a new temporary directory of t.
func TempPath(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(t.TempDir(), name)
}

// LengthAndBlocks returns the length of the file at path and the bytes
// of disk blocks allocated to it.
func LengthAndBlocks(t testing.TB, path string) (length, allocated int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// CopyTree copies the directory tree from into to (regular files and
// directories; existing files are overwritten), the image a crash leaves
// when the page cache survives (a process crash).
func CopyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// HashTree returns the SHA-256 of every file under root (and "dir" for
// each directory), by path relative to root, to compare a tree before and
// after an operation that must not change it.
func HashTree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
