package crashfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// opsOf returns the ops of kind in r's log whose path is p.
func opsOf(r *Replay, kind OpKind, p string) []Op {
	var out []Op
	for _, o := range r.Ops() {
		if o.Kind == kind && o.Path == p {
			out = append(out, o)
		}
	}
	return out
}

func history(t *testing.T, m *Mount) *Replay {
	t.Helper()
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// imageAt materialises the image of a cut at cut with seed into a new
// directory.
func imageAt(t *testing.T, r *Replay, cut int64, seed uint64) (string, *Image) {
	t.Helper()
	if err := r.To(cut); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "image")
	im, err := r.Image(seed, dst)
	if err != nil {
		t.Fatal(err)
	}
	return dst, im
}

// A seed that loses everything pending, one that keeps everything.
func seedFor(t *testing.T, mode string) uint64 {
	for s := uint64(1); s < 1000; s++ {
		if ImageMode(s) == mode {
			return s
		}
	}
	t.Fatalf("no seed gives mode %s", mode)
	return 0
}

// TestKernelPaths runs each system call the engine makes on its files
// over the mount and checks what reaches the file system: stores through
// a shared writable mapping arrive as writes at writeback, msync and
// fdatasync as fsyncs, pwritev and ftruncate and fallocate as writes and
// length changes, rename and directory fsync as entry operations, and
// O_NOFOLLOW, OFD locks and flock behave as on a local file system.
func TestKernelPaths(t *testing.T) {
	m := New(t)
	dir := filepath.Join(m.Dir(), "topic-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncPath(m.Dir()); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "00000000000000000000.log")
	f, err := os.OpenFile(seg, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	// Preallocate as the segment does: blocks, then the length.
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
		t.Fatalf("fallocate keep-size: %v", err)
	}
	if err := unix.Fallocate(fd, 0, 0, 64<<10); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	data, err := unix.Mmap(fd, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	if err := unix.Madvise(data[:16<<10], unix.MADV_POPULATE_WRITE); err != nil {
		t.Fatalf("MADV_POPULATE_WRITE: %v", err)
	}
	copy(data[100:], "stored through the mapping")
	if err := unix.Msync(data[:pageSize], unix.MS_SYNC); err != nil {
		t.Fatalf("msync: %v", err)
	}
	copy(data[5000:], "second store")
	if err := unix.SyncFileRange(fd, 0, 8192, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		t.Fatalf("sync_file_range: %v", err)
	}
	if err := unix.Fdatasync(fd); err != nil {
		t.Fatalf("fdatasync: %v", err)
	}
	if _, err := unix.Pwritev(fd, [][]byte{[]byte("head"), []byte("body")}, 9000); err != nil {
		t.Fatalf("pwritev: %v", err)
	}
	copy(data[20000:], "never synced")
	if err := unix.Ftruncate(fd, 32<<10); err != nil {
		t.Fatalf("ftruncate: %v", err)
	}

	// OFD lock and flock, as the directory lock and the CLI take them.
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatalf("F_OFD_SETLK: %v", err)
	}
	g, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	lk2 := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(g.Fd(), unix.F_OFD_SETLK, &lk2); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("a second OFD lock on the file: %v, want EAGAIN", err)
	}
	_ = g.Close()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock of the directory: %v", err)
	}

	// A checkpoint replaced as the engine does it: temp, fsync, rename,
	// directory fsync; then a second one whose directory is not synced.
	for i, body := range []string{"version 1\n", "version 2\n"} {
		tmp := filepath.Join(dir, "recovery-point-offset-checkpoint.tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := os.OpenFile(tmp, os.O_RDWR|unix.O_NOFOLLOW, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Sync(); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		if err := os.Rename(tmp, filepath.Join(dir, "recovery-point-offset-checkpoint")); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := d.Sync(); err != nil {
				t.Fatalf("directory fsync: %v", err)
			}
		}
	}
	if err := os.Symlink("00000000000000000000.log", filepath.Join(dir, "link.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.OpenFile(filepath.Join(dir, "link.log"), os.O_RDWR|unix.O_NOFOLLOW, 0); !errors.Is(err, unix.ELOOP) {
		t.Errorf("O_NOFOLLOW on a symbolic link: %v, want ELOOP", err)
	}
	_ = d.Close()

	r := history(t, m)
	logPath := "/topic-0/00000000000000000000.log"
	writes := opsOf(r, OpWrite, logPath)
	has := func(s string) bool {
		return slices.ContainsFunc(writes, func(o Op) bool { return bytes.Contains(o.Data, []byte(s)) })
	}
	if !has("stored through the mapping") || !has("second store") {
		t.Errorf("stores through the mapping did not reach the file system as writes: %d writes", len(writes))
	}
	if !has("headbody") {
		t.Errorf("pwritev did not arrive as one write")
	}
	syncs := opsOf(r, OpFsync, logPath)
	if len(syncs) < 2 || !syncs[len(syncs)-1].Datasync {
		t.Errorf("msync and fdatasync: %d fsyncs (%v), want 2, the last a datasync", len(syncs), syncs)
	}
	sizes := opsOf(r, OpSetSize, logPath)
	if len(sizes) != 2 || sizes[0].Size != 64<<10 || sizes[1].Size != 32<<10 {
		t.Errorf("length changes %v, want fallocate to 64 KiB then ftruncate to 32 KiB", sizes)
	}
	if len(opsOf(r, OpFsync, "/topic-0")) != 1 {
		t.Errorf("directory fsync not recorded once: %v", opsOf(r, OpFsync, "/topic-0"))
	}

	// A cut now that loses what is pending: the segment holds the two
	// stores synced, at its synced length (64 KiB); the checkpoint is the
	// first version (the second rename's directory was never synced).
	img, im := imageAt(t, r, r.Len()+1, seedFor(t, "lose"))
	got, err := os.ReadFile(filepath.Join(img, "topic-0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 64<<10 || !bytes.Contains(got, []byte("stored through the mapping")) || !bytes.Contains(got, []byte("second store")) ||
		bytes.Contains(got, []byte("headbody")) {
		t.Errorf("segment after a cut losing everything pending: %d bytes (%s)", len(got), im)
	}
	cp, err := os.ReadFile(filepath.Join(img, "topic-0", "recovery-point-offset-checkpoint"))
	if err != nil || string(cp) != "version 1\n" {
		t.Errorf("checkpoint after the cut: %q, %v; want version 1 (%s)", cp, err, im)
	}
	if _, err := os.Lstat(filepath.Join(img, "topic-0", "link.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unsynced symbolic link survived a cut losing everything: %v", err)
	}
}

// syncPath fsyncs the file or directory at p.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
