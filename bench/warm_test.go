package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// warm writes and deletes a scratch file of n bytes (at most 1 GiB)
// before a timed run. These VMs hand idle free memory back to the host,
// and the first use of a page then costs up to 10x; touching the pages
// first makes the run measure the code, not the hypervisor.
func warm(b *testing.B, n int64) {
	b.Helper()
	n = min(max(n, 64<<20), 1<<30)
	path := filepath.Join(b.TempDir(), "warm.scratch")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for w := int64(0); w < n; w += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	_ = f.Close()
	_ = os.Remove(path)
}
