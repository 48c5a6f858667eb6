package server

import (
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetchReq is a Fetch v12 of topic's partitions (offsets[i] for
// partition parts[i]) in session id at epoch, without waiting.
func sessionFetchReq(id, epoch int32, topic string, parts []int32, offsets []int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, 0, 1, 1<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for i, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[i], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// answered returns the partitions of resp (topic's) with their record
// bytes' length.
func answered(resp *kmsg.FetchResponse) map[int32]int {
	got := map[int32]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got[p.Partition] = len(p.RecordBatches)
		}
	}
	return got
}

// TestFetchSessions walks a fetch session through its rules: opened by
// a full fetch at epoch 0, then incremental fetches answered with only
// the partitions that changed, the epoch checked, partitions added and
// forgotten, a long poll on partitions the request does not name, and
// the session closed by epoch -1 and by forgetting every partition.
func TestFetchSessions(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "s", 3)
	produce := func(part int32) {
		t.Helper()
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("s", part, 1, records(t, 1, -1, 0, 0, false, 10)))
		if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce: %d", c)
		}
	}
	produce(0)
	produce(1)

	full := roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(0, 0, "s", []int32{0, 1}, []int64{0, 0}))
	id := full.SessionID
	if full.ErrorCode != 0 || id == 0 {
		t.Fatalf("a full fetch at epoch 0 opened no session: error %d, id %d", full.ErrorCode, id)
	}
	if got := answered(full); len(got) != 2 || got[0] == 0 || got[1] == 0 {
		t.Fatalf("full fetch answered %v", got)
	}

	steps := []struct {
		name      string
		epoch     int32
		parts     []int32
		offsets   []int64
		before    func()
		wantErr   int16
		wantParts map[int32]bool // answered partitions: true with records
	}{
		{name: "nothing changed", epoch: 1, parts: []int32{0, 1}, offsets: []int64{1, 1}, wantParts: map[int32]bool{}},
		{name: "a produce to partition 1 alone is answered", epoch: 2, before: func() { produce(1) }, wantParts: map[int32]bool{1: true}},
		{name: "the epoch must be the next", epoch: 2, wantErr: errInvalidFetchSessionEpoch},
		{name: "after an epoch error, the expected one still works", epoch: 3, parts: []int32{1}, offsets: []int64{2}, wantParts: map[int32]bool{}},
		{name: "an added partition is answered once", epoch: 4, parts: []int32{2}, offsets: []int64{0}, wantParts: map[int32]bool{2: false}},
		{name: "and not again", epoch: 5, wantParts: map[int32]bool{}},
		{name: "an unknown partition is answered with its error every time", epoch: 6, parts: []int32{7}, offsets: []int64{0}, wantParts: map[int32]bool{7: false}},
		{name: "every time", epoch: 7, wantParts: map[int32]bool{7: false}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		r := roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(id, st.epoch, "s", st.parts, st.offsets))
		if r.ErrorCode != st.wantErr {
			t.Fatalf("%s: error %d, want %d", st.name, r.ErrorCode, st.wantErr)
		}
		if st.wantErr != 0 {
			if r.SessionID != 0 || len(r.Topics) != 0 {
				t.Fatalf("%s: a session error answered with session %d and %d topics", st.name, r.SessionID, len(r.Topics))
			}
			continue
		}
		got := answered(r)
		if r.SessionID != id || len(got) != len(st.wantParts) {
			t.Fatalf("%s: session %d answered %v, want %v", st.name, r.SessionID, got, st.wantParts)
		}
		for p, records := range st.wantParts {
			if n, ok := got[p]; !ok || (n > 0) != records {
				t.Fatalf("%s: partition %d answered with %d record bytes (want records: %v)", st.name, p, n, records)
			}
		}
	}

	// A long poll waits on the session's partitions, named or not (an
	// error answers at once: partition 7 is forgotten first).
	pc := dial(t, ts.addr)
	later := records(t, 1, -1, 0, 0, false, 10)
	produced := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		pc.send(produceReq("s", 0, 1, later))
		_, err := io.ReadFull(pc.r, make([]byte, 4))
		produced <- err
	}()
	lp := sessionFetchReq(id, 8, "s", nil, nil)
	lp.MaxWaitMillis = 10_000
	unknown := kmsg.NewFetchRequestForgottenTopic()
	unknown.Topic, unknown.Partitions = "s", []int32{7}
	lp.ForgottenTopics = append(lp.ForgottenTopics, unknown)
	start := time.Now()
	r := roundTrip[*kmsg.FetchResponse](rc, lp)
	if got := answered(r); time.Since(start) > 5*time.Second || got[0] == 0 {
		t.Fatalf("long poll answered %v after %v", got, time.Since(start))
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}

	// Forgetting every partition closes the session.
	fg := sessionFetchReq(id, 9, "s", nil, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "s", []int32{0, 1, 2}
	fg.ForgottenTopics = append(fg.ForgottenTopics, ft)
	if r := roundTrip[*kmsg.FetchResponse](rc, fg); r.ErrorCode != 0 || r.SessionID != 0 || len(r.Topics) != 0 {
		t.Fatalf("forgetting every partition: error %d, session %d, %d topics", r.ErrorCode, r.SessionID, len(r.Topics))
	}
	if r := roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(id, 10, "s", nil, nil)); r.ErrorCode != errFetchSessionIDNotFound {
		t.Fatalf("a closed session answered %d", r.ErrorCode)
	}

	// Epoch -1 closes a session and fetches without one.
	full = roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(0, 0, "s", []int32{0}, []int64{0}))
	r = roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(full.SessionID, -1, "s", []int32{0}, []int64{0}))
	if r.SessionID != 0 || answered(r)[0] == 0 {
		t.Fatalf("epoch -1: session %d, answered %v", r.SessionID, answered(r))
	}
	if r := roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(full.SessionID, 1, "s", nil, nil)); r.ErrorCode != errFetchSessionIDNotFound {
		t.Fatalf("a session closed by epoch -1 answered %d", r.ErrorCode)
	}
	if n := ts.fetchSessions.Load(); n != 0 {
		t.Fatalf("%d sessions counted open", n)
	}
}

