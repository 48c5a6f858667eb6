package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersionsAdvertisesTheTable(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		resp := roundTrip[*kmsg.ApiVersionsResponse](rc, req)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
			t.Fatalf("v%d: error %d, %d keys, want %d", v, resp.ErrorCode, len(resp.ApiKeys), len(apis))
		}
		for _, k := range resp.ApiKeys {
			if r := apis[k.ApiKey]; r.min != k.MinVersion || r.max != k.MaxVersion {
				t.Fatalf("key %d advertised %d..%d, table %d..%d", k.ApiKey, k.MinVersion, k.MaxVersion, r.min, r.max)
			}
			if isGroupKey(k.ApiKey) {
				t.Fatalf("group key %d advertised without a group coordinator", k.ApiKey)
			}
		}
	}
}

// TestUnsupportedVersionsKeepTheConnection: an ApiVersions above the
// supported range is answered at v0 with UNSUPPORTED_VERSION and the
// list; a Produce v2 and an unimplemented API (AlterConfigs) are
// answered UNSUPPORTED_VERSION-typed responses; the connection serves
// the next request.
func TestUnsupportedVersionsKeepTheConnection(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 9
	corr := rc.send(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if got := rc.recv(resp); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	if resp.ErrorCode != errUnsupportedVersion || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("ApiVersions v9: error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}

	jg := kmsg.NewPtrJoinGroupRequest() // not advertised without groups
	jg.Version = 5
	jg.Group, jg.ProtocolType = "g", "consumer"
	if r := roundTrip[*kmsg.JoinGroupResponse](rc, jg); r.ErrorCode != errUnsupportedVersion {
		t.Fatalf("JoinGroup without a coordinator: error %d", r.ErrorCode)
	}
	ac := kmsg.NewPtrAlterConfigsRequest() // no top-level error code: empty answer
	ac.Version = 1
	roundTrip[*kmsg.AlterConfigsResponse](rc, ac)
	p := produceReq("t", 3, 1, records(t, 1, -1, 0, 0, false, 10))
	p.Version = 2
	pr := roundTrip[*kmsg.ProduceResponse](rc, p)
	if len(pr.Topics) != 1 || pr.Topics[0].Topic != "t" || len(pr.Topics[0].Partitions) != 1 ||
		pr.Topics[0].Partitions[0].Partition != 3 || pr.Topics[0].Partitions[0].ErrorCode != errUnsupportedVersion {
		t.Fatalf("Produce v2: %+v, want t-3 with UNSUPPORTED_VERSION", pr.Topics)
	}
	// Partitions given as int32s (AddPartitionsToTxn) are mirrored too.
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 2
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{4, 5}}}
	apr := ts.unsupported(ap, 24, 2).(*kmsg.AddPartitionsToTxnResponse)
	if len(apr.Topics) != 1 || len(apr.Topics[0].Partitions) != 2 || apr.Topics[0].Partitions[1].Partition != 5 ||
		apr.Topics[0].Partitions[1].ErrorCode != errUnsupportedVersion {
		t.Fatalf("AddPartitionsToTxn unsupported: %+v", apr.Topics)
	}

	ok := kmsg.NewPtrApiVersionsRequest()
	ok.Version = 3
	if r := roundTrip[*kmsg.ApiVersionsResponse](rc, ok); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions after unsupported requests: %d", r.ErrorCode)
	}
}

// TestResponsesInRequestOrder pipelines a long-poll fetch, a metadata
// request and a produce that ends the poll: the responses come in
// request order with their correlation ids.
func TestResponsesInRequestOrder(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "o", 1)
	f := fetchReq("o", 0, 0, 5000, 1, 1<<20, 1<<20, 0)
	c1 := rc.send(f)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c2 := rc.send(md)
	pr := produceReq("o", 0, 1, records(t, 3, -1, 0, 0, false, 10))
	c3 := rc.send(pr)

	fr := f.ResponseKind().(*kmsg.FetchResponse)
	if got := rc.recv(fr); got != c1 {
		t.Fatalf("first response %d, want %d", got, c1)
	}
	if n := len(fr.Topics[0].Partitions[0].RecordBatches); n == 0 {
		t.Fatal("the long-poll fetch ended without the produced records")
	}
	mr := md.ResponseKind().(*kmsg.MetadataResponse)
	if got := rc.recv(mr); got != c2 {
		t.Fatalf("second response %d, want %d", got, c2)
	}
	prr := pr.ResponseKind().(*kmsg.ProduceResponse)
	if got := rc.recv(prr); got != c3 {
		t.Fatalf("third response %d, want %d", got, c3)
	}
}

