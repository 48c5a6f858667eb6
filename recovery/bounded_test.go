package recovery

import (
	"os"
	"runtime"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// TestRunHugeZeroFilledTxnIndex: a zero-filled .txnindex far larger than
// anything recovery rebuilds (what a crashed file system leaves) is
// replaced without being read whole into memory.
func TestRunHugeZeroFilledTxnIndex(t *testing.T) {
	dir := fixture(t)
	p := segPath(dir, 0, filenames.TxnIndex)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	for _, dry := range []bool{true, false} {
		o := unclean(0)
		o.DryRun = dry
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rep, err := Run(dir, o)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("dry run %v: %v", dry, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 256<<20 {
			t.Fatalf("dry run %v: %d bytes allocated", dry, d)
		}
		if len(rep.IndexesRebuilt) == 0 || rep.IndexesRebuilt[0] != 0 {
			t.Fatalf("dry run %v: indexes rebuilt %v, want segment 0", dry, rep.IndexesRebuilt)
		}
	}
	if st, err := os.Stat(p); err == nil && st.Size() != 0 {
		t.Fatalf(".txnindex still %d bytes after recovery", st.Size())
	}
}
