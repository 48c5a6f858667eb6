package sim

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
	"github.com/partlog/partlog/producerstate"
)

// Simulation constants (mirror.md §4 conventions).
const (
	// FirstPID is where every cluster's PID allocator starts, so the
	// first producer of every cluster gets the same id.
	FirstPID = 5
	// InitialEpoch is the leader epoch of a partition that never mirrored.
	InitialEpoch = 3
	// FenceMargin and FenceIncrement are the prototype's EPOCH_FENCING
	// rule: when the source epoch is above local-3, local := source+10.
	FenceMargin    = 3
	FenceIncrement = 10
	// expirationMs is producer.id.expiration.ms of every simulated log.
	expirationMs = 24 * 60 * 60 * 1000
	// startClock is the first batch timestamp.
	startClock = 1_700_000_000_000
)

// ErrReadOnly is a client or coordinator append to a partition that is
// mirroring (mirror.md I3).
var ErrReadOnly = errors.New("sim: partition is read-only while it mirrors")

// ErrClusterDown is an operation on a cluster that was lost.
var ErrClusterDown = errors.New("sim: cluster is down")

// Harness is one simulated world: clusters with partition logs on disk,
// producers, mirror sessions and the records needed to judge them.
type Harness struct {
	root      string
	strategy  Strategy
	clock     int64 // the last timestamp handed out
	clusters  []*Cluster
	owners    map[int64]string // batch timestamp → writer (producer key or barrier name)
	records   map[string]*recordState
	sessions  []*session
	producers []*Producer
	// keepOpen is the comparison-only stop policy KEEP_OPEN (mirror.md §6):
	// no truncation at stop. The barrier strategy ignores it: a barrier
	// is refused while a transaction is open (ErrOpenTransactions).
	keepOpen bool
	res      *Result
	closed   bool
}

// Cluster is one Kafka cluster: an id, a PID allocator and partitions.
type Cluster struct {
	h        *Harness
	Name     string
	ID       string // 22-character URL-safe base64 of the UUID
	msb, lsb uint64
	nextPID  int64
	serial   int
	down     bool
	skewMs   int64 // added to the clock of this cluster's logs
	parts    map[string]*Partition
}

// Partition is partition 0 of one topic on one cluster (one replica).
type Partition struct {
	c      *Cluster
	Topic  string
	dir    string
	log    *partlog.Log
	epoch  int32 // local leader epoch
	source *Partition
	sess   *session
	// the position of the last stopped session (mirror.md §2.4)
	posSource string
	posEpoch  int32
	posOffset int64
	hasPos    bool
	stopped   bool
	pidmap    *PIDMap
	// mp is the mirror state machine of package mirror (alignment,
	// fetch appends, the crash-safe stop with its barrier, client
	// appends); the barrier strategy runs every partition through it. The
	// comparison strategies need a stop without a barrier, which package
	// mirror refuses to do (I6), so they drive the Log directly.
	mp       *mirror.Partition
	session  mirror.SessionID
	expiries []expiry
}

type expiry struct {
	offset int64 // the log end when producers were expired
	nowMs  int64
}

type session struct {
	src, dst *Partition
	from     int64
	active   bool
}

// recordState follows one record written by a producer.
type recordState struct {
	id       string
	acked    bool // the producer was told it is written (and committed)
	aborted  bool
	pending  bool // in an open transaction
	offset   int64
	producer *Producer
}

// NewHarness creates a world whose partition directories live under root.
func NewHarness(root string, s Strategy) (*Harness, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	h := &Harness{root: root, strategy: s, clock: startClock, owners: map[int64]string{},
		records: map[string]*recordState{}}
	h.res = &Result{Strategy: s}
	return h, nil
}

// Strategy returns the harness's strategy.
func (h *Harness) Strategy() Strategy { return h.strategy }

// Close closes every log.
func (h *Harness) Close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	var errs []error
	for _, c := range h.clusters {
		for _, p := range c.sortedParts() {
			errs = append(errs, p.log.Close())
		}
	}
	return errors.Join(errs...)
}

// regions of the clusters' UUIDs: the bit-field design's cluster hashes of
// mirror.md §1.3 (A=42, B=99, C=17), D=23.
var regions = map[string]uint32{"A": 42, "B": 99, "C": 17, "D": 23}

