// Package prefault keeps the pages just ahead of each active segment's
// write position populated (madvise MADV_POPULATE_WRITE through
// mmapfile.File.Prefault), so that an append stores into mapped pages
// instead of taking their page faults. One Pool serves every writer of a
// process with a few goroutines, started on demand, within a budget of
// populated bytes; a Writer is one segment's place in it. The pool also
// runs a writer's reservation steps ahead of it (File.Preallocate) and
// takes back the pages of writers gone idle (File.DropPages).
//
// The package knows nothing of segments: it sees an mmapfile.File and a
// position. Package segment owns the policy (window, stride, when to
// preallocate); the Pool's comment states the scheduling rules.
package prefault
