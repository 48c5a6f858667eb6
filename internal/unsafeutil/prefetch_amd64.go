package unsafeutil

// PrefetchWrite asks the CPU to fetch the cache lines of b for writing
// (PREFETCHW, once for each 64-byte line b touches), so that stores coming later find them
// in this core's cache in exclusive state instead of waiting for them
// then. It is a hint: it reads and writes nothing, never faults (not on
// an unmapped, protected or not yet populated page: the hint is then
// dropped) and keeps no reference to b. An empty b does nothing.
//
//go:noescape
func PrefetchWrite(b []byte)