// Cluster returns (creating) the cluster named name.
func (h *Harness) Cluster(name string) *Cluster {
	for _, c := range h.clusters {
		if c.Name == name {
			return c
		}
	}
	msb := 0x1111111122222222 + uint64(len(h.clusters))<<40
	region, ok := regions[name]
	if !ok {
		region = uint32(len(h.clusters) * 7)
	}
	lsb := msb ^ uint64(region) ^ 0x0F0F0F0F00000000
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], msb)
	binary.BigEndian.PutUint64(raw[8:], lsb)
	c := &Cluster{h: h, Name: name, ID: base64.RawURLEncoding.EncodeToString(raw[:]), msb: msb, lsb: lsb,
		nextPID: FirstPID, parts: map[string]*Partition{}}
	h.clusters = append(h.clusters, c)
	return c
}

func (h *Harness) tick() int64 {
	h.clock++
	return h.clock
}

// Part returns (opening) partition 0 of topic on c.
func (c *Cluster) Part(topic string) *Partition {
	if p, ok := c.parts[topic]; ok {
		return p
	}
	dir := filepath.Join(c.h.root, c.Name, topic+"-0")
	l, err := partlog.Open(dir, c.logOptions())
	if err != nil {
		panic(fmt.Sprintf("sim: open %s: %v", dir, err))
	}
	p := &Partition{c: c, Topic: topic, dir: dir, log: l, epoch: InitialEpoch}
	if c.h.strategy == BitField {
		if p.pidmap, err = LoadPIDMap(dir); err != nil {
			panic(fmt.Sprintf("sim: %v", err))
		}
	}
	if c.h.strategy == Barrier {
		p.mp, err = mirror.Open(l, mirror.Options{LeaderEpoch: InitialEpoch,
			Now: func() time.Time { return time.UnixMilli(c.h.tick()) }})
		if err != nil {
			panic(fmt.Sprintf("sim: mirror.Open %s: %v", dir, err))
		}
	}
	c.parts[topic] = p
	return p
}

func (c *Cluster) logOptions() *partlog.Options {
	return &partlog.Options{
		SegmentBytes:           64 << 10,
		SegmentMs:              -1,
		MaxIndexBytes:          4 << 10,
		PrefaultBytes:          -1,
		ProducerIDExpirationMs: expirationMs,
		Now:                    func() time.Time { return time.UnixMilli(c.h.clock + c.skewMs) },
	}
}

func (c *Cluster) sortedParts() []*Partition {
	names := make([]string, 0, len(c.parts))
	for n := range c.parts {
		names = append(names, n)
	}
	sortStrings(names)
	out := make([]*Partition, len(names))
	for i, n := range names {
		out[i] = c.parts[n]
	}
	return out
}

// Lose takes the cluster down: nothing is fetched from it and its
// producers cannot write, until Recover.
func (c *Cluster) Lose() { c.down = true }

// Recover brings a lost cluster back with its logs as they were.
func (c *Cluster) Recover() { c.down = false }

// Name of a partition: "B t".
func (p *Partition) String() string { return p.c.Name + " " + p.Topic }

// Log returns the partition's log.
func (p *Partition) Log() *partlog.Log { return p.log }

// Epoch returns the local leader epoch.
func (p *Partition) Epoch() int32 { return p.epoch }

// Mirroring reports whether the partition runs a mirror session.
func (p *Partition) Mirroring() bool { return p.source != nil }

// State names the partition's mirror state.
func (p *Partition) State() string {
	switch {
	case p.source != nil:
		return "MIRRORING from " + p.source.c.Name
	case p.stopped:
		return "STOPPED"
	}
	return "writable"
}

// Producer is an idempotent or transactional producer of one cluster.
type Producer struct {
	c             *Cluster
	key           string // unique: "A.p1"
	Name          string // "5(A)"
	PID           int64
	Epoch         int16
	transactional bool
	seq           map[*Partition]int32
	msgs          int
	lastBytes     []byte
	lastPart      *Partition
	lastIDs       []string
	txnPart       *Partition
	txnIDs        []string
}

// Producer creates a producer with the next PID of c's allocator, at
// producer epoch epoch.
func (c *Cluster) Producer(transactional bool, epoch int16) *Producer {
	pid := c.nextPID
	c.nextPID++
	c.serial++
	p := &Producer{c: c, key: c.Name + ".p" + strconv.Itoa(c.serial), Name: fmt.Sprintf("%d(%s)", pid, c.Name),
		PID: pid, Epoch: epoch, transactional: transactional, seq: map[*Partition]int32{}}
	c.h.producers = append(c.h.producers, p)
	return p
}

// Outcome is what a producer was answered.
type Outcome string

// Outcomes of a produce or an end-transaction request.
const (
	OK              Outcome = "ok"
	Duplicate       Outcome = "duplicate"
	OutOfOrder      Outcome = "out-of-order"
	Fenced          Outcome = "fenced"
	InvalidTxnState Outcome = "invalid-txn-state"
	ReadOnly        Outcome = "read-only"
	Down            Outcome = "cluster-down"
)

