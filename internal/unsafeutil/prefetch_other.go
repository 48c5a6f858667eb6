//go:build !amd64

package unsafeutil

// PrefetchWrite is a hint that this architecture's build does not give:
// it does nothing. On amd64 it fetches b's cache lines for writing.
func PrefetchWrite(b []byte) {}
