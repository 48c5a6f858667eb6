package partlog

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/checkpoint"
	"golang.org/x/sys/unix"
)

// envPosixLockChild makes TestPosixLockChild hold a POSIX record lock on
// the named .lock file, the way a Kafka broker does (FileChannel.tryLock),
// until its stdin closes.
const envPosixLockChild = "PARTLOG_POSIX_LOCK_CHILD"

// envPosixTryChild makes TestPosixLockChild try a POSIX record lock on the
// named .lock file and exit 0 if it is refused, 3 if it was granted.
const envPosixTryChild = "PARTLOG_POSIX_TRY_CHILD"

// TestPosixLockChild is the body of the child processes of the lock tests;
// run directly it skips.
func TestPosixLockChild(t *testing.T) {
	hold, try := os.Getenv(envPosixLockChild), os.Getenv(envPosixTryChild)
	if hold == "" && try == "" {
		t.Skip("lock test child: started by TestOpenDirLockedByKafka and TestOpenDirTwiceInProcess")
	}
	path := hold + try
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	err = unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
	if try != "" {
		if err == nil {
			os.Exit(3)
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
			t.Fatalf("F_SETLK: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("F_SETLK: %v", err)
	}
	if _, err := os.Stdout.WriteString("locked\n"); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// posixLockRefused reports whether another process is refused a POSIX
// record lock on the log directory's .lock (so the directory is locked
// against a Kafka broker).
func posixLockRefused(t *testing.T, root string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPosixLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envPosixTryChild+"="+filepath.Join(root, ".lock"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return false
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return true
}

// TestOpenDirTwiceInProcess: a second OpenDir of a directory this process
// already has open fails with ErrLocked and changes nothing: no checkpoint
// rewritten, no clean-shutdown marker, and the first Dir keeps its lock
// (POSIX record locks are per process, so they alone would let the second
// OpenDir through and its Close release the first one's lock).
func TestOpenDirTwiceInProcess(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, _ := d.Log(TopicPartition{Topic: "t", Partition: 0})
	if _, err := l.AppendAsLeader(makeBatch(t, 3, 100, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rpPath := filepath.Join(root, checkpoint.RecoveryPointFile)
	before, err := os.ReadFile(rpPath)
	if err != nil {
		t.Fatal(err)
	}
	st0, err := os.Stat(rpPath)
	if err != nil {
		t.Fatal(err)
	}

	d2, err := OpenDir(root, dirOpts(t))
	if err == nil {
		_ = d2.Close()
		t.Fatal("second OpenDir of the same directory succeeded")
	}
	if !errors.Is(err, ErrLocked) || !errors.Is(err, ErrDirLocked) {
		t.Fatalf("second OpenDir: %v, want ErrLocked", err)
	}
	if _, err := LockLogDir(root); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockLogDir while open: %v, want ErrLocked", err)
	}
	if _, err := Open(filepath.Join(root, "t-0"), smallOpts(t)); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of a served partition: %v, want ErrLocked", err)
	}
	after, err := os.ReadFile(rpPath)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(rpPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) || !os.SameFile(st0, st1) {
		t.Fatalf("recovery-point checkpoint rewritten by the refused OpenDir: %q -> %q", before, after)
	}
	if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); ok {
		t.Fatal("clean-shutdown marker written while the first Dir serves")
	}
	if !posixLockRefused(t, root) {
		t.Fatal("the refused OpenDir released the first Dir's lock: a broker could take it")
	}
	// The first Dir still serves.
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 100, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if posixLockRefused(t, root) {
		t.Fatal("lock still held after Close")
	}
	d, err = OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	if l, _ := d.Log(TopicPartition{Topic: "t", Partition: 0}); l.LogEndOffset() != 4 {
		t.Fatalf("reopened LEO %d, want 4", l.LogEndOffset())
	}
}

// TestOpenDirLockedByKafka: a process holding a POSIX record lock on
// .lock, as a Kafka broker does, makes OpenDir fail with ErrLocked, and
// leaves the directory untouched.
func TestOpenDirLockedByKafka(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPosixLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envPosixLockChild+"="+filepath.Join(root, ".lock"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child did not take the lock: %q %v", line, err)
	}
	d, err := OpenDir(root, dirOpts(t))
	if err == nil {
		_ = d.Close()
		t.Fatal("OpenDir succeeded while a broker holds .lock")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenDir: %v, want ErrLocked", err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "t-0"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("partition touched under a broker's lock: %v %v", entries, err)
	}
	for _, name := range []string{checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile, checkpoint.CleanShutdownFile} {
		if _, err := os.Stat(filepath.Join(root, name)); err == nil {
			t.Fatalf("%s written under a broker's lock", name)
		}
	}
}
