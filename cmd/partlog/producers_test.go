package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testutil"
)

// producerBatch builds a data batch of n records for producer pid.
func producerBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, txn bool, ts int64) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
	spec.Transactional = txn
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: fmt.Appendf(nil, "p%d-%d", pid, int(seq)+i), Value: []byte("value")}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// producersOut is the JSON output of `partlog producers` as tests read it.
type producersOut struct {
	SchemaVersion    int    `json:"schemaVersion"`
	Dir              string `json:"dir"`
	LogEndOffset     int64  `json:"logEndOffset"`
	LastStableOffset int64  `json:"lastStableOffset"`
	Producers        []struct {
		ProducerID            int64  `json:"producerId"`
		ProducerEpoch         int16  `json:"producerEpoch"`
		LastSequence          int32  `json:"lastSequence"`
		LastOffset            int64  `json:"lastOffset"`
		CoordinatorEpoch      int32  `json:"coordinatorEpoch"`
		CurrentTxnFirstOffset *int64 `json:"currentTxnFirstOffset"`
		LastTimestamp         int64  `json:"lastTimestamp"`
	} `json:"producers"`
	Barriers []int64 `json:"barriers"`
}

// makeProducerLog writes, at offsets:
//
//	0-2   idempotent producer 10, sequences 0-2
//	3-4   transactional producer 20 (epoch 2), sequences 0-1
//	5     COMMIT of producer 20, coordinator epoch 5
//	6     MIRROR_PID_RESET barrier (wipes every producer)
//	7-9   idempotent producer 11 (epoch 1), sequences 0-2
//	10-11 transactional producer 21 (epoch 3), sequences 0-1, left open
//	12-14 plain batch
func makeProducerLog(t *testing.T) (dir string, ts int64) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "logdir", "t-0")
	l, err := partlog.Open(dir, testLogOpts())
	if err != nil {
		t.Fatal(err)
	}
	ts = time.Now().UnixMilli()
	appends := []struct {
		coordinator bool
		b           []byte
	}{
		{false, producerBatch(t, 10, 0, 0, 3, false, ts)},
		{false, producerBatch(t, 20, 2, 0, 2, true, ts+10)},
		{true, batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: ts + 20, ProducerID: 20, ProducerEpoch: 2}, true, 5)},
		{true, batch.AppendMirrorPidResetBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: ts + 30}, "AAAAAAAAAAAAAAAAAAAAAQ")},
		{false, producerBatch(t, 11, 1, 0, 3, false, ts+40)},
		{false, producerBatch(t, 21, 3, 0, 2, true, ts+50)},
		{false, dataBatch(t, 3, "plain")},
	}
	for i, a := range appends {
		var err error
		if a.coordinator {
			_, err = l.AppendAsCoordinator(a.b, 1)
		} else {
			_, err = l.AppendAsLeader(a.b, 1)
		}
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if l.LogEndOffset() != 15 {
		t.Fatalf("log end offset %d, want 15", l.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, dir)
	return dir, ts
}

func runProducersJSON(t *testing.T, args ...string) producersOut {
	t.Helper()
	code, out, errOut := runCLI(t, "", append([]string{"producers", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("producers %v: exit %d\n%s%s", args, code, out, errOut)
	}
	var p producersOut
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if p.SchemaVersion != 1 || strings.Count(out, "\n") != 1 {
		t.Fatalf("output %q", out)
	}
	return p
}

func TestProducersJSON(t *testing.T) {
	dir, ts := makeProducerLog(t)
	before := testutil.HashTree(t, filepath.Dir(dir))

	p := runProducersJSON(t, dir)
	if p.Dir != dir || p.LogEndOffset != 15 || p.LastStableOffset != 10 || !reflect.DeepEqual(p.Barriers, []int64{6}) {
		t.Fatalf("header %+v", p)
	}
	if len(p.Producers) != 2 {
		t.Fatalf("producers %+v, want 11 and 21", p.Producers)
	}
	a, b := p.Producers[0], p.Producers[1]
	if a.ProducerID != 11 || a.ProducerEpoch != 1 || a.LastSequence != 2 || a.LastOffset != 9 || a.CoordinatorEpoch != -1 ||
		a.CurrentTxnFirstOffset != nil || a.LastTimestamp != ts+42 {
		t.Errorf("producer 11: %+v", a)
	}
	if b.ProducerID != 21 || b.ProducerEpoch != 3 || b.LastSequence != 1 || b.LastOffset != 11 || b.CoordinatorEpoch != -1 ||
		b.CurrentTxnFirstOffset == nil || *b.CurrentTxnFirstOffset != 10 || b.LastTimestamp != ts+51 {
		t.Errorf("producer 21: %+v (txn %v)", b, b.CurrentTxnFirstOffset)
	}
	// The raw JSON has null for no open transaction.
	_, out, _ := runCLI(t, "", "producers", "--json", dir)
	if !strings.Contains(out, `"currentTxnFirstOffset":null`) || !strings.Contains(out, `"currentTxnFirstOffset":10`) {
		t.Errorf("raw JSON %s", out)
	}

	// Just before the barrier: producers 10 and 20, the transaction of 20
	// committed by coordinator epoch 5.
	p = runProducersJSON(t, "--at", "6", dir)
	if p.LastStableOffset != 6 || len(p.Barriers) != 0 || len(p.Producers) != 2 {
		t.Fatalf("at 6: %+v", p)
	}
	a, b = p.Producers[0], p.Producers[1]
	if a.ProducerID != 10 || a.LastSequence != 2 || a.LastOffset != 2 {
		t.Errorf("at 6, producer 10: %+v", a)
	}
	if b.ProducerID != 20 || b.ProducerEpoch != 2 || b.CoordinatorEpoch != 5 || b.CurrentTxnFirstOffset != nil || b.LastOffset != 4 || b.LastTimestamp != ts+20 {
		t.Errorf("at 6, producer 20: %+v", b)
	}
	// Inside the transaction of producer 20: open, the LSO pinned at 3.
	p = runProducersJSON(t, "--at", "5", dir)
	if p.LastStableOffset != 3 || len(p.Producers) != 2 || p.Producers[1].CurrentTxnFirstOffset == nil || *p.Producers[1].CurrentTxnFirstOffset != 3 {
		t.Fatalf("at 5: %+v", p)
	}
	// Right after the barrier: no producers, the barrier listed.
	p = runProducersJSON(t, "--at", "7", dir)
	if len(p.Producers) != 0 || !reflect.DeepEqual(p.Barriers, []int64{6}) || p.LastStableOffset != 7 {
		t.Fatalf("at 7: %+v", p)
	}
	p = runProducersJSON(t, "--at", "0", dir)
	if len(p.Producers) != 0 || p.LastStableOffset != 0 {
		t.Fatalf("at 0: %+v", p)
	}

	// Counts agree with verify.
	_, vout, _ := runCLI(t, "", "verify", "--json", dir)
	r := parseReports(t, vout)[0]
	if r.Producers != 2 || r.LastStableOffset != 10 || !reflect.DeepEqual(r.Barriers, []int64{6}) {
		t.Fatalf("verify: producers %d LSO %d barriers %v", r.Producers, r.LastStableOffset, r.Barriers)
	}
	sameTree(t, before, testutil.HashTree(t, filepath.Dir(dir)))
}

func TestProducersText(t *testing.T) {
	dir, ts := makeProducerLog(t)
	code, out, errOut := runCLI(t, "", "producers", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	want := []string{
		fmt.Sprintf("producerId: 11 producerEpoch: 1 lastSequence: 2 lastOffset: 9 coordinatorEpoch: -1 currentTxnFirstOffset: none lastTimestamp: %d", ts+42),
		fmt.Sprintf("producerId: 21 producerEpoch: 3 lastSequence: 1 lastOffset: 11 coordinatorEpoch: -1 currentTxnFirstOffset: 10 lastTimestamp: %d", ts+51),
		"barriers at offsets: 6",
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "state at offset 15 (log end offset 15") {
		t.Errorf("header: %s", out)
	}
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
}

// TestProducersDamaged: with a torn tail, the state is the one recovery
// would load (the tail ignored); the problem is warned about, and the exit
// code is 0 because the state could be loaded.
func TestProducersDamaged(t *testing.T) {
	dir, _ := makeProducerLog(t)
	appendFile(t, lastLog(t, dir), garbage)
	code, out, errOut := runCLI(t, "", "producers", "--json", dir)
	if code != exitOK || !strings.Contains(errOut, "warning: recovery found problems") || !strings.Contains(errOut, "torn-tail") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var p producersOut
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Producers) != 2 || p.LogEndOffset != 15 {
		t.Fatalf("%+v, %v", p, err)
	}
}