func classify(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, producerstate.ErrDuplicateSequence):
		return Duplicate
	case errors.Is(err, producerstate.ErrOutOfOrderSequence):
		return OutOfOrder
	case errors.Is(err, producerstate.ErrInvalidProducerEpoch), errors.Is(err, producerstate.ErrTransactionCoordinatorFenced):
		return Fenced
	case errors.Is(err, producerstate.ErrInvalidTxnState):
		return InvalidTxnState
	case errors.Is(err, ErrReadOnly), errors.Is(err, mirror.ErrReadOnly):
		return ReadOnly
	case errors.Is(err, ErrClusterDown):
		return Down
	}
	return Outcome("error: " + err.Error())
}

// Send writes n one-record batches to topic on the producer's cluster and
// returns the outcome of each.
func (pr *Producer) Send(topic string, n int) []Outcome {
	p := pr.c.Part(topic)
	out := make([]Outcome, 0, n)
	for range n {
		out = append(out, pr.sendOne(p))
	}
	return out
}

func (pr *Producer) sendOne(p *Partition) Outcome {
	h := pr.c.h
	pr.msgs++
	id := fmt.Sprintf("%s#%d", pr.key, pr.msgs)
	ts := h.tick()
	h.owners[ts] = pr.key
	spec := batch.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pr.PID, pr.Epoch, pr.seq[p]
	spec.Transactional = pr.transactional
	var b batch.Builder
	records, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Timestamp: ts, Value: []byte(id)}})
	if err != nil {
		panic(err)
	}
	rs := &recordState{id: id, producer: pr}
	h.records[id] = rs
	pr.lastBytes, pr.lastPart, pr.lastIDs = records, p, []string{id}
	o := pr.append(p, records, rs)
	if o == OK || o == Duplicate {
		pr.seq[p]++
		if pr.transactional {
			rs.pending = true
			pr.txnPart = p
			pr.txnIDs = append(pr.txnIDs, id)
		} else {
			rs.acked = true
		}
	}
	h.note("%s %s → %s: %s", pr.Name, describeBatch(records), p, o)
	return o
}

// Retry sends the producer's last batch again, as a producer does when a
// response was lost; a working broker answers it as a duplicate.
func (pr *Producer) Retry() Outcome {
	if pr.lastBytes == nil {
		return OK
	}
	rs := pr.c.h.records[pr.lastIDs[0]]
	o := pr.append(pr.lastPart, pr.lastBytes, rs)
	pr.c.h.note("%s retries %s → %s: %s", pr.Name, describeBatch(pr.lastBytes), pr.lastPart, o)
	return o
}

func (pr *Producer) append(p *Partition, records []byte, rs *recordState) Outcome {
	h := pr.c.h
	if pr.c.down {
		return Down
	}
	if p.source != nil {
		return ReadOnly
	}
	info, err := p.appendClient(records)
	o := classify(err)
	switch o {
	case OK:
		rs.offset = info.FirstOffset
		p.log.SetHighWatermark(p.log.LogEndOffset())
	case Duplicate:
		var de *producerstate.DuplicateSequenceError
		errors.As(err, &de)
		rs.offset = de.FirstOffset
		// A true duplicate finds this very record at the offset given.
		if id, ok := p.recordAt(de.FirstOffset); !ok || id != rs.id {
			h.res.flag(&h.res.Lost, "lost: %s's %s acknowledged as a duplicate of offset %d on %s, which holds %s; nothing stored",
				pr.Name, rs.id, de.FirstOffset, p, orNone(id))
		}
	default:
		if !strings.HasPrefix(string(o), "error") && o != ReadOnly && o != Down {
			h.res.flag(&h.res.Rejected, "rejected: %s's batch on %s: %v", pr.Name, p, err)
		}
	}
	return o
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// Commit ends the producer's transaction with a COMMIT marker (written by
// the cluster's coordinator); Abort with an ABORT marker.
func (pr *Producer) Commit() Outcome { return pr.endTxn(true) }

// Abort ends the producer's transaction with an ABORT marker.
func (pr *Producer) Abort() Outcome { return pr.endTxn(false) }

func (pr *Producer) endTxn(commit bool) Outcome {
	h := pr.c.h
	p := pr.txnPart
	if p == nil {
		return OK
	}
	if pr.c.down {
		return Down
	}
	if p.source != nil {
		return ReadOnly
	}
	ts := h.tick()
	h.owners[ts] = pr.key
	records := batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: p.epoch, Timestamp: ts,
		ProducerID: pr.PID, ProducerEpoch: pr.Epoch}, commit, 0)
	_, err := p.appendCoordinator(records)
	o := classify(err)
	if o == OK {
		p.log.SetHighWatermark(p.log.LogEndOffset())
		for _, id := range pr.txnIDs {
			rs := h.records[id]
			rs.pending = false
			rs.acked, rs.aborted = commit, !commit
		}
		pr.txnIDs, pr.txnPart = nil, nil
	} else {
		h.res.flag(&h.res.Rejected, "rejected: %s's end-transaction marker on %s: %v", pr.Name, p, err)
	}
	word := "ABORT"
	if commit {
		word = "COMMIT"
	}
	h.note("%s %s → %s: %s", pr.Name, word, p, o)
	return o
}