func TestProduceErrorsAndDuplicates(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "p", 1)
	pid := initPID(t, rc, nil, 0)
	b := records(t, 2, pid.ProducerID, pid.ProducerEpoch, 0, false, 10)
	r1 := roundTrip[*kmsg.ProduceResponse](rc, produceReq("p", 0, -1, b))
	r2 := roundTrip[*kmsg.ProduceResponse](rc, produceReq("p", 0, -1, b)) // a retry
	if p1, p2 := r1.Topics[0].Partitions[0], r2.Topics[0].Partitions[0]; p1.ErrorCode != 0 || p2.ErrorCode != 0 || p2.BaseOffset != p1.BaseOffset {
		t.Fatalf("duplicate: first %+v, retry %+v (want NONE with the original offset)", p1, p2)
	}
	gap := records(t, 1, pid.ProducerID, pid.ProducerEpoch, 5, false, 10)
	if c := roundTrip[*kmsg.ProduceResponse](rc, produceReq("p", 0, 1, gap)).Topics[0].Partitions[0].ErrorCode; c != 45 {
		t.Fatalf("sequence gap: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER (45)", c)
	}
	bad := records(t, 1, -1, 0, 0, false, 10)
	bad[len(bad)-1] ^= 1 // breaks the CRC
	if c := roundTrip[*kmsg.ProduceResponse](rc, produceReq("p", 0, 1, bad)).Topics[0].Partitions[0].ErrorCode; c != errCorruptMessage {
		t.Fatalf("bad CRC: error %d, want CORRUPT_MESSAGE", c)
	}
	if c := roundTrip[*kmsg.ProduceResponse](rc, produceReq("nope", 0, 1, records(t, 1, -1, 0, 0, false, 1))).Topics[0].Partitions[0].ErrorCode; c != errUnknownTopicOrPartition {
		t.Fatalf("unknown topic without auto-create: %d", c)
	}
	// acks=0: no response; the next request's answer comes next.
	rc.send(produceReq("p", 0, 0, records(t, 1, -1, 0, 0, false, 1)))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	roundTrip[*kmsg.MetadataResponse](rc, md)
}

func TestAutoCreateOnMetadataNotProduce(t *testing.T) {
	ts := startTest(t, Config{AutoCreate: true, DefaultPartitions: 3})
	rc := dial(t, ts.addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 12, true
	name := "auto"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	resp := roundTrip[*kmsg.MetadataResponse](rc, md)
	if mt := resp.Topics[0]; mt.ErrorCode != 0 || len(mt.Partitions) != 3 || mt.TopicID == [16]byte{} {
		t.Fatalf("auto-created topic: %+v", mt)
	}
	// A produce creates no topic (Kafka's produce path does not either:
	// clients ask Metadata first).
	if c := roundTrip[*kmsg.ProduceResponse](rc, produceReq("auto2", 0, 1, records(t, 1, -1, 0, 0, false, 1))).Topics[0].Partitions[0].ErrorCode; c != errUnknownTopicOrPartition {
		t.Fatalf("produce to a new topic with auto-create: %d, want UNKNOWN_TOPIC_OR_PARTITION", c)
	}
	// The client's "no" is honoured.
	md.AllowAutoTopicCreation = false
	name3 := "auto3"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name3}}
	if c := roundTrip[*kmsg.MetadataResponse](rc, md).Topics[0].ErrorCode; c != errUnknownTopicOrPartition {
		t.Fatalf("metadata without AllowAutoTopicCreation: %d", c)
	}
}

