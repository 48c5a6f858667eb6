package sim

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/producerstate"
)

// Result is what one scenario run under one strategy showed.
type Result struct {
	Topology string
	Strategy Strategy
	// Cases[i] is corruption case i+1 of mirror.md §1.2: 1 a foreign batch
	// with the same producer epoch accepted onto a producer's entry, 2 one
	// with a different (lower or higher) epoch, 3 a marker closing another
	// producer's open transaction.
	Cases [3]bool
	// Lost: a record acknowledged to its producer that a read-committed
	// consumer cannot read where it must be (a false duplicate, or a
	// mirrored range that lacks it). Dup: a read-committed consumer reads
	// a record twice. Phantom: it reads a record that was never committed
	// (aborted or still open) or that the source does not have.
	Lost, Dup, Phantom bool
	// Rejected: a legitimate producer got an error from stale producer
	// state (wrongly fenced, out of order): loud, not silent.
	Rejected bool
	// Clash: two producers stored under one rewritten (negative) id in one
	// log without a barrier between them; the producer state ignores
	// negative ids, so the clash is invisible to it.
	Clash bool
	// Diverged: a byte-copying strategy's mirror does not hold its
	// source's bytes in the mirrored range (mirror.md I1, I2).
	Diverged bool
	// PSMMismatch: a replica's producer state differs from a replay of its
	// own log (mirror.md I4).
	PSMMismatch bool
	// Findings explain every flag, in the order they were found.
	Findings []string
	Steps    []Step
	Barriers []BarrierDump
}

// Step is one step of a scenario: what happened and the state of every
// partition afterwards.
type Step struct {
	Title  string      `json:"title"`
	Events []string    `json:"events,omitempty"`
	Nodes  []NodeState `json:"nodes"`
}

// NodeState is one partition's state after a step.
type NodeState struct {
	Node     string  `json:"node"`
	State    string  `json:"state"`
	LEO      int64   `json:"logEndOffset"`
	LSO      int64   `json:"lastStableOffset"`
	Epoch    int32   `json:"leaderEpoch"`
	PSM      string  `json:"producers"`
	Barriers []int64 `json:"barriers,omitempty"`
}

// Clean reports whether nothing was flagged.
func (r *Result) Clean() bool {
	return !r.Cases[0] && !r.Cases[1] && !r.Cases[2] && !r.Lost && !r.Dup && !r.Phantom && !r.Rejected &&
		!r.Clash && !r.Diverged && !r.PSMMismatch
}

// Label is the table cell: "clean", or the flags, e.g. "corrupt(1,3) lost".
func (r *Result) Label() string {
	var parts []string
	var cs []string
	for i, c := range r.Cases {
		if c {
			cs = append(cs, strconv.Itoa(i+1))
		}
	}
	if len(cs) > 0 {
		parts = append(parts, "corrupt("+strings.Join(cs, ",")+")")
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Lost, "lost"}, {r.Dup, "dup"}, {r.Phantom, "phantom"}, {r.Rejected, "rejected"}, {r.Clash, "clash"}, {r.Diverged, "diverged"}, {r.PSMMismatch, "psm-mismatch"}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, " ")
}

func (r *Result) flag(b *bool, format string, args ...any) {
	*b = true
	s := fmt.Sprintf(format, args...)
	for _, f := range r.Findings {
		if f == s {
			return
		}
	}
	r.Findings = append(r.Findings, s)
}

// Step starts a new step titled title; the previous one is closed (its
// node states recorded and every replica checked).
func (h *Harness) Step(title string) error {
	if err := h.closeStep(); err != nil {
		return err
	}
	h.res.Steps = append(h.res.Steps, Step{Title: title})
	return nil
}

func (h *Harness) note(format string, args ...any) {
	if n := len(h.res.Steps); n > 0 {
		s := &h.res.Steps[n-1]
		s.Events = append(s.Events, fmt.Sprintf(format, args...))
	}
}

