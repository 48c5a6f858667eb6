package cleaner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/internal/testhook"
)

// Output is a cleaned segment: written as <base>.log.cleaned with its
// .index.cleaned, .timeindex.cleaned and (when it keeps aborted
// transactions) .txnindex.cleaned, then installed by the swap protocol
// (package doc, "Replacing segments"): RenameSwap, the caller's removal of
// the originals, RenameLive.
type Output struct {
	dir  string
	base int64
	log  *os.File
	size int64
	// pending holds built batches not yet written.
	pending []byte
	ib      index.Builder
	kinds   []string // the segment files written
	suffix  string   // their current transient suffix ("" once live)
	// Batches is the number of batches written; LastOffset the last
	// offset of the last one (-1: none).
	Batches    int
	LastOffset int64
}

// writeChunk is how much built output is gathered before a write.
const writeChunk = 1 << 20

func createOutput(dir string, base, interval int64) (*Output, error) {
	o := &Output{dir: dir, base: base, ib: index.NewBuilder(base, interval), suffix: filenames.Cleaned, LastOffset: -1}
	f, err := os.OpenFile(o.path(filenames.Log), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("partlog/cleaner: create %w", err)
	}
	o.log = f
	o.kinds = append(o.kinds, filenames.Log)
	return o, nil
}

// Base is the cleaned segment's base offset (its group's first segment's).
func (o *Output) Base() int64 { return o.base }

// Size is the cleaned .log's size.
func (o *Output) Size() int64 { return o.size + int64(len(o.pending)) }

func (o *Output) path(kind string) string {
	return filepath.Join(o.dir, filenames.Name{Offset: o.base, Kind: kind, Transient: o.suffix}.String())
}

// index accounts for the whole batches of b, which start at position pos.
func (o *Output) index(pos int64, b []byte) {
	w := batch.NewWalker(b)
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		o.ib.Add(pos, v.LastOffset(), v.MaxTimestamp())
		o.Batches++
		o.LastOffset = v.LastOffset()
		pos += int64(len(v))
	}
}

// appendBuilt takes whole batches built in memory.
func (o *Output) appendBuilt(b []byte) error {
	o.index(o.Size(), b)
	o.pending = append(o.pending, b...)
	if len(o.pending) >= writeChunk {
		return o.flushPending()
	}
	return nil
}

// appendRun writes whole batches copied as they are from a segment
// (straight from its mapping).
func (o *Output) appendRun(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := o.flushPending(); err != nil {
		return err
	}
	o.index(o.size, b)
	return o.write(b)
}

func (o *Output) flushPending() error {
	if len(o.pending) == 0 {
		return nil
	}
	err := o.write(o.pending)
	o.pending = o.pending[:0]
	return err
}

func (o *Output) write(b []byte) error {
	if _, err := o.log.Write(b); err != nil {
		return fmt.Errorf("partlog/cleaner: write %s: %w", o.log.Name(), err)
	}
	o.size += int64(len(b))
	return nil
}

// finish writes the indexes and the aborted transactions kept, sets the
// .log's modification time to modified (the replaced segments' last one,
// as Kafka does: time retention and the legacy delete horizon read it)
// and makes every file durable.
func (o *Output) finish(txns []index.AbortedTxn, modified time.Time) error {
	if err := o.flushPending(); err != nil {
		return err
	}
	offsets, times := o.ib.Finish()
	var txn []byte
	for _, t := range txns {
		txn = index.AppendAbortedTxn(txn, t)
	}
	files := []struct {
		kind string
		data []byte
	}{{filenames.Index, offsets}, {filenames.TimeIndex, times}, {filenames.TxnIndex, txn}}
	for _, f := range files {
		if f.kind == filenames.TxnIndex && len(f.data) == 0 {
			continue
		}
		if err := writeSynced(o.path(f.kind), f.data); err != nil {
			return err
		}
		o.kinds = append(o.kinds, f.kind)
	}
	if !modified.IsZero() {
		if err := os.Chtimes(o.path(filenames.Log), modified, modified); err != nil {
			return fmt.Errorf("partlog/cleaner: %w", err)
		}
	}
	if err := o.log.Sync(); err != nil {
		return fmt.Errorf("partlog/cleaner: sync %s: %w", o.log.Name(), err)
	}
	err := o.log.Close()
	o.log = nil
	if err != nil {
		return fmt.Errorf("partlog/cleaner: %w", err)
	}
	return step(o.dir, StepWritten)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("partlog/cleaner: create %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partlog/cleaner: write %s: %w", path, err)
	}
	return nil
}

// rename moves every file of the output from its current suffix to to,
// then fsyncs the directory. Into .swap the .log goes last, out of it
// first: recovery rolls a replacement back while a .cleaned file of it
// remains, completes it from its .log.swap (removing the live files of its
// range, which must then not be this output's own indexes), and renames
// index files left .swap (package doc).
func (o *Output) rename(to string) error {
	order := append([]string(nil), o.kinds[1:]...)
	if to == "" {
		order = append([]string{filenames.Log}, order...)
	} else {
		order = append(order, filenames.Log)
	}
	for _, k := range order {
		from := o.path(k)
		dst := filepath.Join(o.dir, filenames.Name{Offset: o.base, Kind: k, Transient: to}.String())
		if err := os.Rename(from, dst); err != nil {
			return fmt.Errorf("partlog/cleaner: %w", err)
		}
	}
	o.suffix = to
	return fsutil.SyncDir(o.dir)
}

// RenameSwap renames the output's files from .cleaned to .swap and fsyncs
// the directory: from then on a crash completes the replacement (package
// doc). The originals must still be the live segments.
func (o *Output) RenameSwap() error {
	if err := o.rename(filenames.Swap); err != nil {
		return err
	}
	return step(o.dir, StepSwap)
}

// RenameLive renames the output's files from .swap to the live segment
// names and fsyncs the directory. The originals must have been renamed
// away (.deleted) and that rename made durable first.
func (o *Output) RenameLive() error {
	if err := o.rename(""); err != nil {
		return err
	}
	return step(o.dir, StepLive)
}

// Remove deletes the output's files while they are still .cleaned (an
// abandoned cleaning). Once renamed .swap they are the replacement's, and
// only recovery decides their fate.
func (o *Output) Remove() error {
	var errs []error
	if o.log != nil {
		errs = append(errs, o.log.Close())
		o.log = nil
	}
	if o.suffix != filenames.Cleaned {
		return errors.Join(errs...)
	}
	for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex} {
		if err := os.Remove(o.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Steps of a cleaning that a crash test stops at (testhook.CleanStep).
const (
	// StepWritten: a cleaned segment's .cleaned files are durable.
	StepWritten = "cleaned-written"
	// StepSwap: they are renamed .swap, durably.
	StepSwap = "swap-renamed"
	// StepOriginalsGone: the replaced segments are renamed .deleted,
	// durably (reported by the log that installs the output).
	StepOriginalsGone = "originals-deleted"
	// StepLive: the .swap files carry the live names, durably.
	StepLive = "live-renamed"
)

// step reports a durable step of a cleaning to a crash test.
func step(dir, name string) error {
	if f := testhook.CleanStep.Load(); f != nil {
		return (*f)(dir, name)
	}
	return nil
}

// Step reports a durable step taken outside this package (the log's part
// of an installation) to a crash test.
func Step(dir, name string) error { return step(dir, name) }
