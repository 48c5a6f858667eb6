package recovery

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
)

// quarantineDirName is the default quarantine directory inside a partition
// directory (recovery.md §10 item 7); the listing skips it.
const quarantineDirName = "partlog-quarantine"

// segmentKinds are the suffixes of the files that make up a segment.
var segmentKinds = []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex}

// kindSuffixes are every suffix a segment-family name may end with.
var kindSuffixes = []string{filenames.Log, filenames.Index, filenames.TimeIndex,
	filenames.TxnIndex, filenames.Snapshot}

// looksLikeSegmentFile reports whether name carries a segment-family kind
// (with or without a transient suffix), whatever its offset part.
func looksLikeSegmentFile(name string) bool {
	for _, t := range []string{filenames.Deleted, filenames.Cleaned, filenames.Swap} {
		name = strings.TrimSuffix(name, t)
	}
	for _, k := range kindSuffixes {
		if strings.HasSuffix(name, k) {
			return true
		}
	}
	return false
}

// leftovers is step 1: list the directory, remove .deleted files and our
// temporary files, roll back or finish interrupted replacements (.cleaned,
// .swap; recovery.md §1.5 and §2.2 steps 1–4, with swap validation, §7.9
// item 16), and remove orphan index files. Foreign names are reported and
// left alone. On return x.files holds the live names.
func (x *run) leftovers() error {
	des := x.o.Entries
	if des == nil {
		var err error
		if des, err = os.ReadDir(x.dir); err != nil {
			return fmt.Errorf("partlog/recovery: list %s: %w", x.dir, err)
		}
	}
	x.files = map[string]string{}
	x.epochFile = epochAbsent
	var cleaned, swaps []filenames.Name
	deleted := map[int64]bool{} // segments with a .deleted file: a deletion was interrupted
	quarantine := filepath.Clean(x.o.Quarantine)
	for _, de := range des {
		name := de.Name()
		p := filepath.Join(x.dir, name)
		if name == epochFileName {
			x.epochFile = epochUnknown // a link or other entry: looked at
			if de.Type().IsRegular() {
				x.epochFile = epochListed
			}
		}
		if ok, what := fsutil.Usable(de); !ok {
			if de.IsDir() && (name == quarantineDirName || filepath.Clean(p) == quarantine) {
				continue
			}
			// Never read, written, renamed or removed: a link may point
			// outside the directory.
			x.r.problem(name, -1, kindForeignName, "%s ignored", what)
			continue
		}
		if base, ok := strings.CutSuffix(name, filenames.Temp); ok {
			if n, err := filenames.Parse(base); err == nil && n.Transient == "" {
				if err := x.removePath(name, p, kindLeftover, "temporary file of an interrupted write"); err != nil {
					return err
				}
			}
			continue // checkpoint temporaries are Kafka's and are ignored (H2)
		}
		n, err := filenames.Parse(name)
		if err != nil {
			if looksLikeSegmentFile(name) {
				x.r.problem(name, -1, kindForeignName, "not a canonical 20-digit segment file name; ignored")
			}
			continue
		}
		switch n.Transient {
		case filenames.Deleted:
			deleted[n.Offset] = true
			if err := x.removePath(name, p, kindLeftover, "file scheduled for deletion (Kafka removes it on load)"); err != nil {
				return err
			}
		case filenames.Cleaned:
			cleaned = append(cleaned, n)
			x.files[name] = p
		case filenames.Swap:
			swaps = append(swaps, n)
			x.files[name] = p
		default:
			x.files[name] = p
		}
	}
	if err := x.resolveSwaps(cleaned, swaps); err != nil {
		return err
	}
	// Orphan indexes (no .log).
	for _, name := range x.sortedNames() {
		n, _ := filenames.Parse(name)
		switch n.Kind {
		case filenames.Index, filenames.TimeIndex, filenames.TxnIndex:
			if !x.exists(filenames.Make(n.Offset, filenames.Log)) {
				// Beside a .deleted file it is what an interrupted
				// deletion leaves; otherwise the segment's data is
				// missing. Kafka removes it either way.
				reason := "index file of a segment being deleted (Kafka removes it on load)"
				if !deleted[n.Offset] {
					x.r.problem(name, -1, kindOrphanIndex, "index file without a .log: the data of segment %d is missing", n.Offset)
					reason = "index file without a .log (Kafka removes it on load)"
				}
				if err := x.remove(name, kindOrphanIndex, reason); err != nil {
					return err
				}
			}
		}
	}
	return x.syncDir()
}

