package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/testutil"
)

// TestRecoverWithoutApplyIsVerify: without --apply, recover prints what
// verify prints, exits as verify does and changes nothing.
func TestRecoverWithoutApplyIsVerify(t *testing.T) {
	for _, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			dir := makeDamaged(t, d)
			before := testutil.HashTree(t, filepath.Dir(dir))
			for _, json := range []bool{false, true} {
				args := []string{dir}
				if json {
					args = []string{"--json", dir}
				}
				vc, vout, verr := runCLI(t, "", append([]string{"verify"}, args...)...)
				rc, rout, rerr := runCLI(t, "", append([]string{"recover"}, args...)...)
				if vc != exitProblems || rc != vc || rout != vout || rerr != verr {
					t.Fatalf("verify: %d %q %q\nrecover: %d %q %q", vc, vout, verr, rc, rout, rerr)
				}
			}
			sameTree(t, before, testutil.HashTree(t, filepath.Dir(dir)))
		})
	}
}

// quarantineDirRE matches the default quarantine directory's name.
var quarantineDirRE = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z$`)

// TestRecoverApply: --apply repairs every damage (exit 1), a second
// --apply finds nothing to do (exit 0), and so does verify afterwards.
func TestRecoverApply(t *testing.T) {
	for _, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			dir := makeDamaged(t, d)
			code, out, errOut := runCLI(t, "", "recover", "--apply", "--json", dir)
			if code != exitRepaired {
				t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
			}
			reps := parseReports(t, out)
			if len(reps) != 1 || reps[0].Status != "repaired" {
				t.Fatalf("reports %s", out)
			}
			d.check(t, reps[0], dir)
			if q := reps[0].Quarantine; q != nil {
				if filepath.Dir(*q) != filepath.Join(dir, quarantineDir) || !quarantineDirRE.MatchString(filepath.Base(*q)) {
					t.Fatalf("quarantine %s, want %s/<UTC time>", *q, filepath.Join(dir, quarantineDir))
				}
			}
			for _, args := range [][]string{{"recover", "--apply", dir}, {"verify", dir}} {
				code, out, errOut = runCLI(t, "", args...)
				if code != exitOK {
					t.Fatalf("%v after repair: exit %d\n%s%s", args, code, out, errOut)
				}
			}
			checkConsistent(t, dir)
		})
	}
}

// TestRecoverApplyQuarantinesTail: the cut tail is in the default
// quarantine directory, byte for byte, and the text output names it.
func TestRecoverApplyQuarantinesTail(t *testing.T) {
	dir := makeDamaged(t, damages()[0])
	last := lastLog(t, dir)
	code, out, errOut := runCLI(t, "", "recover", "--apply", dir)
	if code != exitRepaired {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	qs, err := filepath.Glob(filepath.Join(dir, quarantineDir, "*"))
	if err != nil || len(qs) != 1 || !quarantineDirRE.MatchString(filepath.Base(qs[0])) {
		t.Fatalf("quarantine directories %v, %v", qs, err)
	}
	tail, err := os.ReadFile(filepath.Join(qs[0], filepath.Base(last)+".tail@434"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tail, garbage) {
		t.Fatalf("quarantined tail %x, want %x", tail, garbage)
	}
	if fi, err := os.Stat(last); err != nil || fi.Size() != 434 {
		t.Fatalf("%s after repair: %v, %v", last, fi, err)
	}
	for _, want := range []string{dir + ": repaired", "cut: torn-tail in segment 54 at position 434, offset 60, 100 bytes removed", "quarantine: " + qs[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The repaired directory opens as a log with every offset.
	l, err := partlog.Open(dir, testLogOpts())
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 60 {
		t.Fatalf("log end offset %d, want 60", l.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, dir)
}

// checkConsistent runs partlog's consistency check on a closed partition
// or log directory a test leaves healthy (a repaired one, say).
func checkConsistent(t testing.TB, dir string) {
	t.Helper()
	if err := partlog.Check(dir, testLogOpts()); err != nil {
		t.Errorf("consistency check of %s: %v", dir, err)
	}
}

// TestRecoverApplyQuarantineFlag: --quarantine PATH receives the removed
// bytes; with several partitions each gets a subdirectory.
func TestRecoverApplyQuarantineFlag(t *testing.T) {
	dir := makeDamaged(t, damages()[1]) // truncated batch
	q := filepath.Join(t.TempDir(), "q")
	code, out, errOut := runCLI(t, "", "recover", "--apply", "--json", "--quarantine", q, dir)
	if code != exitRepaired {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := parseReports(t, out)[0]
	if r.Quarantine == nil || *r.Quarantine != q {
		t.Fatalf("quarantine %v, want %s", r.Quarantine, q)
	}
	tail, err := os.ReadFile(filepath.Join(q, filepath.Base(lastLog(t, dir))+".tail@217"))
	if err != nil || len(tail) != 207 {
		t.Fatalf("tail %d bytes, %v; want 207", len(tail), err)
	}
	if _, err := os.Stat(filepath.Join(dir, quarantineDir)); !os.IsNotExist(err) {
		t.Fatalf("default quarantine created: %v", err)
	}

	// Two partitions of one log directory.
	root := t.TempDir()
	a := makeLog(t, root, 20)
	b := filepath.Join(filepath.Dir(a), "t-1")
	if err := os.CopyFS(b, os.DirFS(a)); err != nil {
		t.Fatal(err)
	}
	appendFile(t, lastLog(t, a), garbage)
	appendFile(t, lastLog(t, b), garbage)
	q = filepath.Join(t.TempDir(), "q")
	code, out, errOut = runCLI(t, "", "recover", "--apply", "--quarantine", q, filepath.Dir(a))
	if code != exitRepaired {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, name := range []string{"t-0", "t-1"} {
		if _, err := os.Stat(filepath.Join(q, name, "00000000000000000054.log.tail@434")); err != nil {
			t.Error(err)
		}
	}
}

// lockChildEnv names the log directory a child test process locks.
const lockChildEnv = "PARTLOG_CLI_LOCK_CHILD"

// TestRecoverRefusesLockedDir: a log directory whose .lock another
// process holds (as a broker does) is refused, with nothing changed. POSIX
// record locks do not conflict within a process, so a child holds it.
func TestRecoverRefusesLockedDir(t *testing.T) {
	if logDir := os.Getenv(lockChildEnv); logDir != "" {
		f, err := partlog.LockLogDir(logDir)
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		defer f.Close()
		os.Stdout.WriteString("locked\n")
		_, _ = io.Copy(io.Discard, os.Stdin) // hold until the parent closes stdin
		return
	}
	dir := makeDamaged(t, damages()[0])
	logDir := filepath.Dir(dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecoverRefusesLockedDir$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+logDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	before := testutil.HashTree(t, logDir)
	code, out, errOut := runCLI(t, "", "recover", "--apply", dir)
	if code != exitProblems {
		t.Fatalf("exit %d, want 4\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "locked by another process") || out != "" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	code, out, _ = runCLI(t, "", "recover", "--apply", "--json", dir)
	if r := parseReports(t, out); code != exitProblems || len(r) != 1 || r[0].Status != "refused" || r[0].Dir != dir {
		t.Fatalf("--json: exit %d, %s", code, out)
	}
	sameTree(t, before, testutil.HashTree(t, logDir))
	// verify still works (read-only) and warns.
	code, _, errOut = runCLI(t, "", "verify", dir)
	if code != exitProblems || !strings.Contains(errOut, "warning: log directory") {
		t.Fatalf("verify: exit %d stderr %q", code, errOut)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	// Released: now it recovers.
	if code, out, errOut := runCLI(t, "", "recover", "--apply", dir); code != exitRepaired {
		t.Fatalf("after release: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRecoverRefusesOpenPartition: a partition directory a Log holds open
// (flock on the directory) is refused too.
func TestRecoverRefusesOpenPartition(t *testing.T) {
	dir := makeLog(t, t.TempDir(), 5)
	l, err := partlog.Open(dir, testLogOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, out, errOut := runCLI(t, "", "recover", "--apply", dir)
	if code != exitProblems || !strings.Contains(errOut, "open in another partlog process") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
