package partlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/producerstate"
)

// The crash harness child: TestCrashKill re-executes the test binary with
// these variables set and -test.run=^TestCrashChild$. The child opens the
// directory (unclean, so recovery runs), appends a mixed workload, flushes
// every few appends and records each acknowledged flush in the ack file,
// until the parent kills it with SIGKILL.
const (
	envCrashDir  = "PARTLOG_CRASH_CHILD"
	envCrashAcks = "PARTLOG_CRASH_ACKS"
	envCrashSeed = "PARTLOG_CRASH_SEED"

	// crashChildBytes bounds what one child life appends, so 100
	// iterations keep the directory small enough to recover quickly.
	crashChildBytes = 256 << 10
	// crashChildLife makes an orphaned child exit on its own.
	crashChildLife = 30 * time.Second
)

// TestCrashChild is the body of the child process; run directly it skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("crash harness child: started by TestCrashKill")
	}
	seed, err := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	if err != nil {
		t.Fatalf("bad %s: %v", envCrashSeed, err)
	}
	// Tell the parent the process is up (fd 3, its ExtraFiles[0]): the
	// kill delay runs from here, not from the (slow, under -race) exec.
	ready := os.NewFile(3, "ready")
	if _, err := ready.Write([]byte{1}); err != nil {
		t.Fatalf("signal the parent: %v", err)
	}
	_ = ready.Close()
	if err := runCrashChild(dir, os.Getenv(envCrashAcks), seed); err != nil {
		t.Fatalf("crash child (seed %d): %v", seed, err)
	}
}

// runCrashChild appends and flushes until it is killed (or its life
// ends). After every successful Flush or Sync it appends an ack line
// (offset = LogEndOffset at the flush, digest of every batch below it,
// recovery point) to acks, fsynced.
func runCrashChild(dir, acks string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	last, found, err := readLastAck(acks)
	if err != nil {
		return err
	}
	opts := crashOptions(nil)
	opts.RecoveryPoint = last.rp
	if rng.IntN(2) == 0 {
		opts.PrefaultBytes = 16 << 10
	}
	l, err := Open(dir, opts)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	// Resume the digest from the last ack (the parent checked that
	// everything below it is intact), or compute it from the start.
	at, digest := l.LogStartOffset(), uint32(0)
	if found && last.offset <= l.LogEndOffset() {
		at, digest = last.offset, last.digest
	}
	w := newCrashWorkload(l, rng)
	if rng.IntN(3) == 0 {
		w.epoch++
	}
	flushEvery := 1 + rng.IntN(6)
	deadline := time.Now().Add(crashChildLife)
	for time.Now().Before(deadline) {
		if w.bytes > crashChildBytes {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		for range flushEvery {
			if err := w.step(true); err != nil {
				return err
			}
		}
		off := l.LogEndOffset()
		if rng.IntN(3) == 0 {
			err = syncFromMany(l, off, 1+rng.IntN(4))
		} else {
			err = l.Flush()
		}
		if err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if digest, err = crashDigest(l, at, off, digest); err != nil {
			return err
		}
		at = off
		if err := appendAck(acks, ackRecord{offset: off, digest: digest, rp: l.RecoveryPoint()}); err != nil {
			return err
		}
	}
	return l.Close()
}

// syncFromMany calls l.Sync(off) from n goroutines at once (they share
// group-commit flushes, one leading, the others joining or waiting behind
// it) and returns the first error.
func syncFromMany(l *Log, off int64, n int) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- l.Sync(context.Background(), off) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Producer ids of the workload: idempotent-only and transactional ones.
var (
	crashIdemPIDs = []int64{1001, 1002, 1003}
	crashTxnPIDs  = []int64{2001, 2002}
)

// crashWorkload appends a random mix to a log: plain batches (sometimes
// compressed, sometimes several per append), idempotent producers whose
// sequences continue from the log's producer state (with the odd retry of
// the last batch, which must be refused as a duplicate), transactional
// producers with COMMIT/ABORT markers through AppendAsCoordinator, the
// odd MIRROR_PID_RESET barrier, leader epoch bumps and rolls.
type crashWorkload struct {
	l     *Log
	rng   *rand.Rand
	epoch int32
	b     batch.Builder
	last  map[int64]crashSent
	bytes int64
}

// crashSent is the last single-batch append of an idempotent producer.
type crashSent struct {
	epoch   int16
	lastSeq int32
	records []byte
}

func newCrashWorkload(l *Log, rng *rand.Rand) *crashWorkload {
	w := &crashWorkload{l: l, rng: rng, last: map[int64]crashSent{}}
	if e := l.LeaderEpochs(); len(e) > 0 {
		w.epoch = e[len(e)-1].Epoch
	}
	return w
}

var crashCodecs = []batch.Compression{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}

// batch appends one data batch of 1–8 records to dst.
func (w *crashWorkload) batch(dst []byte, spec batch.BatchSpec) ([]byte, int32, error) {
	n := 1 + w.rng.IntN(8)
	if w.rng.IntN(4) == 0 {
		spec.Compression = crashCodecs[w.rng.IntN(len(crashCodecs))]
	}
	ts := time.Now().UnixMilli()
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		val := make([]byte, w.rng.IntN(200))
		for j := range val {
			val[j] = byte('a' + (i+j)%26)
		}
		recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte("k" + strconv.Itoa(i)), Value: val}
	}
	out, err := w.b.AppendBatch(dst, &spec, recs)
	return out, int32(n), err
}