// resolveSwaps applies the replacement protocol to the leftovers of an
// interrupted compaction or split.
func (x *run) resolveSwaps(cleaned, swaps []filenames.Name) error {
	if len(cleaned) == 0 && len(swaps) == 0 {
		return nil
	}
	minCleaned := int64(-1)
	for _, n := range cleaned {
		if minCleaned < 0 || n.Offset < minCleaned {
			minCleaned = n.Offset
		}
	}
	var valid []filenames.Name
	for _, n := range swaps {
		if minCleaned >= 0 && n.Offset >= minCleaned {
			if err := x.remove(n.String(), kindSwap, "incomplete replacement rolled back"); err != nil {
				return err
			}
			continue
		}
		valid = append(valid, n)
	}
	for _, n := range cleaned {
		if err := x.remove(n.String(), kindSwap, "unfinished replacement output"); err != nil {
			return err
		}
	}
	// Validate each .log.swap and compute the replaced range [lo, hi).
	lo, hi := int64(-1), int64(-1)
	rollback := false
	for _, n := range valid {
		if n.Kind != filenames.Log {
			continue
		}
		m, err := x.o.openMapped(x.path(n.String()), true)
		if err != nil {
			return err
		}
		var res scanResult
		ferr := guard(n.String(), func() { res = scanSegment(m.data, n.Offset, nil) })
		m.close()
		if ferr != nil {
			return ferr
		}
		if res.fail != failNone && x.exists(filenames.Make(n.Offset, filenames.Log)) {
			x.r.problem(n.String(), res.validEnd, kindSwap, "replacement segment invalid (%s); rolled back, originals kept", res.reason)
			rollback = true
			break
		}
		next := n.Offset
		if res.lastOffset >= 0 {
			next = res.lastOffset + 1
		}
		if lo < 0 || n.Offset < lo {
			lo = n.Offset
		}
		if next > hi {
			hi = next
		}
	}
	if rollback {
		for _, n := range valid {
			if err := x.remove(n.String(), kindSwap, "replacement rolled back: its segment is invalid"); err != nil {
				return err
			}
		}
		return nil
	}
	if lo >= 0 {
		for _, name := range x.sortedNames() {
			n, err := filenames.Parse(name)
			if err != nil || n.Transient != "" || n.Offset < lo || n.Offset >= hi {
				continue
			}
			if err := x.remove(name, kindSwap, "original replaced by a completed swap"); err != nil {
				return err
			}
		}
	}
	for _, n := range valid {
		from := n.String()
		live := filenames.Name{Offset: n.Offset, Kind: n.Kind}.String()
		c := Change{File: from, Action: ActionRename, Kind: kindSwap, To: live, Reason: "replacement completed (as Kafka completes it on load)"}
		p := x.files[from]
		delete(x.files, from)
		if x.o.DryRun {
			x.r.change(c)
			x.files[live] = p
			continue
		}
		if x.o.Quarantine != "" {
			dst, err := x.quarantinePath(from)
			if err != nil {
				return err
			}
			if err := x.copyFile(p, dst, 0, -1); err != nil {
				return err
			}
			c.Saved = filepath.Base(dst)
		}
		target := filepath.Join(x.dir, live)
		if err := os.Rename(p, target); err != nil {
			return fmt.Errorf("partlog/recovery: finish swap %s: %w", p, err)
		}
		x.r.change(c)
		x.files[live] = target
		x.dirDirty = true
	}
	for _, n := range valid {
		if n.Kind == filenames.Log {
			x.swapped[n.Offset] = true
		}
	}
	return nil
}

// sortedNames returns the names of the directory's files, sorted.
func (x *run) sortedNames() []string {
	names := make([]string, 0, len(x.files))
	for name := range x.files {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
