package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testhook"
)

// removeFiles removes the segment's four files where they exist.
func (s *Segment) removeFiles() error {
	for _, kind := range []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex} {
		if err := removeRegular(s.Path(kind)); err != nil {
			return fmt.Errorf("partlog/segment: create segment %d: %w", s.base, err)
		}
	}
	return nil
}

// removeRegular removes path if it is a regular file; a missing one is
// fine, and any other entry (a link, a directory) is left alone and is an
// error: a segment is never made over it.
func removeRegular(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Seal finishes the active segment (a roll or a close): final time-index
// entry, both indexes trimmed to their entries, the .log cut to its data
// and synced, the writable mapping released. Readers keep their views.
func (s *Segment) Seal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active {
		return nil
	}
	errs := []error{s.stopPrefault()}
	if s.maxTimestamp != batch.NoTimestamp {
		if _, err := s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, true); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.offsetIndex.Trim(), s.timeIndex.Trim())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The trim is made durable by the next Flush (which fdatasyncs the
	// file, persisting its length), before the recovery point passes
	// this segment; syncing a whole segment here would stall the append
	// that triggered the roll. (When the recovery point has passed the
	// data already, the log flushes the sealed segment at once: see
	// Log.rollLocked.)
	if err := s.log.Truncate(s.size.Load()); err != nil {
		return err
	}
	errs = errs[:0]
	s.synced.sealedTxn = s.txnIndex.FileSize() != s.synced.txnBytes
	errs = append(errs, s.log.Close(), s.timeIndex.Close(), s.txnIndex.Close())
	s.log, s.timeIndex, s.txnIndex = nil, nil, nil
	s.dropMapped()
	s.active = false
	// The offset index stays open (trimmed, writable mapping) for lookups;
	// reopen it read-only so a stray store cannot reach it.
	errs = append(errs, s.offsetIndex.Close())
	s.offsetIndex = nil
	return errors.Join(errs...)
}

// Close seals an active segment and releases every file. Readers keep
// their views until they release them.
func (s *Segment) Close() error {
	wasActive := s.Active()
	err := s.Seal()
	s.mu.Lock()
	defer s.mu.Unlock()
	if wasActive && err == nil {
		// Persist the trimmed length before the files are let go.
		err = s.syncSealed()
	}
	if s.closed {
		return err
	}
	s.closed = true
	return errors.Join(err, s.closeFiles())
}

// Discard closes the segment's files without sealing, trimming or
// syncing them: for a segment whose directory is being deleted, where
// Close's trim and fsync would be work for files no one reads again.
// Readers' mappings stay valid until released, as with Close.
func (s *Segment) Discard() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeFiles()
}

// closeFiles closes whatever is open. Caller holds mu.
func (s *Segment) closeFiles() error {
	var errs []error
	errs = append(errs, s.stopPrefault())
	s.dropMapped()
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.log = nil
	}
	if s.offsetIndex != nil {
		errs = append(errs, s.offsetIndex.Close())
		s.offsetIndex = nil
	}
	if s.timeIndex != nil {
		errs = append(errs, s.timeIndex.Close())
		s.timeIndex = nil
	}
	if s.txnIndex != nil {
		errs = append(errs, s.txnIndex.Close())
		s.txnIndex = nil
	}
	return errors.Join(errs...)
}

// Flush makes what recovery cannot rebuild of the segment durable: the
// .log bytes and length (fdatasync), then the transaction index if it
// changed. The offset and time indexes of the active segment are not
// synced: the recovery point a Flush establishes lies inside (or at the
// end of) the active segment, recovery after a crash rescans the segment
// holding the recovery point and rebuilds its indexes from the .log, and a
// clean shutdown trims and syncs them (Seal). Each index fdatasync costs
// about as much as the .log's, so this halves or thirds the cost of a
// durable append. A sealed segment's indexes were synced by their trim;
// its .log is synced through a fresh descriptor.
func (s *Segment) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.active {
		return s.syncSealed()
	}
	if err := s.log.Sync(0, s.size.Load()); err != nil {
		return err
	}
	// The transaction index costs an fdatasync of its own: sync it only
	// when it changed.
	if n := s.txnIndex.FileSize(); n != s.synced.txnBytes {
		if err := s.txnIndex.Sync(); err != nil {
			return err
		}
		s.synced.txnBytes = n
	}
	return nil
}

// syncSealed syncs a sealed segment's .log (its data and trimmed
// length) and, when Seal left entries unsynced, its transaction index:
// once the recovery point passes the segment, recovery no longer
// rebuilds that index, and an ABORT's entry lost there would show
// aborted records to read_committed consumers. Caller holds mu.
func (s *Segment) syncSealed() error {
	if err := syncFile(s.Path(filenames.Log), false); err != nil {
		return err
	}
	if s.synced.sealedTxn {
		if err := syncFile(s.Path(filenames.TxnIndex), true); err != nil {
			return err
		}
		s.synced.sealedTxn = false
	}
	return nil
}

// syncFile fdatasyncs (or fsyncs) the file at path.
func syncFile(path string, missingOK bool) error {
	f, err := os.Open(path)
	if err != nil {
		if missingOK && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	err = f.Sync()
	if h := testhook.Synced.Load(); h != nil && err == nil {
		(*h)(path)
	}
	return errors.Join(err, f.Close())
}

// Delete renames the segment's files to .deleted, closes them and removes
// them. Readers keep their views: an unlinked file stays readable through
// its mapping until the last reference goes. The caller fsyncs the
// directory.
func (s *Segment) Delete() error {
	paths, err := s.RenameDeleted()
	for _, p := range paths {
		err = errors.Join(err, os.Remove(p))
	}
	return err
}