func TestTopicAdmin(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	add := func(name string, parts int32, rf int16, cfg map[string]string) {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
		for k, v := range cfg {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, &v
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("a", 2, 1, map[string]string{"message.timestamp.type": "LogAppendTime", "segment.bytes": "1048576"})
	add("bad name", 1, 1, nil)
	add("b", 1, 3, nil)
	add("c", 0, 1, nil)
	add("d", 1, 1, map[string]string{"cleanup.policy": "tiered"})
	want := []int16{0, errInvalidTopic, errInvalidReplicationFactor, errInvalidPartitions, errInvalidConfig}
	resp := roundTrip[*kmsg.CreateTopicsResponse](rc, req)
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("create %s: error %d, want %d", rt.Topic, rt.ErrorCode, want[i])
		}
	}
	again := roundTrip[*kmsg.CreateTopicsResponse](rc, req)
	if c := again.Topics[0].ErrorCode; c != errTopicAlreadyExists {
		t.Fatalf("create twice: %d", c)
	}
	// LogAppendTime: the produce answer carries the broker's time.
	pr := roundTrip[*kmsg.ProduceResponse](rc, produceReq("a", 1, 1, records(t, 1, -1, 0, 0, false, 1)))
	if lat := pr.Topics[0].Partitions[0].LogAppendTime; lat < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("LogAppendTime topic answered append time %d", lat)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 4}, {Topic: "a2", Count: 2}}
	cpr := roundTrip[*kmsg.CreatePartitionsResponse](rc, cp)
	if cpr.Topics[0].ErrorCode != 0 || cpr.Topics[1].ErrorCode != errUnknownTopicOrPartition {
		t.Fatalf("create partitions: %+v", cpr.Topics)
	}
	l, ok := ts.Dir().Log(partlog.TopicPartition{Topic: "a", Partition: 3})
	if !ok {
		t.Fatal("partition a-3 not created")
	}
	l0, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "a", Partition: 0})
	if l.TopicID() != l0.TopicID() || l.TopicID().IsZero() {
		t.Fatal("new partition has another topic id")
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 4
	dt.TopicNames = []string{"a", "zz"}
	dtr := roundTrip[*kmsg.DeleteTopicsResponse](rc, dt)
	if dtr.Topics[0].ErrorCode != 0 || dtr.Topics[1].ErrorCode != errUnknownTopicOrPartition {
		t.Fatalf("delete topics: %+v", dtr.Topics)
	}
	if len(ts.Dir().Logs()) != 0 {
		t.Fatalf("partitions left after delete: %v", ts.Dir().Logs())
	}
}

// TestTopicConfigsSurviveRestart: a topic's configs are kept in the
// state file and given to its partitions when the directory reopens.
func TestTopicConfigsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	v := "LogAppendTime"
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "lat", 1, 1
	rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "message.timestamp.type", Value: &v}}
	req.Topics = append(req.Topics, rt)
	roundTrip[*kmsg.CreateTopicsResponse](rc, req)
	ts.close(t)
	ts = startTest(t, Config{Dir: dir})
	rc = dial(t, ts.addr)
	pr := roundTrip[*kmsg.ProduceResponse](rc, produceReq("lat", 0, 1, records(t, 1, -1, 0, 0, false, 1)))
	if lat := pr.Topics[0].Partitions[0].LogAppendTime; lat <= 0 {
		t.Fatal("LogAppendTime config lost over a restart")
	}
}