func (h *Harness) closeStep() error {
	n := len(h.res.Steps)
	if n == 0 || h.res.Steps[n-1].Nodes != nil {
		return nil
	}
	s := &h.res.Steps[n-1]
	s.Nodes = []NodeState{}
	for _, c := range h.clusters {
		for _, p := range c.sortedParts() {
			if err := h.checkReplica(p); err != nil {
				return err
			}
			st := p.State()
			if c.down {
				st += ", cluster down"
			}
			s.Nodes = append(s.Nodes, NodeState{Node: p.String(), State: st, LEO: p.log.LogEndOffset(),
				LSO: p.log.LastStableOffset(), Epoch: p.epoch, PSM: FormatPSM(p.log.Producers()), Barriers: p.log.Barriers()})
		}
	}
	return nil
}

// FormatPSM renders producer entries compactly: {5: e0 s2, 9: e1 s0 txn@4}.
func FormatPSM(es []producerstate.Entry) string {
	if len(es) == 0 {
		return "∅"
	}
	parts := make([]string, len(es))
	for i, e := range es {
		s := fmt.Sprintf("%d: e%d s%d", e.ProducerID, e.ProducerEpoch, e.LastSequence)
		if e.CurrentTxnFirstOffset >= 0 {
			s += fmt.Sprintf(" txn@%d", e.CurrentTxnFirstOffset)
		}
		parts[i] = s
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// controlType is the type of a control batch's first record.
func controlType(v batch.View) (batch.ControlType, bool) {
	var r batch.Record
	t, _, err := v.ControlRecord(nil, &r)
	return t, err == nil
}

// checkReplica replays p's log into a fresh producer state manager (origin
// Replay, one batch per append, with p's expiration events at their
// positions), compares the result with p's live producer state, and on
// the way looks for the corruption cases: a batch or marker applied to an
// entry that another producer wrote.
func (h *Harness) checkReplica(p *Partition) error {
	m := producerstate.New(producerstate.Config{ProducerIDExpirationMs: expirationMs})
	owner := map[int64]string{}    // pid → producer whose batch the entry last took
	txnOwner := map[int64]string{} // pid → producer whose batch opened the open transaction
	negOwner := map[int64]string{} // rewritten negative pid → producer
	ei := 0
	leo := p.log.LogEndOffset()
	rejected := false // set by Rejected for the batch being replayed
	rb := &producerstate.Rebuild{LogStart: p.log.LogStartOffset(), End: leo}
	rb.Rejected = func(v batch.View, err error) {
		rejected = true
		h.res.flag(&h.res.PSMMismatch, "replay of %s fails at %d: %v", p, v.BaseOffset(), err)
	}
	rb.Batches = func(from int64, yield func(batch.View, *batch.BatchHeader) bool) error {
		return forEachBatch(p.log, from, leo, func(v batch.View, hdr *batch.BatchHeader) error {
			return h.replayChecked(p, m, v, hdr, yield, &rejected, &ei, owner, txnOwner, negOwner)
		})
	}
	if err := m.Rebuild(rb); err != nil {
		return err
	}
	for ; ei < len(p.expiries); ei++ {
		m.RemoveExpired(p.expiries[ei].nowMs)
	}
	m.SetMapEndOffset(leo)
	m.OnHighWatermarkUpdated(p.log.HighWatermark())
	live, replayed := p.log.Producers(), m.Producers()
	if !reflect.DeepEqual(live, replayed) {
		h.res.flag(&h.res.PSMMismatch, "producer state of %s %s differs from the replay of its log %s", p, FormatPSM(live), FormatPSM(replayed))
	}
	if a, b := p.log.LastStableOffset(), m.LastStableOffset(p.log.HighWatermark()); a != b {
		h.res.flag(&h.res.PSMMismatch, "last stable offset of %s is %d, the replay of its log gives %d", p, a, b)
	}
	return nil
}

// replayChecked looks at one batch of p's log for the corruption cases
// before passing it to the rebuild (yield), then records whose batch the
// entry took. ei is the index of p's next expiration event.
func (h *Harness) replayChecked(p *Partition, m *producerstate.Manager, v batch.View, hdr *batch.BatchHeader, yield func(batch.View, *batch.BatchHeader) bool,
	rejected *bool, ei *int, owner, txnOwner, negOwner map[int64]string) error {
	for *ei < len(p.expiries) && p.expiries[*ei].offset <= v.BaseOffset() {
		m.RemoveExpired(p.expiries[*ei].nowMs)
		*ei++
	}
	w := h.owners[v.MaxTimestamp()]
	pid := v.ProducerID()
	barrier := v.IsBarrier()
	var before producerstate.Entry
	had := false
	switch {
	case barrier:
		clear(owner)
		clear(txnOwner)
		clear(negOwner)
	case pid >= 0:
		before, had = m.Producer(pid)
		switch {
		case !had:
		case v.IsControl():
			if t := txnOwner[pid]; before.CurrentTxnFirstOffset >= 0 && t != "" && t != w {
				h.res.flag(&h.res.Cases[2], "case 3 on %s at %d: %s's %s closes %s's transaction open at %d",
					p, v.BaseOffset(), h.ownerName(w), describeBatch(v), h.ownerName(t), before.CurrentTxnFirstOffset)
			}
		case owner[pid] == "" || owner[pid] == w:
		case v.ProducerEpoch() == before.ProducerEpoch:
			h.res.flag(&h.res.Cases[0], "case 1 on %s at %d: %s's %s accepted onto %s's entry {%d: e%d s%d}",
				p, v.BaseOffset(), h.ownerName(w), describeBatch(v), h.ownerName(owner[pid]), pid, before.ProducerEpoch, before.LastSequence)
		default:
			h.res.flag(&h.res.Cases[1], "case 2 on %s at %d: %s's %s accepted onto %s's entry {%d: e%d s%d}",
				p, v.BaseOffset(), h.ownerName(w), describeBatch(v), h.ownerName(owner[pid]), pid, before.ProducerEpoch, before.LastSequence)
		}
	case pid != batch.NoProducerID:
		if o := negOwner[pid]; o != "" && o != w {
			h.res.flag(&h.res.Clash, "clash on %s at %d: %s's %s stored under the id %s's batches have (invisible to the producer state)",
				p, v.BaseOffset(), h.ownerName(w), describeBatch(v), h.ownerName(o))
		}
		negOwner[pid] = w
	}
	*rejected = false
	if !yield(v, hdr) {
		return errStop
	}
	if !*rejected && !barrier && pid >= 0 {
		if !v.IsControl() && v.IsTransactional() && (!had || before.CurrentTxnFirstOffset < 0) {
			txnOwner[pid] = w
		}
		owner[pid] = w
	}
	return nil
}

// ownerName turns a producer key ("B.p1") into its display name ("5(B)").
func (h *Harness) ownerName(key string) string {
	for _, c := range h.clusters {
		if strings.HasPrefix(key, c.Name+".p") {
			n, err := strconv.Atoi(strings.TrimPrefix(key, c.Name+".p"))
			if err == nil {
				return fmt.Sprintf("%d(%s)", FirstPID+int64(n)-1, c.Name)
			}
		}
	}
	if key == "" {
		return "?"
	}
	return key
}

// Consumed is one record a consumer read.
type Consumed struct {
	Offset int64
	ID     string
}

// ReadCommitted is a read_committed consumer of p from its log start: it
// reads up to the last stable offset, drops records of aborted
// transactions (from the aborted-transaction index) and hides control
// batches.
func ReadCommitted(p *Partition) ([]Consumed, error) {
	l := p.log
	start, lso := l.LogStartOffset(), l.LastStableOffset()
	aborted, err := l.AbortedTransactions(start, lso)
	if err != nil {
		return nil, err
	}
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	active := map[int64]bool{}
	var out []Consumed
	ai := 0
	err = forEachBatch(l, start, lso, func(v batch.View, _ *batch.BatchHeader) error {
		for ai < len(aborted) && aborted[ai].FirstOffset <= v.LastOffset() {
			active[aborted[ai].ProducerID] = true
			ai++
		}
		if v.IsControl() {
			if t, ok := controlType(v); ok && t == batch.ControlAbort {
				delete(active, v.ProducerID())
			}
			return nil
		}
		if v.IsTransactional() && active[v.ProducerID()] {
			return nil
		}
		forEachRecord(v, func(off int64, val []byte) { out = append(out, Consumed{off, string(val)}) })
		return nil
	})
	return out, err
}

// ReadUncommitted is a read_uncommitted consumer of p: every data record
// below the high watermark, control batches hidden.
func ReadUncommitted(p *Partition) ([]Consumed, error) {
	var out []Consumed
	err := forEachBatch(p.log, p.log.LogStartOffset(), p.log.HighWatermark(), func(v batch.View, _ *batch.BatchHeader) error {
		if !v.IsControl() {
			forEachRecord(v, func(off int64, val []byte) { out = append(out, Consumed{off, string(val)}) })
		}
		return nil
	})
	return out, err
}

// compareSession checks that dst's read-committed consumer reads exactly
// what src's reads in the mirrored range [from, end).
func (h *Harness) compareSession(s *session, end int64) {
	if s == nil {
		return
	}
	if !h.strategy.Rewrites() {
		a, err1 := rawRange(s.src, s.from, end)
		b, err2 := rawRange(s.dst, s.from, end)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			h.res.flag(&h.res.Diverged, "diverged: %s's bytes of [%d, %d) differ from its source %s's (%v %v)", s.dst, s.from, end, s.src, err1, err2)
		}
	}
	src, err1 := ReadCommitted(s.src)
	dst, err2 := ReadCommitted(s.dst)
	if err1 != nil || err2 != nil {
		h.res.flag(&h.res.PSMMismatch, "consumer error comparing %s and %s: %v %v", s.src, s.dst, err1, err2)
		return
	}
	in := func(cs []Consumed) map[string]int64 {
		m := map[string]int64{}
		for _, c := range cs {
			if c.Offset >= s.from && c.Offset < end {
				m[c.ID] = c.Offset
			}
		}
		return m
	}
	a, b := in(src), in(dst)
	for _, id := range sortedKeys(a) {
		if _, ok := b[id]; !ok {
			h.res.flag(&h.res.Lost, "lost: %s reads %s at %d, its mirror %s does not", s.src, id, a[id], s.dst)
		}
	}
	for _, id := range sortedKeys(b) {
		if _, ok := a[id]; !ok {
			h.res.flag(&h.res.Phantom, "phantom: %s reads %s at %d, its source %s does not", s.dst, id, b[id], s.src)
		}
	}
}

// rawRange returns the bytes of the batches of p in [from, end).
func rawRange(p *Partition, from, end int64) ([]byte, error) {
	var out []byte
	err := forEachBatch(p.log, from, end, func(v batch.View, _ *batch.BatchHeader) error {
		if v.BaseOffset() >= end {
			return errStop
		}
		out = append(out, v...)
		return nil
	})
	return out, err
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Finish lets every running session catch up, compares every running
// session's mirrored range with its source, checks every replica's
// consumers (duplicates, never-committed records) and closes the last
// step. It returns the result.
func (h *Harness) Finish() (*Result, error) {
	if err := h.FetchAll(); err != nil {
		return nil, err
	}
	for _, s := range h.sessions {
		if s.active && !s.src.c.down {
			h.compareSession(s, s.dst.log.LogEndOffset())
		}
	}
	for _, c := range h.clusters {
		for _, p := range c.sortedParts() {
			rc, err := ReadCommitted(p)
			if err != nil {
				return nil, err
			}
			seen := map[string]bool{}
			for _, r := range rc {
				if seen[r.ID] {
					h.res.flag(&h.res.Dup, "dup: a read_committed consumer of %s reads %s twice", p, r.ID)
				}
				seen[r.ID] = true
				rs := h.records[r.ID]
				switch {
				case rs == nil:
					h.res.flag(&h.res.Phantom, "phantom: %s holds unknown record %q", p, r.ID)
				case rs.aborted:
					h.res.flag(&h.res.Phantom, "phantom: a read_committed consumer of %s reads %s of an aborted transaction", p, r.ID)
				case rs.pending:
					h.res.flag(&h.res.Phantom, "phantom: a read_committed consumer of %s reads %s of a transaction never committed", p, r.ID)
				}
			}
			ru, err := ReadUncommitted(p)
			if err != nil {
				return nil, err
			}
			if len(ru) < len(rc) {
				h.res.flag(&h.res.PSMMismatch, "%s: read_uncommitted reads %d records, read_committed %d", p, len(ru), len(rc))
			}
		}
	}
	if err := h.closeStep(); err != nil {
		return nil, err
	}
	return h.res, nil
}
