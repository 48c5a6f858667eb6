package recovery

import (
	"bytes"
	"os"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// TestSwapAtSmallestCleanedRolledBack: a .swap whose base offset equals
// the smallest .cleaned one belongs to the interrupted replacement (Kafka
// deletes every swap at or above the smallest cleaned offset): it is
// rolled back and the original segment stays as it was, even when the
// swap is itself a valid segment.
func TestSwapAtSmallestCleanedRolledBack(t *testing.T) {
	dir := fixture(t)
	orig, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	copySegment(t, dir, 300, 300, filenames.Cleaned)
	copySegment(t, dir, 300, 300, filenames.Swap)
	// A valid but shorter swap: only S1's first five batches.
	cut := batchesOf(t, dir, 300)[5].pos
	if err := os.Truncate(segPath(dir, 300, filenames.Log)+filenames.Swap, cut); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, clean())
	expectChange(t, r, kindSwap)
	expectCut(t, r, 750, "")
	got, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, orig) {
		t.Fatalf("S1 is %d bytes after recovery, want the original %d: the swap at the smallest cleaned offset was completed", len(got), len(orig))
	}
	if exists(dir, filenames.Make(300, filenames.Log)+filenames.Swap) {
		t.Error("the swap was left in place")
	}
}

// TestSwapReplacingTwoSegments: a completed compaction's .swap at 300
// holding the data of S1 and S2 replaces both originals: S2 is removed
// with the others of the swap's range, not left to overlap it.
func TestSwapReplacingTwoSegments(t *testing.T) {
	dir := fixture(t)
	s1, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := os.ReadFile(segPath(dir, 600, filenames.Log))
	if err != nil {
		t.Fatal(err)
	}
	merged := append(append([]byte(nil), s1...), s2...)
	if err := os.WriteFile(segPath(dir, 300, filenames.Log)+filenames.Swap, merged, 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, clean())
	expectChange(t, r, kindSwap)
	if hasProblem(r, kindOverlap) {
		t.Errorf("overlap after the swap: %+v", r.Problems)
	}
	if exists(dir, filenames.Make(600, filenames.Log)) {
		t.Error("S2 left beside the swap that replaced it")
	}
	got, err := os.ReadFile(segPath(dir, 300, filenames.Log))
	if err != nil || !bytes.Equal(got, merged) {
		t.Fatalf("segment 300 after the swap: %d bytes (%v), want the %d of the swap", len(got), err, len(merged))
	}
	if r.LogEndOffset != 750 {
		t.Errorf("LEO %d, want 750", r.LogEndOffset)
	}
}