func TestFetchMaxBytesAndLongPoll(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "f", 2)
	big := records(t, 1, -1, 0, 0, false, 5000)
	for part := int32(0); part < 2; part++ {
		roundTrip[*kmsg.ProduceResponse](rc, produceReq("f", part, 1, big))
	}
	// Both partitions in one fetch with MaxBytes 100: the first batch
	// comes whole (at least one batch), the second partition nothing.
	f := fetchReq("f", 0, 0, 0, 1, 100, 100, 0)
	rp := f.Topics[0].Partitions[0]
	rp.Partition = 1
	f.Topics[0].Partitions = append(f.Topics[0].Partitions, rp)
	fr := roundTrip[*kmsg.FetchResponse](rc, f)
	p0, p1 := fr.Topics[0].Partitions[0], fr.Topics[0].Partitions[1]
	if len(p0.RecordBatches) != len(big) || len(p1.RecordBatches) != 0 || p1.HighWatermark != 1 {
		t.Fatalf("MaxBytes 100: partition 0 got %d bytes (want %d), partition 1 %d (want 0), hw %d",
			len(p0.RecordBatches), len(big), len(p1.RecordBatches), p1.HighWatermark)
	}
	// Long poll at the end, nothing arrives: empty after MaxWait.
	start := time.Now()
	fr = roundTrip[*kmsg.FetchResponse](rc, fetchReq("f", 0, 1, 300, 1, 1<<20, 1<<20, 0))
	if d := time.Since(start); d < 250*time.Millisecond || len(fr.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("long poll returned after %v with %d bytes", d, len(fr.Topics[0].Partitions[0].RecordBatches))
	}
	// Offset out of range.
	fr = roundTrip[*kmsg.FetchResponse](rc, fetchReq("f", 0, 7, 0, 1, 1<<20, 1<<20, 0))
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != errOffsetOutOfRange {
		t.Fatalf("fetch past the end: %d", c)
	}
	// Fetch sessions are refused, so clients fall back to full fetches.
	fs := fetchReq("f", 0, 0, 0, 1, 1<<20, 1<<20, 0)
	fs.SessionID, fs.SessionEpoch = 5, 1
	if c := roundTrip[*kmsg.FetchResponse](rc, fs).ErrorCode; c != errFetchSessionIDNotFound {
		t.Fatalf("fetch session: %d", c)
	}
}

func initPID(t *testing.T, rc *rawConn, txnID *string, timeoutMs int32) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID, req.TransactionTimeoutMillis = txnID, timeoutMs
	resp := roundTrip[*kmsg.InitProducerIDResponse](rc, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %d", resp.ErrorCode)
	}
	return resp
}

func addPartition(t *testing.T, rc *rawConn, txnID string, pid int64, epoch int16, topic string, part int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{part}}}
	return roundTrip[*kmsg.AddPartitionsToTxnResponse](rc, req).Topics[0].Partitions[0].ErrorCode
}

func endTxn(t *testing.T, rc *rawConn, txnID string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
	return roundTrip[*kmsg.EndTxnResponse](rc, req).ErrorCode
}

// TestProducerIDsNeverReused: ids handed out before a restart, clean or
// not, are never handed out again.
func TestProducerIDsNeverReused(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	for run := 0; run < 3; run++ {
		ts := startTest(t, Config{Dir: dir})
		rc := dial(t, ts.addr)
		for i := 0; i < 5; i++ {
			id := initPID(t, rc, nil, 0).ProducerID
			if seen[id] {
				t.Fatalf("run %d: producer id %d handed out twice", run, id)
			}
			seen[id] = true
		}
		ts.close(t)
		if run == 1 {
			// A crash loses nothing the file did not have: the block
			// written before the ids were handed out covers them.
			b, err := os.ReadFile(filepath.Join(dir, StateFile))
			if err != nil {
				t.Fatal(err)
			}
			var st metaState
			if err := jsonUnmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			for id := range seen {
				if id >= st.ProducerIDBlockEnd {
					t.Fatalf("id %d handed out beyond the persisted block end %d", id, st.ProducerIDBlockEnd)
				}
			}
		}
	}
}