// TestFetchSessionFairness: partitions answered with records go to the
// end of the session's order, so a response that one partition's batch
// fills does not starve the next.
func TestFetchSessionFairness(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "fair", 2)
	for range 3 {
		for p := range int32(2) {
			r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("fair", p, 1, records(t, 1, -1, 0, 0, false, 100)))
			if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
				t.Fatalf("produce: %d", c)
			}
		}
	}
	req := sessionFetchReq(0, 0, "fair", []int32{0, 1}, []int64{0, 0})
	req.MaxBytes = 1 // one batch a response
	r := roundTrip[*kmsg.FetchResponse](rc, req)
	id := r.SessionID
	order := []int32{}
	offsets := map[int32]int64{0: 0, 1: 0}
	for epoch := int32(1); epoch <= 4; epoch++ {
		var took int32 = -1
		for p, n := range answered(r) {
			if n > 0 {
				took = p
			}
		}
		if took < 0 {
			t.Fatalf("epoch %d: no batch answered: %v", epoch, answered(r))
		}
		order = append(order, took)
		offsets[took]++
		next := sessionFetchReq(id, epoch, "fair", []int32{took}, []int64{offsets[took]})
		next.MaxBytes = 1
		r = roundTrip[*kmsg.FetchResponse](rc, next)
	}
	// The full fetch opens the session in the request's order; from the
	// first incremental answer on, the partition served goes last.
	for i := 2; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("partitions answered in the order %v: one was served twice in a row", order)
		}
	}
}

// TestFetchSessionBounds: a connection opens at most
// maxConnFetchSessions sessions (then full fetches answer session 0), a
// session grows to at most MaxRequestEntries partitions (a request past
// that closes it), and a closed connection's sessions are gone.
func TestFetchSessionBounds(t *testing.T) {
	ts := startTest(t, Config{MaxRequestEntries: 6})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "b", 2)
	var ids []int32
	for range maxConnFetchSessions + 1 {
		ids = append(ids, roundTrip[*kmsg.FetchResponse](rc, sessionFetchReq(0, 0, "b", []int32{0}, []int64{0})).SessionID)
	}
	for i, id := range ids {
		if (id != 0) != (i < maxConnFetchSessions) {
			t.Fatalf("session ids of %d full fetches on one connection: %v", len(ids), ids)
		}
	}
	if n := ts.fetchSessions.Load(); n != maxConnFetchSessions {
		t.Fatalf("%d sessions counted, want %d", n, maxConnFetchSessions)
	}
	grow := sessionFetchReq(ids[0], 1, "b", []int32{1, 2, 3}, make([]int64, 3))
	if r := roundTrip[*kmsg.FetchResponse](rc, grow); r.ErrorCode != 0 {
		t.Fatalf("a session grown to 4 partitions answered %d", r.ErrorCode)
	}
	grow = sessionFetchReq(ids[0], 2, "b", []int32{4, 5, 6}, make([]int64, 3))
	if r := roundTrip[*kmsg.FetchResponse](rc, grow); r.ErrorCode != errFetchSessionIDNotFound {
		t.Fatalf("a session grown past MaxRequestEntries answered %d", r.ErrorCode)
	}
	if n := ts.fetchSessions.Load(); n != maxConnFetchSessions-1 {
		t.Fatalf("%d sessions counted after one was closed", n)
	}
	rc.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for ts.fetchSessions.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions counted after their connection closed", ts.fetchSessions.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFetchSessionTopicIDs runs a session at Fetch v13, where requests
