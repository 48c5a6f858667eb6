package server

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHostileProducerIDNearMax: one produce with a producer id near 2^63
// overflowed the allocator (raised above every id of the logs): after a
// restart InitProducerId handed out a negative id, after a second the
// server refused to start. Such an id is refused; the server restarts
// and hands out small non-negative ids.
func TestHostileProducerIDNearMax(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "p", 1)
	for _, pid := range []int64{math.MaxInt64 - 1, maxClientProducerID + 1} {
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("p", 0, 1, records(t, 1, pid, 0, 0, false, 4)))
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != errInvalidRecord || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "producer id") {
			t.Fatalf("producer id %d: error %d %v, want INVALID_RECORD naming the producer id", pid, p.ErrorCode, p.ErrorMessage)
		}
	}
	ts.close(t)
	for run := 0; run < 2; run++ {
		ts = startTest(t, Config{Dir: dir})
		rc = dial(t, ts.addr)
		if id := initPID(t, rc, nil, 0).ProducerID; id < 0 || id > 10_000 {
			t.Fatalf("restart %d: InitProducerId handed out %d", run, id)
		}
		ts.close(t)
	}
}

// TestOverflowedStateFileStarts: a state file an earlier version left
// with a negative producer-id block (its allocator's overflow) no longer
// stops the server: the block is reset with a warning, and ids above
// every id of the logs are handed out.
func TestOverflowedStateFileStarts(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "o", 1)
	roundTrip[*kmsg.ProduceResponse](rc, produceReq("o", 0, 1, records(t, 1, 4000, 0, 0, false, 4)))
	ts.close(t)
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st metaState
	if err := jsonUnmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	st.ProducerIDBlockEnd = math.MinInt64 + 808
	out, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	var warned []string
	ts = startTest(t, Config{Dir: dir, Logf: func(f string, a ...any) { warned = append(warned, f) }})
	if len(warned) == 0 {
		t.Fatal("no warning for the overflowed block")
	}
	if id := initPID(t, dial(t, ts.addr), nil, 0).ProducerID; id <= 4000 || id > 5000 {
		t.Fatalf("InitProducerId after the reset: %d, want just above 4000", id)
	}
}

// TestProducerIDsAvoidAppendedIDs: a client that appends with a producer
// id never handed out made InitProducerId hand that id to the next
// producer, whose first batch was then answered as a duplicate of the
// other's and never written. Every append raises the allocator above its
// id, before and after a restart.
func TestProducerIDsAvoidAppendedIDs(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "a", 1)
	first := initPID(t, rc, nil, 0).ProducerID
	for _, pid := range []int64{first + 1, first + 2, first + 7} {
		if r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("a", 0, 1, records(t, 1, pid, 0, 0, false, 4))); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("append with producer id %d: %d", pid, r.Topics[0].Partitions[0].ErrorCode)
		}
	}
	check := func(what string, held int64) {
		t.Helper()
		id := initPID(t, rc, nil, 0).ProducerID
		if id <= held {
			t.Fatalf("%s: InitProducerId handed out %d, which a log's producer state holds", what, id)
		}
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("a", 0, 1, records(t, 1, id, 0, 0, false, 4)))
		if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != ts.dir.Logs()[partlog.TopicPartition{Topic: "a"}].LogEndOffset()-1 {
			t.Fatalf("%s: the new producer's first batch: %+v (a duplicate is answered with an old offset)", what, p)
		}
	}
	check("same run", first+7)
	if r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("a", 0, 1, records(t, 1, 1<<40, 0, 0, false, 4))); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	ts.close(t)
	ts = startTest(t, Config{Dir: dir})
	rc = dial(t, ts.addr)
	check("after a restart", 1<<40)
}