// TestTransactionSurvivesRestartAndEpochBump: an ongoing transaction is
// kept over a restart and committed after it; a new InitProducerId for
// the transactional id bumps the epoch and fences the old one.
func TestTransactionSurvivesRestartAndEpochBump(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "tx", 1)
	id := "tid"
	p := initPID(t, rc, &id, 60000)
	if c := addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "tx", 0); c != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", c)
	}
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "tx", 0, -1, records(t, 3, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	ts.close(t)

	ts = startTest(t, Config{Dir: dir})
	rc = dial(t, ts.addr)
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "tx", Partition: 0})
	if lso := l.LastStableOffset(); lso != 0 {
		t.Fatalf("open transaction after restart: LSO %d, want 0", lso)
	}
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, true); c != 0 {
		t.Fatalf("EndTxn after restart: %d", c)
	}
	if lso, leo := l.LastStableOffset(), l.LogEndOffset(); lso != leo || leo != 4 {
		t.Fatalf("after commit: LSO %d, LEO %d, want 4 and 4", lso, leo)
	}
	// Retried EndTxn: answered NONE; the other decision is refused.
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, true); c != 0 {
		t.Fatalf("retried EndTxn: %d", c)
	}
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, false); c != errInvalidTxnState {
		t.Fatalf("abort after commit: %d", c)
	}
	p2 := initPID(t, rc, &id, 60000)
	if p2.ProducerID != p.ProducerID || p2.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("epoch bump: %d/%d after %d/%d", p2.ProducerID, p2.ProducerEpoch, p.ProducerID, p.ProducerEpoch)
	}
	if c := addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "tx", 0); c != errProducerFenced {
		t.Fatalf("old epoch after bump: %d, want PRODUCER_FENCED", c)
	}
}

// TestTransactionTimeoutAborts: a transaction older than its timeout is
// aborted by the housekeeping tick, its producer fenced.
func TestTransactionTimeoutAborts(t *testing.T) {
	clock := &fakeClock{mu: make(chan struct{}, 1), t: time.Unix(1_700_000_000, 0)}
	ts := startTest(t, Config{Tick: 10 * time.Millisecond, Now: clock.now})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "to", 1)
	id := "slow"
	p := initPID(t, rc, &id, 1000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "to", 0)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "to", 0, 1, records(t, 2, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "to", Partition: 0})
	clock.add(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.WaitHighWatermark(ctx, 2); err != nil {
		t.Fatalf("no ABORT marker after the timeout: %v", err)
	}
	if lso := l.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d after the abort, want 3", lso)
	}
	aborted, err := l.AbortedTransactions(0, 3)
	if err != nil || len(aborted) != 1 || aborted[0].ProducerID != p.ProducerID {
		t.Fatalf("aborted transactions: %v %v", aborted, err)
	}
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, true); c != errProducerFenced {
		t.Fatalf("commit after the timeout: %d, want PRODUCER_FENCED", c)
	}
}

// TestPreparedTransactionCompletedAtOpen: a crash between PrepareCommit
// and the markers is completed when the server opens.
func TestPreparedTransactionCompletedAtOpen(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "pc", 1)
	id := "prep"
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "pc", 0)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "pc", 0, 1, records(t, 2, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	// As if EndTxn had persisted PrepareCommit and crashed.
	if err := ts.meta.update(func(st *metaState) { st.Transactions[id].State = txnPrepareCommit }); err != nil {
		t.Fatal(err)
	}
	ts.close(t)
	ts = startTest(t, Config{Dir: dir})
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "pc", Partition: 0})
	if leo, lso := l.LogEndOffset(), l.LastStableOffset(); leo != 3 || lso != 3 {
		t.Fatalf("after open: LEO %d LSO %d, want the COMMIT marker at 2", leo, lso)
	}
	var state string
	ts.meta.view(func(st *metaState) { state = st.Transactions[id].State })
	if state != txnCompleteCommit {
		t.Fatalf("state %s", state)
	}
}

func TestListOffsetsAndLeaderEpoch(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "lo", 1)
	for i := 0; i < 3; i++ {
		roundTrip[*kmsg.ProduceResponse](rc, produceReq("lo", 0, 1, recordsAt(t, 1000+int64(i), 2, -1, 0, 0, false, 1)))
	}
	want := map[int64]int64{-1: 6, -2: 0, -3: 4, 1001: 2} // max timestamp: the first record holding it
	for ts, off := range want {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := roundTrip[*kmsg.ListOffsetsResponse](rc, req).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != off {
			t.Errorf("ListOffsets %d: offset %d error %d, want %d", ts, p.Offset, p.ErrorCode, off)
		}
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version = 4
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "lo"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.LeaderEpoch, op.CurrentLeaderEpoch = 0, 0
	ot.Partitions = append(ot.Partitions, op)
	op.CurrentLeaderEpoch = 5
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	oer := roundTrip[*kmsg.OffsetForLeaderEpochResponse](rc, oe)
	if p := oer.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 6 {
		t.Fatalf("OffsetForLeaderEpoch: %+v", p)
	}
	if c := oer.Topics[0].Partitions[1].ErrorCode; c != errUnknownLeaderEpoch {
		t.Fatalf("future leader epoch: %d", c)
	}
}