// name topics by id and not by name (Kafka's Java consumer fetches at
// v17): an incremental fetch reads the partition by its id and answers
// its new records, and forgetting it by id closes the session. Keyed by
// name alone, the incremental fetches read a topic without a name or id
// (UNKNOWN_TOPIC_ID), and ConsumerPerformance stopped after its first
// fetch.
func TestFetchSessionTopicIDs(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "s", 1)
	id := ts.topicByName("s").id
	produce := func() {
		t.Helper()
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("s", 0, 1, records(t, 1, -1, 0, 0, false, 10)))
		if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce: %d", c)
		}
	}
	v13 := func(sid, epoch int32, parts []int32, offsets []int64) *kmsg.FetchRequest {
		req := sessionFetchReq(sid, epoch, "s", parts, offsets)
		req.Version = 13
		for i := range req.Topics {
			req.Topics[i].Topic, req.Topics[i].TopicID = "", id
		}
		return req
	}
	produce()
	full := roundTrip[*kmsg.FetchResponse](rc, v13(0, 0, []int32{0}, []int64{0}))
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("a full fetch at epoch 0 opened no session: error %d, id %d", full.ErrorCode, full.SessionID)
	}
	if got := answered(full); got[0] == 0 {
		t.Fatalf("full fetch answered %v", got)
	}
	produce()
	inc := roundTrip[*kmsg.FetchResponse](rc, v13(full.SessionID, 1, []int32{0}, []int64{1}))
	if inc.ErrorCode != 0 || inc.SessionID != full.SessionID || len(inc.Topics) != 1 || len(inc.Topics[0].Partitions) != 1 {
		t.Fatalf("incremental fetch: error %d, session %d, topics %+v", inc.ErrorCode, inc.SessionID, inc.Topics)
	}
	it := inc.Topics[0]
	if p := it.Partitions[0]; it.TopicID != id || p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 2 {
		t.Fatalf("incremental fetch answered topic %x: error %d, %d record bytes, high watermark %d", it.TopicID, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
	forget := v13(full.SessionID, 2, nil, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Partitions = id, []int32{0}
	forget.ForgottenTopics = append(forget.ForgottenTopics, ft)
	if r := roundTrip[*kmsg.FetchResponse](rc, forget); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("forgetting the session's only partition by id: error %d, session %d (want closed: 0)", r.ErrorCode, r.SessionID)
	}
	if r := roundTrip[*kmsg.FetchResponse](rc, v13(full.SessionID, 3, nil, nil)); r.ErrorCode != errFetchSessionIDNotFound {
		t.Fatalf("the closed session answered: error %d", r.ErrorCode)
	}
}

// TestFetchSessionByTopicID: from Fetch v13 a session's partitions are
// named by topic id alone. An incremental fetch that names none of them
// must still read each by its id, and two topics' partition 0 are two
// partitions of the session.
func TestFetchSessionByTopicID(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "a", 1)
	createTopic(t, rc, "b", 1)
	produce := func(topic string) {
		t.Helper()
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq(topic, 0, 1, records(t, 1, -1, 0, 0, false, 10)))
		if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce %s: %d", topic, c)
		}
	}
	byID := func(id, epoch int32, offsets map[string]int64) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 13, 0, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		for _, name := range []string{"a", "b"} {
			off, ok := offsets[name]
			if !ok {
				continue
			}
			rt := kmsg.NewFetchRequestTopic()
			rt.TopicID = ts.topicByName(name).id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	// answeredIDs maps each answered topic id to its record bytes' length.
	answeredIDs := func(r *kmsg.FetchResponse) map[[16]byte]int {
		got := map[[16]byte]int{}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("topic %x partition %d: error %d", tp.TopicID, p.Partition, p.ErrorCode)
				}
				got[tp.TopicID] = len(p.RecordBatches)
			}
		}
		return got
	}
	full := roundTrip[*kmsg.FetchResponse](rc, byID(0, 0, map[string]int64{"a": 0, "b": 0}))
	if full.ErrorCode != 0 || full.SessionID == 0 || len(answeredIDs(full)) != 2 {
		t.Fatalf("full v13 fetch: error %d, session %d, answered %v", full.ErrorCode, full.SessionID, answeredIDs(full))
	}
	produce("b")
	r := roundTrip[*kmsg.FetchResponse](rc, byID(full.SessionID, 1, nil))
	got := answeredIDs(r)
	if len(got) != 1 || got[ts.topicByName("b").id] == 0 {
		t.Fatalf("incremental v13 fetch after a produce to b answered %v (by id), want b with records", got)
	}
	produce("a")
	r = roundTrip[*kmsg.FetchResponse](rc, byID(full.SessionID, 2, map[string]int64{"b": 1}))
	got = answeredIDs(r)
	if len(got) != 1 || got[ts.topicByName("a").id] == 0 {
		t.Fatalf("incremental v13 fetch after a produce to a answered %v (by id), want a with records", got)
	}
}
