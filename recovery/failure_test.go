package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
)

// TestI1ReadErrorCutsNothing injects EIO when S2's .log is opened: Run
// fails naming the file and the directory is unchanged.
func TestI1ReadErrorCutsNothing(t *testing.T) {
	dir := fixture(t)
	appendBytes(t, segPath(dir, 600, filenames.Log), []byte("torn"))
	before := testutil.HashTree(t, dir)
	o := unclean(600)
	o.hooks = &hooks{open: func(p string) error {
		if strings.HasSuffix(p, "00000000000000000600.log") {
			return syscall.EIO
		}
		return nil
	}}
	_, err := Run(dir, o)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "00000000000000000600.log") {
		t.Fatalf("err %v", err)
	}
	if d := diffHashes(before, testutil.HashTree(t, dir)); len(d) > 0 {
		t.Fatalf("changed %v", d)
	}
}

// TestI2NoSpaceKeepsOriginals injects ENOSPC while an index is rebuilt:
// Run fails and the original index is unchanged.
func TestI2NoSpaceKeepsOriginals(t *testing.T) {
	dir := fixture(t)
	appendBytes(t, segPath(dir, 300, filenames.Index), make([]byte, 80))
	idx := segPath(dir, 300, filenames.Index)
	orig, _ := os.ReadFile(idx)
	o := clean()
	o.hooks = &hooks{write: func(p string) error {
		if strings.HasSuffix(p, ".index") {
			return syscall.ENOSPC
		}
		return nil
	}}
	if _, err := Run(dir, o); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err %v", err)
	}
	now, _ := os.ReadFile(idx)
	if string(now) != string(orig) {
		t.Fatal("original index changed")
	}
	if _, err := os.Stat(idx + filenames.Temp); err == nil {
		t.Fatal("temporary file left")
	}
}

// TestJ1CrashAfterEachStep stops Run after each step that changes the
// directory (as a kill would) and reruns it: every rerun converges to the
// state of an uninterrupted run.
func TestJ1CrashAfterEachStep(t *testing.T) {
	damages := map[string]func(testing.TB, string){
		"E1": func(t testing.TB, dir string) {
			setField(t, dir, 300, batchAt(t, dir, 300, 500).pos, 17, []byte{9, 9, 9, 9})
		},
		"B1": func(t testing.TB, dir string) {
			_ = os.Truncate(segPath(dir, 600, filenames.Log), batchAt(t, dir, 600, 740).pos+100)
		},
		"E9": nil,
	}
	for name, damage := range damages {
		o := unclean(300)
		if name == "E9" {
			o.LogStartOffset = 1000
		}
		ref := fixture(t)
		if damage != nil {
			damage(t, ref)
		}
		want := mustRun(t, ref, o)
		wantHash := testutil.HashTree(t, ref)
		for _, crashAt := range []string{"leftovers", "remove", "data", "indexes", "producers", "epochs"} {
			t.Run(fmt.Sprintf("%s/%s", name, crashAt), func(t *testing.T) {
				dir := fixture(t)
				if damage != nil {
					damage(t, dir)
				}
				co := o
				crash := errors.New("crash")
				co.hooks = &hooks{step: func(s string) error {
					if s == crashAt {
						return crash
					}
					return nil
				}}
				if _, err := Run(dir, co); err != nil && !errors.Is(err, crash) {
					t.Fatal(err)
				}
				got := mustRun(t, dir, o)
				if got.LogEndOffset != want.LogEndOffset {
					t.Errorf("LEO %d, want %d", got.LogEndOffset, want.LogEndOffset)
				}
				if d := diffHashes(wantHash, testutil.HashTree(t, dir)); len(d) > 0 {
					t.Errorf("differs from an uninterrupted run: %v", d)
				}
				checkLoadable(t, dir)
			})
		}
	}
}

// TestQuarantineKeepsEveryByte repairs E1 with a quarantine: the cut tail,
// the removed segment and the discarded snapshots are all there.
func TestQuarantineKeepsEveryByte(t *testing.T) {
	dir := fixture(t)
	setField(t, dir, 300, batchAt(t, dir, 300, 500).pos, 17, []byte{9, 9, 9, 9})
	s1, _ := os.Stat(segPath(dir, 300, filenames.Log))
	o := unclean(300)
	o.Quarantine = filepath.Join(dir, quarantineDirName, "run1")
	r := mustRun(t, dir, o)
	if r.Quarantine == nil || *r.Quarantine != o.Quarantine {
		t.Fatalf("quarantine %v", r.Quarantine)
	}
	for _, name := range []string{"00000000000000000600.log", "00000000000000000600.index", "00000000000000000750.snapshot",
		"00000000000000000600.snapshot"} {
		if _, err := os.Stat(filepath.Join(o.Quarantine, name)); err != nil {
			t.Errorf("%s not quarantined: %v", name, err)
		}
	}
	tail := filepath.Join(o.Quarantine, fmt.Sprintf("00000000000000000300.log.tail@%d", r.Truncation.Position))
	st, err := os.Stat(tail)
	if err != nil || st.Size() != s1.Size()-r.Truncation.Position {
		t.Errorf("tail %v %v", st, err)
	}
	checkLoadable(t, dir)
	r2 := mustRun(t, dir, unclean(300))
	if r2.Status != StatusOK {
		t.Errorf("second run %s %+v", r2.Status, r2.Problems)
	}
}

// TestQuarantineZeroTailIsSparse: the zero tail of a preallocated active
// segment (a crashed writer's; 1 GiB at the defaults) is kept in the
// quarantine byte for byte but as a hole: no disk is spent on it. The
// cut is a note, not a problem.
func TestQuarantineZeroTailIsSparse(t *testing.T) {
	dir := fixture(t)
	p := segPath(dir, 600, filenames.Log)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	const zeros = 64 << 20
	if err := os.Truncate(p, st.Size()+zeros); err != nil {
		t.Fatal(err)
	}
	o := unclean(300)
	o.Quarantine = filepath.Join(dir, quarantineDirName, "run1")
	r := mustRun(t, dir, o)
	if r.Truncation == nil || r.Truncation.Class != ClassZeroTail || len(r.Problems) != 0 {
		t.Fatalf("truncation %+v, problems %+v", r.Truncation, r.Problems)
	}
	tail := filepath.Join(o.Quarantine, fmt.Sprintf("00000000000000000600.log.tail@%d", r.Truncation.Position))
	q, err := os.Stat(tail)
	if err != nil || q.Size() != zeros {
		t.Fatalf("tail %v %v", q, err)
	}
	if used := q.Sys().(*syscall.Stat_t).Blocks * 512; used > 1<<20 {
		t.Errorf("the quarantined zero tail takes %d bytes of disk", used)
	}
	b, err := os.ReadFile(tail)
	if err != nil || !bytes.Equal(b, make([]byte, zeros)) {
		t.Errorf("the quarantined tail is not the %d zero bytes cut (%v)", zeros, err)
	}
}

// TestSparseCopy: data chunks written, zero chunks left as holes, the
// length exact whatever the last chunk.
func TestSparseCopy(t *testing.T) {
	for _, n := range []int{0, 1, 1 << 20, 3<<20 + 5} {
		src := make([]byte, n)
		for i := 0; i < n; i += 1<<20 + 7 {
			src[i] = byte(i%250 + 1)
		}
		f, err := os.Create(filepath.Join(t.TempDir(), "c"))
		if err != nil {
			t.Fatal(err)
		}
		if err := sparseCopy(f, bytes.NewReader(src)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%d bytes: copy differs (%v)", n, err)
		}
	}
}