func TestParseRequestRejectsGarbage(t *testing.T) {
	cases := [][]byte{
		nil,
		{0, 0},
		{0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0},    // unknown key
		{0, 0, 0, 9, 0, 0, 0, 1, 0, 50, 'a'},    // client id past the end
		{0, 0, 0x80, 0, 0, 0, 0, 1, 0xff, 0xff}, // negative version
		{0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0x85}, // flexible, truncated tags
	}
	for i, c := range cases {
		if _, _, _, err := parseRequest(c); !errors.Is(err, errBadRequest) {
			t.Errorf("case %d: %v, want errBadRequest", i, err)
		}
	}
	// A good header: ApiVersions v3 with tags.
	b := binary.BigEndian.AppendUint16(nil, 18)
	b = binary.BigEndian.AppendUint16(b, 3)
	b = binary.BigEndian.AppendUint32(b, 77)
	b = append(b, 0xff, 0xff, 0)
	req, corr, body, err := parseRequest(b)
	if err != nil || req.Key() != 18 || corr != 77 || len(body) != 0 {
		t.Fatalf("good header: %v %d %d %v", req, corr, len(body), err)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 1, 'c', 0, 0xff, 0xff, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, _, body, err := parseRequest(b)
		if err != nil {
			return
		}
		_ = req.ReadFrom(body) // must not panic
	})
}

type fakeClock struct {
	mu chan struct{}
	t  time.Time
}

func (c *fakeClock) lock() {
	if c.mu == nil {
		panic("fakeClock not initialised")
	}
	c.mu <- struct{}{}
}

