package cleaner

import (
	"container/heap"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
)

// txnTracker follows transactions through a pass over the log, in offset
// order (Kafka's CleanedTransactionMetadata): it says which data batches
// belong to aborted transactions (removed whatever their keys) and which
// transaction markers may go (a marker stays while any batch of its
// transaction is still in the log), and collects the aborted transactions
// whose ABORT marker the cleaned segment keeps, for its .txnindex.
//
// The aborted transactions come from the transaction indexes (added as the
// pass reaches them); a transaction is "ongoing" from its first offset to
// its marker.
type txnTracker struct {
	pending   abortedHeap             // not reached yet, by first offset
	aborted   map[int64]*abortedState // ongoing aborted, by producer id
	committed map[int64]bool          // producers with an ongoing transaction not aborted that had a batch in this pass
	// kept collects the aborted transactions of the markers kept in the
	// segment being written (reset per segment by the writer).
	kept []index.AbortedTxn
}

type abortedState struct {
	txn index.AbortedTxn
	// seen: a batch of the transaction was read in this pass.
	seen bool
}

func newTxnTracker() *txnTracker {
	return &txnTracker{aborted: map[int64]*abortedState{}, committed: map[int64]bool{}}
}

// add queues aborted transactions read from the transaction indexes.
func (t *txnTracker) add(txns []index.AbortedTxn) {
	for _, x := range txns {
		heap.Push(&t.pending, x)
	}
}

// reach makes ongoing every queued aborted transaction that starts at or
// before offset.
func (t *txnTracker) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		x := heap.Pop(&t.pending).(index.AbortedTxn)
		if _, ok := t.aborted[x.ProducerID]; !ok {
			t.aborted[x.ProducerID] = &abortedState{txn: x}
		}
	}
}

// onData accounts for a data batch and reports whether it belongs to an
// aborted transaction (then it may be discarded whatever its keys).
func (t *txnTracker) onData(v batch.View) bool {
	t.reach(v.LastOffset())
	if !v.IsTransactional() {
		return false
	}
	if a, ok := t.aborted[v.ProducerID()]; ok {
		a.seen = true
		return true
	}
	t.committed[v.ProducerID()] = true
	return false
}

// onControl accounts for a control batch whose control type is typ
// (ok false: the batch has no readable record, an already cleaned empty
// marker) and reports whether it may be discarded: an ABORT whose
// transaction had no batch in this pass, a COMMIT likewise, an empty
// control batch. A kept ABORT's transaction is collected for the
// .txnindex. Every other control type, MIRROR_PID_RESET first, is never
// discarded.
func (t *txnTracker) onControl(v batch.View, typ batch.ControlType, ok bool) bool {
	t.reach(v.LastOffset())
	if !ok {
		return true
	}
	pid := v.ProducerID()
	switch typ {
	case batch.ControlAbort:
		a, found := t.aborted[pid]
		delete(t.aborted, pid)
		if found && a.seen {
			t.kept = append(t.kept, a.txn)
			return false
		}
		return true
	case batch.ControlCommit:
		had := t.committed[pid]
		delete(t.committed, pid)
		return !had
	}
	return false
}

// abortedHeap orders aborted transactions by first offset.
type abortedHeap []index.AbortedTxn

func (h abortedHeap) Len() int           { return len(h) }
func (h abortedHeap) Less(i, j int) bool { return h[i].FirstOffset < h[j].FirstOffset }
func (h abortedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *abortedHeap) Push(x any)        { *h = append(*h, x.(index.AbortedTxn)) }
func (h *abortedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
