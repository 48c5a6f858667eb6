package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog/cleaner"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/recovery"
)

// The clean crash child: TestCleanCrashKill re-executes the test binary
// with these variables and -test.run=^TestCleanCrashChild$. The child
// opens the directory, cleans it, and SIGKILLs itself right after the
// given durable step of the cleaning has happened for the given time.
const (
	envCleanCrashDir   = "PARTLOG_CLEAN_CRASH_DIR"
	envCleanCrashStep  = "PARTLOG_CLEAN_CRASH_STEP"
	envCleanCrashCount = "PARTLOG_CLEAN_CRASH_COUNT"
	// cleanCrashClock is the cleaning's clock (its delete horizons).
	cleanCrashClock = int64(1_700_000_100_000)
)

// cleanCrashOpts are the options of the crash tests' log: segments small
// enough that a cleaning installs several groups.
func cleanCrashOpts(t testing.TB) *Options {
	clock := cleanCrashClock
	o := compactOpts(t, &clock)
	o.SegmentBytes = 2 << 10
	o.ProducerIDExpirationMs = 1 << 50
	return o
}

// TestCleanCrashChild is the body of the child; run directly it skips.
func TestCleanCrashChild(t *testing.T) {
	dir := os.Getenv(envCleanCrashDir)
	if dir == "" {
		t.Skip("clean crash child: started by TestCleanCrashKill")
	}
	step := os.Getenv(envCleanCrashStep)
	count, _ := strconv.Atoi(os.Getenv(envCleanCrashCount))
	seen := 0
	hook := func(_, s string) error {
		if s == step {
			if seen++; seen == count {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
		}
		return nil
	}
	testhook.CleanStep.Store(&hook)
	l, err := Open(dir, cleanCrashOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.Compact(time.UnixMilli(cleanCrashClock)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
}

// TestCleanCrashKill: a process killed (SIGKILL) right after each durable
// step of a cleaning (the .cleaned files written, renamed .swap, the
// replaced segments renamed .deleted, the .swap files live), at the first
// and at a later group, leaves a directory that the next open recovers
// without a problem: no leftover, every record either as before or as the
// cleaning left it (each key's last record still there at its offset),
// producer state as before, and a cleaning run to the end then gives
// exactly what an uninterrupted one gives.
func TestCleanCrashKill(t *testing.T) {
	template := filepath.Join(t.TempDir(), "t-0")
	clock := int64(1_700_000_000_000)
	l, err := Open(template, cleanCrashOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	producerScript(t, l, 3, &clock)
	before := readRecords(t, l)
	wantProducers := rebuiltProducers(t, l, cleanCrashClock)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The uninterrupted cleaning.
	ref := copyPartition(t, template)
	l = openCleanCrash(t, ref)
	if _, err := l.Compact(time.UnixMilli(cleanCrashClock)); err != nil {
		t.Fatal(err)
	}
	want := readRecords(t, l)
	l.Close()
	if len(want) >= len(before) {
		t.Fatalf("the cleaning removed nothing (%d records)", len(want))
	}
	last := latest(before)
	steps := []string{cleaner.StepWritten, cleaner.StepSwap, cleaner.StepOriginalsGone, cleaner.StepLive}
	for _, step := range steps {
		for _, count := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s-%d", step, count), func(t *testing.T) {
				dir := copyPartition(t, template)
				cmd := exec.Command(os.Args[0], "-test.run=^TestCleanCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), envCleanCrashDir+"="+dir, envCleanCrashStep+"="+step,
					envCleanCrashCount+"="+strconv.Itoa(count))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
					t.Fatalf("the child was not killed at %s #%d: %v\n%s", step, count, err, out.String())
				}
				l := openCleanCrash(t, dir)
				if rep := l.RecoveryReport(); rep != nil && rep.Status == recovery.StatusProblems {
					t.Fatalf("recovery found problems: %s", rep.Summary())
				}
				assertNoCleanLeftovers(t, dir)
				for _, r := range readRecords(t, l) {
					if w, ok := last[r.key]; ok && r.offset > w.offset {
						t.Fatalf("record %+v after its key's last %+v", r, w)
					}
				}
				got := latest(readRecords(t, l))
				for k, w := range last {
					if got[k] != w {
						t.Fatalf("key %s: last record %+v, want %+v", k, got[k], w)
					}
				}
				if err := sameProducers(rebuiltProducers(t, l, cleanCrashClock), wantProducers); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Compact(time.UnixMilli(cleanCrashClock)); err != nil {
					t.Fatal(err)
				}
				if g := readRecords(t, l); fmt.Sprint(g) != fmt.Sprint(want) {
					t.Fatalf("cleaned after the crash: %d records, uninterrupted: %d", len(g), len(want))
				}
			})
		}
	}
}

// openCleanCrash opens a crash test's directory as after a crash
// (recovery runs), with every record below the log end committed.
func openCleanCrash(t testing.TB, dir string) *Log {
	t.Helper()
	l, err := Open(dir, cleanCrashOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	l.SetHighWatermark(l.LogEndOffset())
	// The checkpoint lives in the log directory, which these tests lack:
	// every open cleans from the log start.
	return l
}

// copyPartition copies a partition directory's regular files.
func copyPartition(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func assertNoCleanLeftovers(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		for _, s := range []string{".cleaned", ".swap", ".deleted"} {
			if strings.HasSuffix(e.Name(), s) {
				t.Errorf("leftover %s after recovery", e.Name())
			}
		}
	}
}