// step performs one random operation.
func (w *crashWorkload) step(allowRoll bool) error {
	if w.rng.IntN(200) == 0 {
		w.epoch++
	}
	switch r := w.rng.IntN(100); {
	case r < 2 && allowRoll:
		return w.l.Roll()
	case r < 4:
		return w.barrier()
	case r < 30:
		return w.plain()
	case r < 60:
		return w.idempotent()
	default:
		return w.transactional()
	}
}

func (w *crashWorkload) appendLeader(records []byte) error {
	if _, err := w.l.AppendAsLeader(records, w.epoch); err != nil {
		return fmt.Errorf("append as leader: %w", err)
	}
	w.bytes += int64(len(records))
	return nil
}

func (w *crashWorkload) appendCoordinator(records []byte) error {
	if _, err := w.l.AppendAsCoordinator(records, w.epoch); err != nil {
		return fmt.Errorf("append as coordinator: %w", err)
	}
	w.bytes += int64(len(records))
	return nil
}

func (w *crashWorkload) plain() error {
	var buf []byte
	for range 1 + w.rng.IntN(3) {
		var err error
		if buf, _, err = w.batch(buf, batch.NewBatchSpec(0)); err != nil {
			return err
		}
	}
	return w.appendLeader(buf)
}

func (w *crashWorkload) barrier() error {
	// A barrier is refused while a transaction is open (§6.8 R2): decide
	// the open ones first, as the mirroring control plane would.
	for _, pid := range crashTxnPIDs {
		if e, ok := w.l.ProducerState(pid); ok && e.CurrentTxnFirstOffset >= 0 {
			if err := w.marker(pid, e, e.ProducerEpoch); err != nil {
				return err
			}
		}
	}
	buf := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: batch.NoLeaderEpoch,
		Timestamp: time.Now().UnixMilli()}, "crash-source")
	if w.rng.IntN(2) == 0 {
		// A second barrier in the same append. Its incoming base offset
		// must be above the first's although both are reassigned
		// (TestCoordinatorAssignsEveryBatchItsOffsets).
		next := batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: batch.NoLeaderEpoch,
			Timestamp: time.Now().UnixMilli()}, "crash-source")
		batch.View(next).SetBaseOffset(1)
		buf = append(buf, next...)
	}
	return w.appendCoordinator(buf)
}

// next returns the producer epoch and sequence a producer continues with.
func (w *crashWorkload) next(pid int64) (producerstate.Entry, bool, int16, int32) {
	e, ok := w.l.ProducerState(pid)
	if !ok || e.ProducerEpoch < 0 {
		return e, ok, 0, 0
	}
	return e, ok, e.ProducerEpoch, e.LastSequence + 1
}

func (w *crashWorkload) idempotent() error {
	pid := crashIdemPIDs[w.rng.IntN(len(crashIdemPIDs))]
	e, ok, epoch, seq := w.next(pid)
	if s, have := w.last[pid]; have && ok && e.ProducerEpoch == s.epoch && e.LastSequence == s.lastSeq && w.rng.IntN(8) == 0 {
		// A client retry of the last batch: refused, nothing written.
		leo := w.l.LogEndOffset()
		_, err := w.l.AppendAsLeader(s.records, w.epoch)
		if !errors.Is(err, producerstate.ErrDuplicateSequence) {
			return fmt.Errorf("retry of pid %d seq %d: got %v, want a duplicate", pid, s.lastSeq, err)
		}
		if w.l.LogEndOffset() != leo {
			return fmt.Errorf("duplicate retry moved the log end from %d to %d", leo, w.l.LogEndOffset())
		}
		return nil
	}
	if w.rng.IntN(20) == 0 {
		epoch, seq = epoch+1, 0 // a producer epoch bump
	}
	var buf []byte
	k := 1 + w.rng.IntN(2)
	for range k {
		spec := batch.NewBatchSpec(0)
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
		var n int32
		var err error
		if buf, n, err = w.batch(buf, spec); err != nil {
			return err
		}
		seq += n
	}
	if err := w.appendLeader(buf); err != nil {
		return err
	}
	if k == 1 {
		w.last[pid] = crashSent{epoch: epoch, lastSeq: seq - 1, records: buf}
	} else {
		delete(w.last, pid)
	}
	return nil
}

func (w *crashWorkload) transactional() error {
	pid := crashTxnPIDs[w.rng.IntN(len(crashTxnPIDs))]
	e, ok, epoch, seq := w.next(pid)
	open := ok && e.CurrentTxnFirstOffset >= 0
	if open && w.rng.IntN(5) < 2 {
		return w.marker(pid, e, epoch)
	}
	if !open && w.rng.IntN(20) == 0 {
		epoch, seq = epoch+1, 0
	}
	spec := batch.NewBatchSpec(0)
	spec.Transactional = true
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
	buf, _, err := w.batch(nil, spec)
	if err != nil {
		return err
	}
	return w.appendLeader(buf)
}

// marker appends a COMMIT or ABORT for pid's open transaction.
func (w *crashWorkload) marker(pid int64, e producerstate.Entry, epoch int16) error {
	ce := max(e.CoordinatorEpoch, 0)
	if w.rng.IntN(10) == 0 {
		ce++
	}
	marker := batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: batch.NoLeaderEpoch,
		Timestamp: time.Now().UnixMilli(), ProducerID: pid, ProducerEpoch: epoch}, w.rng.IntN(5) < 3, ce)
	return w.appendCoordinator(marker)
}
