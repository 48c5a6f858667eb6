package server

import (
	"regexp"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnStates are the transaction states Kafka names (ListTransactions
// filters by them).
var txnStates = []string{txnEmpty, txnOngoing, txnPrepareCommit, txnPrepareAbort, txnCompleteCommit, txnCompleteAbort, "Dead", "PrepareEpochFence"}

// describeTransactions answers DescribeTransactions (kafka-transactions
// describe): each transactional id's producer id and epoch, state,
// timeout, start time (-1 when none is open) and partitions, as Kafka's
// TransactionCoordinator.handleDescribeTransactions; an empty id is
// INVALID_REQUEST, an unknown one TRANSACTIONAL_ID_NOT_FOUND.
func (c *txnCoordinator) describeTransactions(req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	resp.Version = req.Version
	for _, id := range req.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		t, ok := c.get(id)
		switch {
		case id == "":
			ts.ErrorCode = errInvalidRequest
		case !ok:
			ts.ErrorCode = errTransactionalIDNotFound
		default:
			ts.State, ts.TimeoutMillis, ts.StartTimestamp = t.State, t.TimeoutMs, t.StartMs
			ts.ProducerID, ts.ProducerEpoch = t.ProducerID, t.ProducerEpoch
			byTopic := map[string][]int32{}
			for _, tp := range t.Partitions {
				byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
			}
			for _, name := range sortedTopics(byTopic) {
				tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				tt.Topic, tt.Partitions = name, byTopic[name]
				ts.Topics = append(ts.Topics, tt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}

func sortedTopics(m map[string][]int32) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// listTransactions answers ListTransactions (kafka-transactions list
// and find-hanging): every transactional id, filtered as Kafka filters
// them: by state (names Kafka does not know are answered in
// UnknownStateFilters and match nothing), by producer id, from v1 by how
// long an open transaction has run (DurationFilterMillis), from v2 by a
// regular expression on the id (an invalid one is INVALID_REGULAR_EXPRESSION).
func (c *txnCoordinator) listTransactions(req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := kmsg.NewPtrListTransactionsResponse()
	resp.Version = req.Version
	var states []string
	for _, st := range req.StateFilters {
		if slices.Contains(txnStates, st) {
			states = append(states, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, st)
		}
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if pattern, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = errInvalidRegularExpression
			return resp
		}
	}
	now := c.nowMs()
	c.s.meta.view(func(st *metaState) {
		ids := make([]string, 0, len(st.Transactions))
		for id := range st.Transactions {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			t := st.Transactions[id]
			switch {
			case len(states) > 0 && !slices.Contains(states, t.State):
				continue
			case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, t.ProducerID):
				continue
			case req.Version >= 1 && req.DurationFilterMillis >= 0 && now-t.StartMs <= req.DurationFilterMillis:
				// Kafka keeps those started more than the duration ago
				// (-1: no filter).
				continue
			case pattern != nil && !pattern.MatchString(id):
				continue
			}
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID, ts.ProducerID, ts.TransactionState = id, t.ProducerID, t.State
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
	})
	return resp
}
