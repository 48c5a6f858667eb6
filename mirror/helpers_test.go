package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/internal/testutil"
)

// logOptions are small segments without prefaulting, so that tests copy
// directories quickly.
func logOptions() *partlog.Options {
	return &partlog.Options{SegmentBytes: 64 << 10, MaxIndexBytes: 4096, PrefaultBytes: -1}
}

// openLog opens (or creates) a log in dir and, at the end of the test,
// closes it (a second Close is harmless) and runs partlog's consistency
// check on the directory.
func openLog(t testing.TB, dir string) *partlog.Log {
	t.Helper()
	l, err := partlog.Open(dir, logOptions())
	if err != nil {
		t.Fatalf("open log %s: %v", dir, err)
	}
	t.Cleanup(func() {
		_ = l.Close()
		if err := partlog.Check(dir, logOptions()); err != nil {
			t.Errorf("consistency check of %s: %v", dir, err)
		}
	})
	return l
}

func openPartition(t testing.TB, l *partlog.Log, opts Options) *Partition {
	t.Helper()
	p, err := Open(l, opts)
	if err != nil {
		t.Fatalf("mirror.Open: %v", err)
	}
	return p
}

// newPartition opens a fresh log and a mirror Partition on it.
func newPartition(t testing.TB) *Partition {
	t.Helper()
	return openPartition(t, openLog(t, filepath.Join(t.TempDir(), "t-0")), Options{})
}

// dataBatch builds a client batch of n records for pid (pid -1: plain).
func dataBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, txn bool, comp batch.Compression) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	spec.Compression = comp
	spec.Transactional = txn
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
	}
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: time.Now().UnixMilli() + int64(i), Key: []byte(fmt.Sprintf("k%d", i)),
			Value: bytes.Repeat([]byte{byte('a' + i%26)}, 40)}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func marker(pid int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	return batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: time.Now().UnixMilli(),
		ProducerID: pid, ProducerEpoch: epoch}, commit, coordinatorEpoch)
}

// cluster is one partition of a simulated cluster: a Log (wrapped in a
// mirror Partition) and its leader epoch.
type cluster struct {
	t     testing.TB
	id    string
	p     *Partition
	epoch int32
}

func newCluster(t testing.TB, id string, epoch int32) *cluster {
	t.Helper()
	l := openLog(t, filepath.Join(t.TempDir(), id, "t-0"))
	return &cluster{t: t, id: id, p: openPartition(t, l, Options{LeaderEpoch: epoch}), epoch: epoch}
}

func (c *cluster) log() *partlog.Log { return c.p.Log() }

// produce appends a client batch at the cluster's epoch and advances the
// high watermark (one replica).
func (c *cluster) produce(pid int64, epoch int16, seq int32, n int, txn bool) partlog.AppendInfo {
	c.t.Helper()
	info, err := c.p.AppendClient(dataBatch(c.t, pid, epoch, seq, n, txn, batch.CompressionNone), c.epoch)
	if err != nil {
		c.t.Fatalf("%s: produce pid %d seq %d: %v", c.id, pid, seq, err)
	}
	c.log().SetHighWatermark(c.log().LogEndOffset())
	return info
}

func (c *cluster) endTxn(pid int64, epoch int16, commit bool) {
	c.t.Helper()
	if _, err := c.p.AppendCoordinator(marker(pid, epoch, commit, 0), c.epoch); err != nil {
		c.t.Fatalf("%s: marker for %d: %v", c.id, pid, err)
	}
	c.log().SetHighWatermark(c.log().LogEndOffset())
}

// readAll copies the bytes of [from, LEO) of l.
func readAll(t testing.TB, l *partlog.Log, from int64) []byte {
	t.Helper()
	var out []byte
	for off := from; off < l.LogEndOffset(); {
		v, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if len(v.Records) == 0 {
			v.Release()
			break
		}
		out = append(out, v.Records...)
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			off = b.NextOffset()
		}
		v.Release()
	}
	return out
}