func (c *fakeClock) now() time.Time {
	c.lock()
	defer func() { <-c.mu }()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.lock()
	defer func() { <-c.mu }()
	c.t = c.t.Add(d)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestCloseEndsEverything: Close with a long poll waiting and a client
// connected returns, and leaves no goroutine of the server behind.
func TestCloseEndsEverything(t *testing.T) {
	// The process-wide mapping cache starts its goroutines once.
	warm := startTest(t, Config{})
	createTopic(t, dial(t, warm.addr), "w", 1)
	warm.close(t)
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	ts := startTest(t, Config{Fsync: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "c", 1)
	rc.send(fetchReq("c", 0, 0, 20000, 1, 1<<20, 1<<20, 0))
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	ts.close(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v with a long poll waiting", d)
	}
	_ = rc.c.Close()
	deadline := time.Now().Add(30 * time.Second) // generous: goroutines exit off the test's path, late on a loaded machine
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestEveryAdvertisedVersion sends each API at every advertised version
// (a minimal valid request naming one partition where the API takes
// partitions) and decodes the answer at that version: what ApiVersions
// advertises is encoded and answered at each of its versions.
func TestEveryAdvertisedVersion(t *testing.T) {
	ts := startTest(t, Config{AutoCreate: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "v", 1)
	roundTrip[*kmsg.ProduceResponse](rc, produceReq("v", 0, 1, records(t, 1, -1, 0, 0, false, 1)))
	name := "v"
	for key, r := range apis {
		for v := r.min; v <= r.max; v++ {
			var req kmsg.Request
			switch key {
			case 0:
				pr := produceReq("v", 0, 1, records(t, 1, -1, 0, 0, false, 1))
				if v >= 13 { // topic ids
					pr.Topics[0].Topic, pr.Topics[0].TopicID = "", ts.topicByName("v").id
				}
				req = pr
			case 1:
				fr := fetchReq("v", 0, 0, 0, 1, 1<<20, 1<<20, 0)
				if v >= 13 {
					fr.Topics[0].Topic, fr.Topics[0].TopicID = "", ts.topicByName("v").id
				}
				req = fr
			case 2:
				lr := kmsg.NewPtrListOffsetsRequest()
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = "v"
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Timestamp = -1
				lt.Partitions = append(lt.Partitions, lp)
				lr.Topics = append(lr.Topics, lt)
				req = lr
			case 3:
				mr := kmsg.NewPtrMetadataRequest()
				mr.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
				req = mr
			case 10:
				fr := kmsg.NewPtrFindCoordinatorRequest()
				fr.CoordinatorKey, fr.CoordinatorKeys, fr.CoordinatorType = "x", []string{"x"}, 1
				req = fr
			case 23:
				or := kmsg.NewPtrOffsetForLeaderEpochRequest()
				ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
				ot.Topic = "v"
				op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				op.LeaderEpoch = 0
				ot.Partitions = append(ot.Partitions, op)
				or.Topics = append(or.Topics, ot)
				req = or
			default:
				req = kmsg.RequestForKey(key)
				if d, ok := req.(interface{ Default() }); ok {
					d.Default()
				}
			}
			req.SetVersion(v)
			corr := rc.send(req)
			resp := req.ResponseKind()
			resp.SetVersion(v)
			if got := rc.recv(resp); got != corr {
				t.Fatalf("%s v%d: correlation %d, want %d", apiName(key), v, got, corr)
			}
			if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.Int() == int64(errUnsupportedVersion) {
				t.Fatalf("%s v%d advertised but answered UNSUPPORTED_VERSION", apiName(key), v)
			}
			switch rr := resp.(type) {
			case *kmsg.ProduceResponse:
				if c := rr.Topics[0].Partitions[0].ErrorCode; c != 0 {
					t.Fatalf("Produce v%d: %d", v, c)
				}
			case *kmsg.FetchResponse:
				if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
					t.Fatalf("Fetch v%d: error %d, %d bytes", v, p.ErrorCode, len(p.RecordBatches))
				}
			case *kmsg.ListOffsetsResponse:
				if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset < 1 {
					t.Fatalf("ListOffsets v%d: %+v", v, p)
				}
			case *kmsg.MetadataResponse:
				if len(rr.Topics) != 1 || rr.Topics[0].ErrorCode != 0 || len(rr.Topics[0].Partitions) != 1 || len(rr.Brokers) != 1 {
					t.Fatalf("Metadata v%d: %+v", v, rr)
				}
			case *kmsg.OffsetForLeaderEpochResponse:
				if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.EndOffset < 1 {
					t.Fatalf("OffsetForLeaderEpoch v%d: %+v", v, p)
				}
			}
		}
	}
}

// TestInitProducerIDWaitsForPreparedTransaction: a new session of a
// transactional id whose markers are not all written yet is told to
// retry (CONCURRENT_TRANSACTIONS), never given an epoch that would drop
// the decided transaction; once completed, it gets the next epoch.
func TestInitProducerIDWaitsForPreparedTransaction(t *testing.T) {
	ts := startTest(t, Config{Tick: time.Hour})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "pw", 1)
	id := "pw"
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "pw", 0)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "pw", 0, 1, records(t, 1, p.ProducerID, p.ProducerEpoch, 0, true, 1)))
	if err := ts.meta.update(func(st *metaState) { st.Transactions[id].State = txnPrepareAbort }); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &id, 60000
	if c := roundTrip[*kmsg.InitProducerIDResponse](rc, req).ErrorCode; c != errConcurrentTransactions {
		t.Fatalf("InitProducerId during PrepareAbort: %d, want CONCURRENT_TRANSACTIONS", c)
	}
	ts.txns.retryPrepared()
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "pw", Partition: 0})
	if lso := l.LastStableOffset(); lso != 2 {
		t.Fatalf("LSO %d after the ABORT marker, want 2", lso)
	}
	if r := roundTrip[*kmsg.InitProducerIDResponse](rc, req); r.ErrorCode != 0 || r.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("InitProducerId after completion: %+v", r)
	}
}

