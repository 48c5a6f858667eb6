package crashfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

// EnvRequire, set to 1, makes the tests that need FUSE fail rather than
// skip where it is missing (CI sets it: a skipped power-cut test proves
// nothing).
const EnvRequire = "PARTLOG_REQUIRE_FUSE"

// Available reports whether this process can mount a FUSE file system
// directly (root, and /dev/fuse opens), and if not why.
func Available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root (crashfs mounts with mount(2), there is no fusermount)"
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Sprintf("cannot open /dev/fuse: %v", err)
	}
	_ = f.Close()
	return true, ""
}

// Require skips t when FUSE is not available, or fails it when
// PARTLOG_REQUIRE_FUSE=1.
func Require(t testing.TB) {
	t.Helper()
	if ok, why := Available(); !ok {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("crashfs: %s, and %s=1", why, EnvRequire)
		}
		t.Skipf("crashfs: %s (set %s=1 to fail instead)", why, EnvRequire)
	}
}

// Mount is a crash-simulating file system mounted for a test, served by
// a child process (the test binary started again, see daemon).
type Mount struct {
	dir, log string
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   testutil.SyncBuffer
	callMu   sync.Mutex // one command at a time on the pipes
	mu       sync.Mutex
	closed   bool
	closeErr error
}

// New mounts an empty crash-simulating file system for t (skipping or
// failing t when FUSE is unavailable, see Require) and unmounts it when
// t ends. Anything under Dir() must be closed before then.
func New(t testing.TB) *Mount {
	t.Helper()
	Require(t)
	base := t.TempDir()
	m, err := Start(filepath.Join(base, "mnt"), filepath.Join(base, "ops.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("crashfs: %v", err)
		}
	})
	return m
}

// Start mounts an empty crash-simulating file system on dir (created if
// missing), recording its op log in logPath (outside the mount).
func Start(dir, logPath string) (*Mount, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	m := &Mount{dir: dir, log: logPath}
	m.cmd = exec.Command(exe)
	m.cmd.Env = append(os.Environ(), envMount+"="+dir, envLog+"="+logPath)
	m.cmd.Stderr = &m.stderr
	if m.in, err = m.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	m.out = bufio.NewReader(stdout)
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := m.readLine(30 * time.Second)
	if err != nil || line != "ready" {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
		return nil, fmt.Errorf("crashfs: daemon did not start (%q, %v): %s", line, err, m.stderr.String())
	}
	return m, nil
}

func (m *Mount) readLine(timeout time.Duration) (string, error) {
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := m.out.ReadString('\n')
		ch <- result{strings.TrimSuffix(s, "\n"), err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(timeout):
		return "", errors.New("crashfs: no answer from the daemon")
	}
}

// call sends one command and returns the fields of its "ok" answer. It
// may be called from several goroutines.
func (m *Mount) call(cmd string) ([]string, error) {
	m.callMu.Lock()
	defer m.callMu.Unlock()
	if _, err := io.WriteString(m.in, cmd+"\n"); err != nil {
		return nil, fmt.Errorf("crashfs: %s: %w", cmd, err)
	}
	line, err := m.readLine(time.Minute)
	if err != nil {
		return nil, fmt.Errorf("crashfs: %s: %w: %s", cmd, err, m.stderr.String())
	}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "ok" {
		return nil, fmt.Errorf("crashfs: %s: %s", cmd, line)
	}
	return f[1:], nil
}

func (m *Mount) callInts(cmd string) ([]int64, error) {
	f, err := m.call(cmd)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(f))
	for i, s := range f {
		if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("crashfs: %s: answer %q", cmd, f)
		}
	}
	return out, nil
}

// Dir is the mount point.
func (m *Mount) Dir() string { return m.dir }

// Counts returns how many ops, writes (data and length changes) and
// syncs the file system has applied.
func (m *Mount) Counts() (ops, writes, syncs int64, err error) {
	v, err := m.count()
	if err != nil {
		return 0, 0, 0, err
	}
	return v[0], v[1], v[2], nil
}

func (m *Mount) count() ([]int64, error) {
	v, err := m.callInts("count")
	if err == nil && len(v) != 4 {
		err = fmt.Errorf("crashfs: count: answer %v", v)
	}
	return v, err
}

// Cut reports whether the power was cut (CutAt's op was reached, or
// CutNow): every change fails from then on.
func (m *Mount) Cut() (bool, error) {
	v, err := m.count()
	if err != nil {
		return false, err
	}
	return v[3] == 1, nil
}

// Ops returns the number of ops applied so far: a cut at Ops()+1 keeps
// everything synced until now.
func (m *Mount) Ops() (int64, error) {
	ops, _, _, err := m.Counts()
	return ops, err
}

// CutAt arms a power cut before the n-th op of kind ("op", "write" or
// "sync", counted from the mount): that change and every later one fail
// with EIO, while reads go on.
func (m *Mount) CutAt(kind string, n int64) error {
	_, err := m.call(fmt.Sprintf("cut %s %d", kind, n))
	return err
}

// CutNow cuts the power now and returns the cut (the number of the first
// op refused), for History().To.
func (m *Mount) CutNow() (int64, error) {
	v, err := m.callInts("cutnow")
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// Writeback makes the kernel write every dirty page of the mount to the
// file system (syncfs(2)), without any fsync: pages stored through a
// mapping become pending writes, which a cut may keep or tear, instead
// of staying in the page cache, where a cut loses them.
func (m *Mount) Writeback() error {
	d, err := os.Open(m.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// Settle writes every dirty page back and marks everything durable: the
// tree as it is is the image any later cut starts from. It returns the
// settle's op number (cuts after it are the test's).
func (m *Mount) Settle() (int64, error) {
	if err := m.Writeback(); err != nil {
		return 0, err
	}
	v, err := m.callInts("settle")
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// History returns a replay of every op so far.
func (m *Mount) History() (*Replay, error) {
	if _, err := m.call("flush"); err != nil {
		return nil, err
	}
	f, err := os.Open(m.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ops, err := ReadLog(f)
	if err != nil {
		return nil, err
	}
	return NewReplay(ops), nil
}

// Close unmounts the file system and stops the daemon. Whatever is still
// open under Dir() gets errors from then on.
func (m *Mount) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return m.closeErr
	}
	m.closed = true
	m.mu.Unlock()
	m.callMu.Lock()
	defer m.callMu.Unlock()
	_, _ = io.WriteString(m.in, "quit\n")
	_ = m.in.Close()
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(45 * time.Second):
		_ = m.cmd.Process.Kill()
		err = errors.Join(errors.New("crashfs: daemon did not exit; killed"), <-done)
	}
	if err != nil {
		err = fmt.Errorf("crashfs: daemon: %w: %s", err, m.stderr.String())
	}
	m.mu.Lock()
	m.closeErr = err
	m.mu.Unlock()
	return err
}