// batches lists the batches of l as copies.
func batches(t testing.TB, l *partlog.Log) []batch.View {
	t.Helper()
	data := readAll(t, l, l.LogStartOffset())
	var out []batch.View
	it := batch.NewIterator(data, 0)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		out = append(out, b)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func barrierOffsets(t testing.TB, l *partlog.Log) []int64 {
	t.Helper()
	var out []int64
	for _, b := range batches(t, l) {
		if b.IsBarrier() {
			out = append(out, b.BaseOffset())
		}
	}
	return out
}

// pump mirrors src into dst until dst's log end reaches src's high
// watermark, delivering at most maxBytes per fetch. It retries once after
// ErrEpochFenced.
func pump(t testing.TB, dst *Partition, session SessionID, src *partlog.Log) {
	t.Helper()
	for dst.Log().LogEndOffset() < src.HighWatermark() {
		v, err := src.Read(dst.Log().LogEndOffset(), 300, src.HighWatermark())
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		chunk := bytes.Clone(v.Records)
		v.Release()
		if len(chunk) == 0 {
			t.Fatal("fetch returned nothing below the high watermark")
		}
		_, err = dst.AppendMirror(session, chunk)
		if errors.Is(err, ErrEpochFenced) {
			_, err = dst.AppendMirror(session, chunk)
		}
		if err != nil {
			t.Fatalf("mirror append: %v", err)
		}
	}
}

func pids(es []partlog.ProducerEntry) map[int64]partlog.ProducerEntry {
	m := map[int64]partlog.ProducerEntry{}
	for _, e := range es {
		m[e.ProducerID] = e
	}
	return m
}

// syncedImage copies l's directory and zeroes everything past the
// recovery point: the image a power failure leaves when nothing unsynced
// reached the disk. mirror.checkpoint and the leader-epoch checkpoint are
// written durably, so they are copied as they are.
func syncedImage(t testing.TB, l *partlog.Log, dst string) {
	t.Helper()
	testutil.CopyTree(t, l.Dir(), dst)
	rp, leo := l.RecoveryPoint(), l.LogEndOffset()
	if rp >= leo {
		return
	}
	v, err := l.Read(rp, 1, leo)
	if err != nil {
		t.Fatal(err)
	}
	base, pos := v.SegmentBaseOffset, v.Position
	v.Release()
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var off int64
		var ext string
		if n, _ := fmt.Sscanf(e.Name(), "%020d.%s", &off, &ext); n != 2 {
			continue
		}
		path := filepath.Join(dst, e.Name())
		switch {
		case off > base && ext != "snapshot":
			_ = os.Remove(path)
		case off == base && ext == "log":
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			clear(data[pos:])
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// flushedDisk keeps, for every log directory, its segment files (.log and
// indexes) as the log's last successful flush left them, through the
// testhook.LogFlushed hook: what a power failure leaves, since a
// truncation, an append or a new segment reaches the disk only with a
// flush (snapshots and checkpoints are written durably on their own).
type flushedDisk struct {
	mu    sync.Mutex
	files map[string]map[string][]byte // directory → name → content
}

// trackFlushes installs the flush hook for the rest of the test.
func trackFlushes(t testing.TB) *flushedDisk {
	t.Helper()
	d := &flushedDisk{files: map[string]map[string][]byte{}}
	fn := func(dir string) {
		files := map[string][]byte{}
		entries, err := os.ReadDir(dir)
		for _, e := range entries {
			if isSegmentFile(e.Name()) {
				b, rerr := os.ReadFile(filepath.Join(dir, e.Name()))
				if rerr != nil {
					err = rerr
					break
				}
				files[e.Name()] = b
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if err != nil {
			d.files[dir] = nil // unknown: image fails
			return
		}
		d.files[dir] = files
	}
	if !testhook.LogFlushed.CompareAndSwap(nil, &fn) {
		t.Fatal("testhook.LogFlushed is already set")
	}
	t.Cleanup(func() { testhook.LogFlushed.Store(nil) })
	return d
}

// isSegmentFile reports whether name is a segment's .log or index.
func isSegmentFile(name string) bool {
	var off int64
	var ext string
	if n, _ := fmt.Sscanf(name, "%020d.%s", &off, &ext); n != 2 {
		return false
	}
	switch ext {
	case "log", "index", "timeindex", "txnindex":
		return true
	}
	return false
}

// image writes into dst the directory src as a power failure would leave
// it: its files as they are, except that every segment file is as the
// last flush of src left it (removed if it did not exist then, restored
// if it was deleted since).
func (d *flushedDisk) image(t testing.TB, src, dst string) {
	t.Helper()
	d.mu.Lock()
	durable, ok := d.files[src]
	d.mu.Unlock()
	if ok && durable == nil {
		t.Fatalf("the flush hook could not read %s", src)
	}
	testutil.CopyTree(t, src, dst)
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, keep := durable[e.Name()]; isSegmentFile(e.Name()) && !keep {
			if err := os.Remove(filepath.Join(dst, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range durable {
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mustState fails unless p is in state s.
func mustState(t testing.TB, p *Partition, s State) {
	t.Helper()
	if got := p.State(); got != s {
		t.Fatalf("state %s, want %s (failure: %v)", got, s, p.Failure())
	}
}

var bg = context.Background()