// TestDescribeConfigs: a topic's own configs are DYNAMIC_TOPIC_CONFIG,
// the rest the values its logs run with (the server's defaults, in
// Kafka's spelling); names filter; unknown topics and broker resources
// are refused per resource.
func TestDescribeConfigs(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopicWith(t, rc, "dc", 1, map[string]string{"retention.ms": "3600000", "segment.bytes": "1048576"})
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = v
		for _, r := range []struct {
			typ   kmsg.ConfigResourceType
			name  string
			names []string
		}{{kmsg.ConfigResourceTypeTopic, "dc", nil}, {kmsg.ConfigResourceTypeTopic, "dc", []string{"retention.bytes", "nope"}},
			{kmsg.ConfigResourceTypeTopic, "missing", nil}, {kmsg.ConfigResourceTypeBroker, "1", nil}} {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = r.typ, r.name, r.names
			req.Resources = append(req.Resources, rr)
		}
		resp := roundTrip[*kmsg.DescribeConfigsResponse](rc, req)
		if len(resp.Resources) != 4 {
			t.Fatalf("v%d: %d resources", v, len(resp.Resources))
		}
		all := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			all[c.Name] = c
		}
		want := map[string]string{"retention.ms": "3600000", "segment.bytes": "1048576", "retention.bytes": "-1",
			"cleanup.policy": "delete", "max.message.bytes": "1048588", "message.timestamp.type": "CreateTime",
			"segment.ms": "604800000", "index.interval.bytes": "4096", "segment.index.bytes": "10485760",
			"message.timestamp.after.max.ms": "3600000", "min.cleanable.dirty.ratio": "0.5",
			"min.compaction.lag.ms": "0", "max.compaction.lag.ms": "9223372036854775807", "delete.retention.ms": "86400000"}
		for name, val := range want {
			c, ok := all[name]
			if !ok || c.Value == nil || *c.Value != val {
				t.Errorf("v%d: %s = %+v, want %s", v, name, c, val)
				continue
			}
			own := name == "retention.ms" || name == "segment.bytes"
			if v == 0 && c.IsDefault == own || v >= 1 && (c.Source == kmsg.ConfigSourceDynamicTopicConfig) != own {
				t.Errorf("v%d: %s default %v source %v, own value %v", v, name, c.IsDefault, c.Source, own)
			}
		}
		if len(all) != len(topicConfigs) {
			t.Errorf("v%d: %d configs, want %d", v, len(all), len(topicConfigs))
		}
		if f := resp.Resources[1].Configs; len(f) != 1 || f[0].Name != "retention.bytes" {
			t.Errorf("v%d: filtered %+v", v, f)
		}
		if c := resp.Resources[2].ErrorCode; c != errUnknownTopicOrPartition {
			t.Errorf("v%d: unknown topic: error %d", v, c)
		}
		if c := resp.Resources[3].ErrorCode; c != errInvalidRequest {
			t.Errorf("v%d: broker resource: error %d", v, c)
		}
	}
}

// TestCompactedTopicConfigs: cleanup.policy and the cleaner's topic
// configs are taken by CreateTopics, shown by DescribeConfigs as Kafka
// prints them (Kafka's 0 included, which partlog's options spell
// otherwise), reach the partitions' options, and bad values are refused.
func TestCompactedTopicConfigs(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	set := map[string]string{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0",
		"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "60000", "delete.retention.ms": "0"}
	createTopicWith(t, rc, "changelog", 1, set)
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "changelog"
	req.Resources = append(req.Resources, rr)
	resp := roundTrip[*kmsg.DescribeConfigsResponse](rc, req)
	got := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = *c.Value
	}
	want := map[string]string{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.0",
		"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "60000", "delete.retention.ms": "0"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	o, err := topicOptions(partlog.Options{}, set)
	if err != nil {
		t.Fatal(err)
	}
	if e := o.Effective(); e.CleanupPolicy != partlog.CompactDelete || e.MinCleanableDirtyRatio != 0 || e.DeleteRetentionMs != 0 ||
		e.MinCompactionLagMs != 1000 || e.MaxCompactionLagMs != 60000 {
		t.Fatalf("effective options %+v", e)
	}
	for k, v := range map[string]string{"cleanup.policy": "tiered", "min.cleanable.dirty.ratio": "1.5", "max.compaction.lag.ms": "0",
		"delete.retention.ms": "x"} {
		if _, err := topicOptions(partlog.Options{}, map[string]string{k: v}); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
}