func (p *Partition) appendClient(records []byte) (partlog.AppendInfo, error) {
	if p.mp != nil {
		return p.mp.AppendClient(records, p.epoch)
	}
	return p.log.AppendAsLeader(records, p.epoch)
}

func (p *Partition) appendCoordinator(records []byte) (partlog.AppendInfo, error) {
	if p.mp != nil {
		return p.mp.AppendCoordinator(records, p.epoch)
	}
	return p.log.AppendAsCoordinator(records, p.epoch)
}

// topicID is the simulated topic's id (the same on every cluster, as a
// mirror keeps it).
func topicID(topic string) mirror.TopicID {
	var id mirror.TopicID
	copy(id[:], "topic:"+topic)
	return id
}

// TryClientProduce checks that a client cannot produce to p while p
// mirrors (mirror.md T06): with package mirror a non-idempotent batch is
// sent and must be refused. It returns OK, without writing, when p does
// not mirror.
func (h *Harness) TryClientProduce(p *Partition) Outcome {
	if p.c.down {
		return Down
	}
	if p.source == nil {
		return OK
	}
	var err error = ErrReadOnly
	if p.mp != nil {
		// Package mirror enforces I3 itself: a non-idempotent batch.
		var b batch.Builder
		spec := batch.NewBatchSpec(0)
		records, berr := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Timestamp: h.tick(), Value: []byte("client")}})
		if berr != nil {
			panic(berr)
		}
		if _, err = p.mp.AppendClient(records, p.epoch); err == nil {
			return OK
		}
	}
	o := classify(err)
	h.note("client produce → %s: %s", p, o)
	return o
}

// recordAt returns the identity of the data record at offset, if any.
func (p *Partition) recordAt(offset int64) (string, bool) {
	var id string
	found := false
	_ = forEachBatch(p.log, offset, p.log.LogEndOffset(), func(v batch.View, _ *batch.BatchHeader) error {
		if offset < v.BaseOffset() || offset > v.LastOffset() || v.IsControl() {
			return errStop
		}
		forEachRecord(v, func(off int64, val []byte) {
			if off == offset {
				id, found = string(val), true
			}
		})
		return errStop
	})
	return id, found
}

var errStop = errors.New("stop")

// forEachBatch calls fn for every batch with offsets in [from, upTo),
// with its decoded header. Both are valid only during the call. fn may
// return errStop.
func forEachBatch(l *partlog.Log, from, upTo int64, fn func(v batch.View, h *batch.BatchHeader) error) error {
	off := max(from, l.LogStartOffset())
	for off < upTo {
		rv, err := l.Read(off, 1<<20, upTo)
		if err != nil {
			return err
		}
		if len(rv.Records) == 0 {
			rv.Release()
			return nil
		}
		it := batch.NewIterator(rv.Records, 0)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			if v.LastOffset() < from {
				continue
			}
			if err := fn(v, it.Header()); err != nil {
				rv.Release()
				if err == errStop {
					return nil
				}
				return err
			}
			off = v.NextOffset()
		}
		rv.Release()
	}
	return nil
}

// forEachRecord calls fn with the offset and value of every record of an
// uncompressed data batch.
func forEachRecord(v batch.View, fn func(offset int64, value []byte)) {
	it := v.Records(v.RecordsSection())
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		fn(r.Offset, r.Value)
	}
}

// describeBatch renders a batch compactly: "5 e0 s3", "T 5 e0 s0",
// "ABORT 9 e0", "CB".
func describeBatch(b []byte) string {
	v := batch.View(b)
	if v.IsControl() {
		if t, ok := controlType(v); ok {
			if t == batch.ControlMirrorPidReset {
				return "CB"
			}
			return fmt.Sprintf("%s %d e%d", t, v.ProducerID(), v.ProducerEpoch())
		}
		return "control"
	}
	t := ""
	if v.IsTransactional() {
		t = "T "
	}
	return fmt.Sprintf("%s%d e%d s%d", t, v.ProducerID(), v.ProducerEpoch(), v.BaseSequence())
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
