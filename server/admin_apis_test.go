package server

import (
	"time"

	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteRecordsReq(topic string, offsets map[int32]int64) *kmsg.DeleteRecordsRequest {
	r := kmsg.NewPtrDeleteRecordsRequest()
	r.Version = 2
	t := kmsg.NewDeleteRecordsRequestTopic()
	t.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, off
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// TestDeleteRecordsRules: Kafka's rules of DeleteRecords, partition by
// partition: -1 is the high watermark, past it OFFSET_OUT_OF_RANGE, at or
// below the log start nothing changes; the answer is the low watermark.
func TestDeleteRecordsRules(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "dr", 2)
	for i := 0; i < 3; i++ {
		produceOK(t, rc, "dr", 0, records(t, 2, -1, 0, 0, false, 1))
	}
	produceOK(t, rc, "dr", 1, records(t, 4, -1, 0, 0, false, 1))
	for _, c := range []struct {
		name    string
		part    int32
		offset  int64
		code    int16
		lowMark int64
	}{
		{"below 3", 0, 3, 0, 3},
		{"below the log start", 0, 1, 0, 3},
		{"past the high watermark", 0, 7, errOffsetOutOfRange, -1},
		{"the high watermark", 1, -1, 0, 4},
		{"unknown partition", 5, 1, errUnknownTopicOrPartition, -1},
	} {
		p := roundTrip[*kmsg.DeleteRecordsResponse](rc, deleteRecordsReq("dr", map[int32]int64{c.part: c.offset})).Topics[0].Partitions[0]
		if p.ErrorCode != c.code || p.LowWatermark != c.lowMark {
			t.Errorf("%s: error %d low watermark %d, want %d and %d", c.name, p.ErrorCode, p.LowWatermark, c.code, c.lowMark)
		}
	}
	if start := logOf(t, ts, "dr", 0).LogStartOffset(); start != 3 {
		t.Fatalf("log start %d after the deletes, want 3", start)
	}
}

// TestDescribeLogDirsAndProducers: the one log directory with each
// asked partition's size (an unknown one left out), and each partition's
// active producers with their open transaction's first offset.
func TestDescribeLogDirsAndProducers(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "dd", 2)
	produceOK(t, rc, "dd", 0, records(t, 3, 5, 0, 0, false, 10))
	id := "dd-t"
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "dd", 1)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "dd", 1, -1, records(t, 1, p.ProducerID, p.ProducerEpoch, 0, true, 10)))

	ld := kmsg.NewPtrDescribeLogDirsRequest()
	ld.Version = 4
	lt := kmsg.NewDescribeLogDirsRequestTopic()
	lt.Topic, lt.Partitions = "dd", []int32{0, 1, 9}
	ld.Topics = append(ld.Topics, lt)
	dirs := roundTrip[*kmsg.DescribeLogDirsResponse](rc, ld).Dirs
	if len(dirs) != 1 || dirs[0].TotalBytes <= 0 || len(dirs[0].Topics) != 1 || len(dirs[0].Topics[0].Partitions) != 2 {
		t.Fatalf("log dirs: %+v", dirs)
	}
	if got, want := dirs[0].Topics[0].Partitions[0].Size, logOf(t, ts, "dd", 0).Size(); got != want || got == 0 {
		t.Fatalf("partition 0 size %d, want %d", got, want)
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "dd", []int32{0, 1, 9}
	dp.Topics = append(dp.Topics, dt)
	parts := roundTrip[*kmsg.DescribeProducersResponse](rc, dp).Topics[0].Partitions
	if a := parts[0].ActiveProducers; len(a) != 1 || a[0].ProducerID != 5 || a[0].LastSequence != 2 || a[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("partition 0 producers: %+v", a)
	}
	if a := parts[1].ActiveProducers; len(a) != 1 || a[0].ProducerID != p.ProducerID || a[0].CurrentTxnStartOffset != 0 {
		t.Fatalf("partition 1 producers: %+v", a)
	}
	if parts[2].ErrorCode != errUnknownTopicOrPartition {
		t.Fatalf("unknown partition: %d", parts[2].ErrorCode)
	}
}

// TestDescribeAndListTransactions: DescribeTransactions' states and
// errors; ListTransactions' filters (state, unknown state names,
// producer id, duration, pattern, an invalid pattern).
func TestDescribeAndListTransactions(t *testing.T) {
	clock := &fakeClock{mu: make(chan struct{}, 1), t: time.Unix(1_700_000_000, 0)}
	ts := startTest(t, Config{Now: clock.now})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "lt", 1)
	a, b := "lt-a", "lt-b"
	pa := initPID(t, rc, &a, 60000)
	initPID(t, rc, &b, 60000)
	addPartition(t, rc, a, pa.ProducerID, pa.ProducerEpoch, "lt", 0)
	clock.add(5 * time.Second)

	dr := kmsg.NewPtrDescribeTransactionsRequest()
	dr.TransactionalIDs = []string{a, b, "lt-none", ""}
	st := roundTrip[*kmsg.DescribeTransactionsResponse](rc, dr).TransactionStates
	if st[0].State != "Ongoing" || st[0].StartTimestamp < 0 || len(st[0].Topics) != 1 || st[0].ProducerID != pa.ProducerID {
		t.Fatalf("ongoing: %+v", st[0])
	}
	if st[1].State != "Empty" || st[1].StartTimestamp != -1 {
		t.Fatalf("empty: %+v", st[1])
	}
	if st[2].ErrorCode != errTransactionalIDNotFound || st[3].ErrorCode != errInvalidRequest {
		t.Fatalf("errors: %d %d", st[2].ErrorCode, st[3].ErrorCode)
	}
	list := func(v int16, states []string, pids []int64, duration int64, pattern *string) ([]string, []string, int16) {
		r := kmsg.NewPtrListTransactionsRequest()
		r.Version, r.StateFilters, r.ProducerIDFilters, r.DurationFilterMillis, r.TransactionalIDPattern = v, states, pids, duration, pattern
		resp := roundTrip[*kmsg.ListTransactionsResponse](rc, r)
		var ids []string
		for _, s := range resp.TransactionStates {
			ids = append(ids, s.TransactionalID)
		}
		return ids, resp.UnknownStateFilters, resp.ErrorCode
	}
	pat, bad := "lt-b", "("
	for _, c := range []struct {
		name     string
		ids      []string
		unknown  []string
		code     int16
		v        int16
		states   []string
		pids     []int64
		duration int64
		pattern  *string
	}{
		{name: "all", ids: []string{a, b}, v: 0},
		{name: "ongoing", ids: []string{a}, v: 0, states: []string{"Ongoing"}},
		{name: "unknown state only", unknown: []string{"Bogus"}, v: 0, states: []string{"Bogus"}},
		{name: "producer id", ids: []string{a}, v: 0, pids: []int64{pa.ProducerID}},
		{name: "running over 4 s", ids: []string{a, b}, v: 1, duration: 4000},
		{name: "running over 6 s", ids: []string{b}, v: 1, duration: 6000},
		{name: "pattern", ids: []string{b}, v: 2, duration: -1, pattern: &pat},
		{name: "invalid pattern", code: errInvalidRegularExpression, v: 2, duration: -1, pattern: &bad},
	} {
		ids, unknown, code := list(c.v, c.states, c.pids, c.duration, c.pattern)
		if code != c.code || !equalStrings(ids, c.ids) || !equalStrings(unknown, c.unknown) {
			t.Errorf("%s: ids %v unknown %v code %d, want %v %v %d", c.name, ids, unknown, code, c.ids, c.unknown, c.code)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
