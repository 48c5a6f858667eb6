package recovery

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
)

// epochFileName is the partition's leader-epoch checkpoint.
const epochFileName = "leader-epoch-checkpoint"

// epochListing is what the directory listing said of epochFileName.
type epochListing uint8

const (
	epochUnknown epochListing = iota // look at the file (a link, another entry, no listing yet)
	epochAbsent                      // not listed
	epochListed                      // listed as a regular file
)

// epochs is step 7 (recovery.md §2.13): load the checkpoint (a malformed
// or missing one is rebuilt from the batch headers), add the epochs first
// seen in recovered segments, drop entries at or above the LEO, collapse
// entries at or below the log start, and rewrite the file if that changed
// it.
func (x *run) epochs(kept []*seg, leo, logStart int64, wiped bool) error {
	path := filepath.Join(x.dir, epochFileName)
	if x.o.hooks != nil && x.o.hooks.open != nil {
		if err := x.o.hooks.open(path); err != nil {
			return fmt.Errorf("partlog/recovery: read %s: %w", path, err)
		}
	}
	var onDisk []checkpoint.EpochEntry
	var err error
	missing := x.epochFile == epochAbsent
	if x.epochFile == epochUnknown {
		_, statErr := os.Stat(path)
		missing = os.IsNotExist(statErr)
	}
	if !missing {
		onDisk, err = checkpoint.ReadLeaderEpochs(path)
	}
	rebuild := missing
	if err != nil {
		if !checkpoint.IsCorrupt(err) {
			return fmt.Errorf("partlog/recovery: %w", err)
		}
		x.r.problem(epochFileName, -1, kindEpochCheckpoint, "malformed (%v); rebuilt from the batch headers", err)
		rebuild = true
		onDisk = nil
	}
	// A leader epoch decreases somewhere in the data (kept, as Kafka
	// keeps it): the list is computed from every batch header so that its
	// entries never name an epoch above a later batch's (envelope).
	fromHeaders := rebuild || x.epochDrops
	var list []checkpoint.EpochEntry
	add := func(e int32, start int64) {
		if e < 0 {
			return
		}
		// Keep the list monotonic: a new entry removes every entry whose
		// epoch or start offset is not below it.
		for len(list) > 0 && (list[len(list)-1].Epoch >= e || list[len(list)-1].StartOffset >= start) {
			list = list[:len(list)-1]
		}
		list = append(list, checkpoint.EpochEntry{Epoch: e, StartOffset: start})
	}
	if !fromHeaders {
		for _, e := range onDisk {
			add(e.Epoch, e.StartOffset)
		}
	}
	for _, s := range kept {
		if s.created || s.keepEnd == 0 || (!fromHeaders && !s.recover) {
			continue
		}
		if s.scan != nil && s.keepEnd <= s.scan.validEnd && !x.epochDrops {
			// The scan listed the batches whose epoch rises above every
			// earlier one of the segment: no other batch can pass the
			// test below, whose bound only grows with the segment's
			// running maximum.
			for _, e := range s.scan.epochs {
				if e.pos >= s.keepEnd {
					break
				}
				if len(list) == 0 || e.epoch > list[len(list)-1].Epoch {
					add(e.epoch, e.start)
				}
			}
			continue
		}
		mp, done, err := x.mapSeg(s)
		if err != nil {
			return err
		}
		end := s.keepEnd
		if s.flushedDamage {
			end = s.scan.validEnd // whole batches only
		}
		ferr := guard(s.logPath, func() {
			walkHeaders(mp.data[:end], func(v headerView) {
				e := v.epoch()
				if x.epochDrops {
					list = envelope(list, e, v.baseOffset())
					return
				}
				if e >= 0 && (len(list) == 0 || e > list[len(list)-1].Epoch) {
					add(e, v.baseOffset())
				}
			})
		})
		done()
		if ferr != nil {
			return ferr
		}
	}
	// Entries at or above the LEO go (G7); entries at or below the log
	// start collapse into one at the log start.
	list = slices.DeleteFunc(list, func(e checkpoint.EpochEntry) bool { return e.StartOffset >= leo })
	if wiped {
		list = nil
	}
	if n := len(list); n > 0 && logStart > 0 {
		k := 0
		for k+1 < n && list[k+1].StartOffset <= logStart {
			k++
		}
		if list[k].StartOffset < logStart {
			list[k].StartOffset = logStart
		}
		list = list[k:]
		// An entry moved up to a log start that is also the LEO names no
		// data; dropping it makes an interrupted wipe (E9) converge.
		list = slices.DeleteFunc(list, func(e checkpoint.EpochEntry) bool { return e.StartOffset >= leo })
	}
	x.epochList = list
	for _, e := range list {
		x.r.Epochs = append(x.r.Epochs, EpochReport{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	if !rebuild && slices.Equal(list, onDisk) {
		return nil
	}
	if missing && len(list) == 0 {
		return nil
	}
	if missing && !wiped {
		x.r.problem(epochFileName, -1, kindEpochCheckpoint, "missing; rebuilt from the batch headers")
	}
	reason := epochChangeReason(onDisk, list, leo, logStart, missing, rebuild)
	return x.rewrite(epochFileName, kindEpochs, reason, func(target string) error {
		if err := checkpoint.WriteLeaderEpochs(target, list); err != nil {
			return fmt.Errorf("partlog/recovery: %w", err)
		}
		return nil
	})
}

// epochChangeReason says how the leader-epoch list written differs from
// the one on disk.
func epochChangeReason(onDisk, list []checkpoint.EpochEntry, leo, logStart int64, missing, rebuild bool) string {
	switch {
	case missing:
		return "leader-epoch-checkpoint missing: rebuilt from the batch headers"
	case rebuild:
		return "leader-epoch-checkpoint malformed: rebuilt from the batch headers"
	}
	var pastEnd, dropped, added []string
	for _, e := range onDisk {
		if slices.Contains(list, e) {
			continue
		}
		entry := fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset)
		if e.StartOffset >= leo {
			pastEnd = append(pastEnd, entry)
		} else {
			dropped = append(dropped, entry)
		}
	}
	for _, e := range list {
		if !slices.Contains(onDisk, e) {
			added = append(added, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
		}
	}
	var parts []string
	if len(pastEnd) > 0 {
		parts = append(parts, fmt.Sprintf("entries %s at or past the log end offset %d dropped, as Kafka's load drops them",
			strings.Join(pastEnd, ", "), leo))
	}
	if len(dropped) > 0 {
		parts = append(parts, fmt.Sprintf("entries %s dropped (below the log start offset %d, or not monotonic)",
			strings.Join(dropped, ", "), logStart))
	}
	if len(added) > 0 {
		parts = append(parts, fmt.Sprintf("entries %s added (from the batch headers of recovered segments, or moved to the log start)", strings.Join(added, ", ")))
	}
	if len(parts) == 0 {
		return "leader epochs rewritten"
	}
	return strings.Join(parts, "; ")
}

// envelope adds a batch of epoch e at base offset start to the epoch list
// of a log whose epochs decrease somewhere: an entry whose epoch is above
// a later batch's is dropped (an isolated spike, a bit flip in the epoch
// field, which the CRC does not cover, or a real decrease), so the cache
// ends at the epoch of the newest data and a leader of any later epoch can
// append. Kafka's own recovery would add the spike and its next leader
// append would remove it again (LeaderEpochFileCache.assign drops entries
// whose epoch is not below the new one); the result is the same list.
func envelope(list []checkpoint.EpochEntry, e int32, start int64) []checkpoint.EpochEntry {
	if e < 0 {
		return list
	}
	for len(list) > 0 && list[len(list)-1].Epoch > e {
		list = list[:len(list)-1]
	}
	if len(list) == 0 || list[len(list)-1].Epoch < e {
		list = append(list, checkpoint.EpochEntry{Epoch: e, StartOffset: start})
	}
	return list
}

// headerView reads the two header fields the epoch rebuild needs.
type headerView batch.View

func (v headerView) epoch() int32      { return batch.View(v).PartitionLeaderEpoch() }
func (v headerView) baseOffset() int64 { return batch.View(v).BaseOffset() }

// walkHeaders calls fn for every batch of a prefix known to hold whole
// batches, reading headers only.
func walkHeaders(prefix []byte, fn func(headerView)) {
	walk(prefix, func(_ int64, v batch.View) bool { fn(headerView(v)); return true })
}
