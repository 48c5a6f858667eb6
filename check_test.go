package partlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// The shared consistency check runs on every Log this package's tests
// open, as it closes (closeCheck); TestMain fails the run when one failed
// and names the log's directory (t.TempDir puts the test's name in it).
var (
	consistencyMu       sync.Mutex
	consistencyFailures []string
)

// damaged holds the Logs whose tests leave damage in them on purpose
// (closeDamaged): the check skips them.
var damaged sync.Map

// closeDamaged closes a Log that a test left damaged on purpose (data
// Kafka would keep and serve as it is), without the consistency check.
func closeDamaged(l *Log) error {
	damaged.Store(l, true)
	return l.Close()
}

func TestMain(m *testing.M) {
	closeCheck = func(l *Log) {
		if _, ok := damaged.Load(l); ok {
			return
		}
		if err := l.checkLocked(); err != nil {
			consistencyMu.Lock()
			consistencyFailures = append(consistencyFailures, fmt.Sprintf("%s: %v", l.dir, err))
			consistencyMu.Unlock()
		}
	}
	code := m.Run()
	if len(consistencyFailures) > 0 {
		fmt.Fprintf(os.Stderr, "consistency check failed on %d logs at Close:\n  %s\n", len(consistencyFailures),
			strings.Join(consistencyFailures, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// checkLog runs the consistency check now (for tests that keep a log
// open at their end).
func checkLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Check(); err != nil {
		t.Errorf("consistency check: %v", err)
	}
}

// TestConsistencyCheckSeesBadOffsets: the shared check fails on a batch
// that overlaps its predecessor and on one that goes backwards, written
// under the Log's rules (straight into the active segment).
func TestConsistencyCheckSeesBadOffsets(t *testing.T) {
	for name, base := range map[string]int64{"overlap": 8, "backwards": 2} {
		t.Run(name, func(t *testing.T) {
			l, err := Open(t.TempDir(), smallOpts(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// Closed without the hook: the damage is deliberate.
				l.closed.Store(true)
				_ = l.Close()
			}()
			if _, err := l.AppendAsFollower(makeFollowerBatch(t, 0, 0, 10, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := l.checkLocked(); err != nil {
				t.Fatalf("healthy log: %v", err)
			}
			var out segment.Appended
			bad := makeFollowerBatch(t, base, 0, 2, 10, 1)
			hdrs, err := batch.CheckAll(bad, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.active().Append(bad, hdrs, segment.Stamp{}, &out); err != nil {
				t.Fatal(err)
			}
			l.logEndOffset.Store(12)
			err = l.checkLocked()
			if err == nil || !strings.Contains(err.Error(), "overlaps or goes back") {
				t.Fatalf("check: %v, want an overlap error", err)
			}
		})
	}
}

// TestCheckClosedDir: Check of a closed partition directory and of a log
// directory passes on logs a Log wrote and fails on one whose bytes were
// damaged afterwards, naming the partition.
func TestCheckClosedDir(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, &DirOptions{Log: smallOpts(t)})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		l, err := d.Create("orders", p, TopicID{1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if _, err := l.AppendAsLeader(makeBatch(t, 3, 100, int64(i)), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(root, smallOpts(t)); err != nil {
		t.Fatalf("healthy log directory: %v", err)
	}
	part := filepath.Join(root, "orders-1")
	if err := Check(part, smallOpts(t)); err != nil {
		t.Fatalf("healthy partition: %v", err)
	}
	seg := filepath.Join(part, "00000000000000000000.log")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[batch.HeaderSize+5] ^= 0xff // inside the first batch's records: its CRC breaks
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = Check(root, smallOpts(t))
	if err == nil || !strings.Contains(err.Error(), "orders-1") || strings.Contains(err.Error(), "orders-0") {
		t.Fatalf("damaged partition: %v, want an error naming orders-1 only", err)
	}
}
