package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster mirroring between running servers (`partlog serve`), with kgo
// clients. Every server hands out producer ids from 0, so the first
// producers of two clusters get the same ids: the tests check that they
// do, and that the MIRROR_PID_RESET barrier written when a mirror stops
// is what keeps them apart. The same scenarios run with the barrier
// switched off (the servers' hidden --unsafe-no-mirror-barrier) and must
// then show the failures mirror.md §1.2 predicts.

const mirrorTopic = "t"

// mirrorStatus is one partition of `partlog mirror status --json`.
type mirrorStatus struct {
	Topic              string `json:"topic"`
	Partition          int32  `json:"partition"`
	State              string `json:"state"`
	Step               string `json:"step"`
	SourceClusterID    string `json:"source_cluster_id"`
	LogEndOffset       int64  `json:"log_end_offset"`
	LastMirroredOffset int64  `json:"last_mirrored_offset"`
	Lag                int64  `json:"lag"`
	BarrierOffset      int64  `json:"barrier_offset"`
	Error              string `json:"error"`
	Truncated          int64  `json:"truncated_offsets"`
}

type mirrorAnswer struct {
	ClusterID  string         `json:"cluster_id"`
	Partitions []mirrorStatus `json:"partitions"`
	Error      string         `json:"error"`
}

// mirrorCLI runs `partlog mirror ARGS --json` and decodes its answer.
func mirrorCLI(t *testing.T, args ...string) (mirrorAnswer, int) {
	t.Helper()
	out, code := runPartlog(t, append([]string{"mirror"}, append(args, "--json")...)...)
	var a mirrorAnswer
	// stderr may follow the JSON (exit 4 names the failed partitions).
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&a); err != nil && code == 0 {
		t.Fatalf("partlog mirror %v: %v: %s", args, err, out)
	}
	return a, code
}

// startMirror makes dst mirror the topic from src (src's admin endpoint
// given, so failback finds its position).
func startMirror(t *testing.T, dst, src *server, topic string, flags ...string) mirrorStatus {
	t.Helper()
	args := append([]string{"start", "--server", dst.admin, "--dir", dst.dir, "--source", src.addr, "--source-admin", src.admin, "--topics", topic}, flags...)
	a, code := mirrorCLI(t, args...)
	if code != 0 || len(a.Partitions) != 1 || a.Partitions[0].State != "MIRRORING" {
		t.Fatalf("mirror start: exit %d, %+v", code, a)
	}
	return a.Partitions[0]
}

// stopMirror stops dst's mirror and returns the partition's status.
func stopMirror(t *testing.T, dst *server, topic string) mirrorStatus {
	t.Helper()
	a, code := mirrorCLI(t, "stop", "--server", dst.admin, "--dir", dst.dir, "--topics", topic)
	if code != 0 || len(a.Partitions) != 1 || a.Partitions[0].State != "STOPPED" {
		t.Fatalf("mirror stop: exit %d, %+v", code, a)
	}
	return a.Partitions[0]
}

func status(t *testing.T, s *server, topic string) mirrorStatus {
	t.Helper()
	a, code := mirrorCLI(t, "status", "--server", s.admin)
	if code != 0 {
		t.Fatalf("mirror status: exit %d, %+v", code, a)
	}
	for _, p := range a.Partitions {
		if p.Topic == topic {
			return p
		}
	}
	t.Fatalf("mirror status has no %s: %+v", topic, a)
	return mirrorStatus{}
}

// logEnd is the topic's log end offset (ListOffsets latest,
// read_uncommitted: the high watermark, which is the log end here).
func logEnd(t *testing.T, s *server, topic string) int64 {
	t.Helper()
	c := s.client(t)
	ctx := testContext(t, 10*time.Second)
	req := kgoListEnd(topic)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// waitCaughtUp waits until dst mirrors src's whole log.
func waitCaughtUp(t *testing.T, dst, src *server, topic string) {
	t.Helper()
	want := logEnd(t, src, topic)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := status(t, dst, topic)
		if st.State == "MIRRORING" && st.LogEndOffset == want {
			return
		}
		if time.Now().After(deadline) || st.State == "FAILED" {
			t.Fatalf("mirror did not catch up with %d: %+v\n%s", want, st, dst.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// producer is a kgo producer of one cluster; its errors are counted, not
// fatal, so the barrier-off runs can show them.
type producer struct {
	t   *testing.T
	c   *kgo.Client
	txn bool
	// rejected: records whose produce or transaction failed.
	rejected []string
	// acked: records acknowledged as written (committed for a
	// transactional producer).
	acked []string
}

func newProducer(t *testing.T, s *server, topic, txnID string) *producer {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(8 * time.Second), kgo.RecordRetries(5)}
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(60*time.Second))
	}
	return &producer{t: t, c: s.client(t, opts...), txn: txnID != ""}
}

func (p *producer) id() int64 {
	p.t.Helper()
	id, err := p.idErr()
	if err != nil {
		p.t.Fatalf("producer id: %v", err)
	}
	return id
}

func (p *producer) idErr() (int64, error) {
	ctx := testContext(p.t, 10*time.Second)
	id, _, err := p.c.ProducerID(ctx)
	return id, err
}

// sameID reports whether two transactional producers of different
// clusters got the same producer id. With the barrier off the second may
// already have been fenced by the first's state in the mirrored log (the
// failure those runs exist to show); its id is then unknown and counts as
// the same.
func sameID(t *testing.T, barrier bool, a, b *producer) bool {
	t.Helper()
	idA := a.id()
	idB, err := b.idErr()
	if err != nil {
		if barrier {
			t.Fatalf("producer id: %v", err)
		}
		t.Logf("barrier off: the producer is fenced by the mirrored state (%v)", err)
		return true
	}
	return idA == idB
}

// send produces each value as its own batch (idempotent producer).
func (p *producer) send(values ...string) {
	for _, v := range values {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := p.c.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr()
		cancel()
		if err != nil {
			p.t.Logf("produce %q: %v", v, err)
			p.rejected = append(p.rejected, v)
			continue
		}
		p.acked = append(p.acked, v)
	}
}

// transaction produces values in one transaction and commits (or
// aborts); open leaves it open after the records are written.
func (p *producer) transaction(commit, open bool, values ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.c.BeginTransaction(); err != nil {
		p.t.Fatalf("begin: %v", err)
	}
	var err error
	for _, v := range values {
		if err = p.c.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			break
		}
	}
	if open && err == nil {
		return
	}
	end := kgo.TryCommit
	if !commit || err != nil {
		end = kgo.TryAbort
	}
	if eerr := p.c.EndTransaction(ctx, end); err == nil {
		err = eerr
	}
	switch {
	case err != nil:
		p.t.Logf("transaction %v: %v", values, err)
		p.rejected = append(p.rejected, values...)
		if ab := p.c.AbortBufferedRecords(ctx); ab == nil {
			_ = p.c.EndTransaction(ctx, kgo.TryAbort)
		}
	case commit:
		p.acked = append(p.acked, values...)
	}
}

// abortOpen aborts the transaction transaction(…, open=true) left open.
func (p *producer) abortOpen() {
	ctx := testContext(p.t, 20*time.Second)
	if err := p.c.EndTransaction(ctx, kgo.TryAbort); err != nil {
		p.t.Logf("abort: %v", err)
	}
}

// committed reads the topic read_committed from the start until no
// record came for a while (at least want records are waited for).
func committed(t *testing.T, s *server, topic string, want int) []string {
	t.Helper()
	c := s.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	quiet := 700 * time.Millisecond
	if want > 0 {
		quiet = 4 * time.Second
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		fs := c.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s-%d: %v", topic, p, err)
			}
		})
		rs := fs.Records()
		for _, r := range rs {
			got = append(got, string(r.Value))
		}
		if len(rs) == 0 {
			return got
		}
		if len(got) >= want {
			quiet = 700 * time.Millisecond
		}
	}
}

// outcome compares what a cluster's read_committed consumers see with
// what its producers were told: "clean" when every acknowledged record
// is there exactly once in order and nothing was rejected; otherwise
// the failures, e.g. "rejected(2) lost(3)".
func outcome(want, got []string, rejected int) string {
	var parts []string
	if rejected > 0 {
		parts = append(parts, fmt.Sprintf("rejected(%d)", rejected))
	}
	lost, dup := 0, 0
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	for _, w := range want {
		switch count[w] {
		case 0:
			lost++
		case 1:
		default:
			dup++
		}
	}
	if lost > 0 {
		parts = append(parts, fmt.Sprintf("lost(%d)", lost))
	}
	if dup > 0 {
		parts = append(parts, fmt.Sprintf("duplicated(%d)", dup))
	}
	if len(parts) == 0 && !slices.Equal(want, got) {
		parts = append(parts, fmt.Sprintf("unexpected(%d)", len(got)-len(want)))
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, " ")
}

func servers(t *testing.T, barrier bool, names ...string) []*server {
	var out []*server
	for range names {
		var args []string
		if !barrier {
			args = append(args, "--unsafe-no-mirror-barrier")
		}
		out = append(out, startServer(t, t.TempDir(), args...))
	}
	return out
}

// refused checks that a mirroring partition refuses a produce with
// POLICY_VIOLATION.
func refused(t *testing.T, s *server, topic string) {
	t.Helper()
	// Not idempotent: it must not take a producer id of the cluster.
	c := s.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(5*time.Second), kgo.DisableIdempotentWrite())
	ctx := testContext(t, 10*time.Second)
	err := c.ProduceSync(ctx, kgo.StringRecord("must-not-land")).FirstErr()
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("produce to a mirroring partition: %v, want POLICY_VIOLATION", err)
	}
}

// scenarioResult is one cell of the note's table.
type scenarioResult struct {
	scenario string
	barrier  bool
	outcome  string
}

func (r scenarioResult) log(t *testing.T) {
	b := "on"
	if !r.barrier {
		b = "off"
	}
	t.Logf("SCENARIO %-15s barrier %-3s → %s", r.scenario, b, r.outcome)
	if f := os.Getenv("PARTLOG_MIRROR_TABLE"); f != "" {
		if fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(fh, "%s\t%s\t%s\n", r.scenario, b, r.outcome)
			fh.Close()
		}
	}
}

// check is a scenario's verdict: clean with the barrier, a failure
// without it.
func check(t *testing.T, barrier bool, scenario, out string) {
	t.Helper()
	scenarioResult{scenario, barrier, out}.log(t)
	switch {
	case barrier && out != "clean":
		t.Errorf("%s with the barrier: %s, want clean", scenario, out)
	case !barrier && out == "clean":
		t.Errorf("%s without the barrier came out clean: the barrier would not be what makes it pass", scenario)
	}
}

// TestMirrorActivePassiveAndFailback: A → B, stop on B, B takes writes
// from producers whose ids equal A's; then failback B → A: A truncates
// to the position B recorded, mirrors B, stops and takes writes again.
func TestMirrorActivePassiveAndFailback(t *testing.T) {
	for _, barrier := range []bool{true, false} {
		t.Run(fmt.Sprintf("barrier=%v", barrier), func(t *testing.T) {
			s := servers(t, barrier, "A", "B")
			a, b := s[0], s[1]

			// A: an idempotent producer (3 batches), a transactional one
			// (commit, abort, and a transaction left open at the failover).
			pa := newProducer(t, a, mirrorTopic, "")
			pa.send("a-1", "a-2", "a-3")
			ta := newProducer(t, a, mirrorTopic, "tx-a")
			ta.transaction(true, false, "a-t1", "a-t2")
			ta.transaction(false, false, "a-aborted")
			ta.transaction(true, true, "a-open")
			if len(pa.rejected)+len(ta.rejected) > 0 {
				t.Fatalf("writes to A rejected: %v %v", pa.rejected, ta.rejected)
			}

			// B mirrors A, read-only while it does.
			startMirror(t, b, a, mirrorTopic)
			waitCaughtUp(t, b, a, mirrorTopic)
			refused(t, b, mirrorTopic)
			if got := committed(t, b, mirrorTopic, 0); !slices.Equal(got, []string{"a-1", "a-2", "a-3", "a-t1", "a-t2"}) {
				t.Fatalf("B while mirroring, read_committed: %v", got)
			}

			// Failover: stop on B. TRUNCATE_LSO drops A's open transaction.
			st := stopMirror(t, b, mirrorTopic)
			if barrier != (st.BarrierOffset >= 0) {
				t.Fatalf("barrier offset %d with barrier=%v", st.BarrierOffset, barrier)
			}
			pb := newProducer(t, b, mirrorTopic, "")
			pb.send("b-1", "b-2", "b-3")
			tb := newProducer(t, b, mirrorTopic, "tx-b")
			tb.transaction(true, false, "b-t1", "b-t2")
			if pa.id() != pb.id() || !sameID(t, barrier, ta, tb) {
				t.Fatalf("producer ids do not collide: A %d, B %d (idempotent)", pa.id(), pb.id())
			}
			wantB := append([]string{"a-1", "a-2", "a-3", "a-t1", "a-t2"}, "b-1", "b-2", "b-3", "b-t1", "b-t2")
			gotB := committed(t, b, mirrorTopic, len(wantB))
			check(t, barrier, "active-passive", outcome(wantB, gotB, len(pb.rejected)+len(tb.rejected)))
			if t.Failed() {
				t.Logf("B read_committed: %v", gotB)
			}

			// A, not knowing, writes on (lost at failback): the open
			// transaction is aborted, one more record is written.
			ta.abortOpen()
			pa.send("a-divergent")

			// Failback: A mirrors B from the position B recorded. What A
			// wrote since (the abort marker and a-divergent) is cut, which
			// the start refuses unless told to, and then counts.
			endA := logEnd(t, a, mirrorTopic)
			if ans, code := mirrorCLI(t, "start", "--server", a.admin, "--dir", a.dir, "--source", b.addr, "--source-admin", b.admin,
				"--topics", mirrorTopic); code != 4 || !strings.Contains(ans.Error, "allow_truncation") || logEnd(t, a, mirrorTopic) != endA {
				t.Fatalf("failback without --allow-truncation: exit %d, %+v, log end %d (was %d)", code, ans, logEnd(t, a, mirrorTopic), endA)
			}
			if st := startMirror(t, a, b, mirrorTopic, "--allow-truncation"); st.Truncated < 2 {
				t.Errorf("failback truncated %d offsets of A, want its divergent writes (2 or more)", st.Truncated)
			}
			waitCaughtUp(t, a, b, mirrorTopic)
			refused(t, a, mirrorTopic)
			sa := stopMirror(t, a, mirrorTopic)
			if barrier && sa.LastMirroredOffset != logEnd(t, b, mirrorTopic) {
				t.Errorf("A stopped at %d, B ends at %d", sa.LastMirroredOffset, logEnd(t, b, mirrorTopic))
			}
			// The old producer of A goes on, and a new transaction of tx-a.
			pa.acked, pa.rejected = nil, nil
			pa.send("a-4")
			ta2 := newProducer(t, a, mirrorTopic, "tx-a")
			ta2.transaction(true, false, "a-t3")
			wantA := append(slices.Clone(wantB), "a-4", "a-t3")
			gotA := committed(t, a, mirrorTopic, len(wantA))
			if slices.Contains(gotA, "a-divergent") {
				t.Errorf("A kept its divergent record after failback: %v", gotA)
			}
			check(t, barrier, "failback", outcome(wantA, gotA, len(pa.rejected)+len(ta2.rejected)))
			if t.Failed() {
				t.Logf("A read_committed: %v", gotA)
			}
			dumpShowsBarriers(t, a, mirrorTopic, barrier, 2)
		})
	}
}

// TestMirrorChain: A → B → C; stop at B (its barrier reaches C), B
// writes, then stop at C and C writes; the first producers of all three
// clusters have the same ids.
func TestMirrorChain(t *testing.T) {
	for _, barrier := range []bool{true, false} {
		t.Run(fmt.Sprintf("barrier=%v", barrier), func(t *testing.T) {
			s := servers(t, barrier, "A", "B", "C")
			a, b, c := s[0], s[1], s[2]
			pa := newProducer(t, a, mirrorTopic, "")
			pa.send("a-1", "a-2", "a-3")
			ta := newProducer(t, a, mirrorTopic, "tx-a")
			ta.transaction(true, false, "a-t1")

			startMirror(t, b, a, mirrorTopic)
			startMirror(t, c, b, mirrorTopic)
			waitCaughtUp(t, b, a, mirrorTopic)
			waitCaughtUp(t, c, b, mirrorTopic)

			stopMirror(t, b, mirrorTopic)
			pb := newProducer(t, b, mirrorTopic, "")
			pb.send("b-1", "b-2", "b-3")
			tb := newProducer(t, b, mirrorTopic, "tx-b")
			tb.transaction(true, false, "b-t1")
			waitCaughtUp(t, c, b, mirrorTopic)
			refused(t, c, mirrorTopic)
			wantB := []string{"a-1", "a-2", "a-3", "a-t1", "b-1", "b-2", "b-3", "b-t1"}
			gotB := committed(t, b, mirrorTopic, len(wantB))

			stopMirror(t, c, mirrorTopic)
			pc := newProducer(t, c, mirrorTopic, "")
			pc.send("c-1", "c-2", "c-3")
			tc := newProducer(t, c, mirrorTopic, "tx-c")
			tc.transaction(true, false, "c-t1")
			if pa.id() != pc.id() || !sameID(t, barrier, ta, tc) || pb.id() != pc.id() {
				t.Fatalf("producer ids do not collide: A %d, B %d, C %d (idempotent)", pa.id(), pb.id(), pc.id())
			}
			wantC := append(slices.Clone(wantB), "c-1", "c-2", "c-3", "c-t1")
			gotC := committed(t, c, mirrorTopic, len(wantC))
			rejected := len(pb.rejected) + len(tb.rejected) + len(pc.rejected) + len(tc.rejected)
			check(t, barrier, "chain", outcome(wantC, gotC, rejected))
			if t.Failed() {
				t.Logf("B: %v\nC: %v", gotB, gotC)
			}
			dumpShowsBarriers(t, c, mirrorTopic, barrier, 2)
		})
	}
}

// TestMirrorFanOut: A → B and A → C; B stops and writes while C still
// mirrors A (and gets A's later records), then C stops and writes. Each
// destination writes its own barrier; nothing crosses between B and C.
func TestMirrorFanOut(t *testing.T) {
	for _, barrier := range []bool{true, false} {
		t.Run(fmt.Sprintf("barrier=%v", barrier), func(t *testing.T) {
			s := servers(t, barrier, "A", "B", "C")
			a, b, c := s[0], s[1], s[2]
			pa := newProducer(t, a, mirrorTopic, "")
			pa.send("a-1", "a-2")
			startMirror(t, b, a, mirrorTopic)
			startMirror(t, c, a, mirrorTopic)
			waitCaughtUp(t, b, a, mirrorTopic)
			waitCaughtUp(t, c, a, mirrorTopic)

			stopMirror(t, b, mirrorTopic)
			pb := newProducer(t, b, mirrorTopic, "")
			pb.send("b-1", "b-2")
			pa.send("a-3")
			waitCaughtUp(t, c, a, mirrorTopic)
			stopMirror(t, c, mirrorTopic)
			pc := newProducer(t, c, mirrorTopic, "")
			pc.send("c-1", "c-2", "c-3")
			if pa.id() != pb.id() || pa.id() != pc.id() {
				t.Fatalf("producer ids do not collide: %d %d %d", pa.id(), pb.id(), pc.id())
			}
			wantB := []string{"a-1", "a-2", "b-1", "b-2"}
			wantC := []string{"a-1", "a-2", "a-3", "c-1", "c-2", "c-3"}
			outB := outcome(wantB, committed(t, b, mirrorTopic, len(wantB)), len(pb.rejected))
			outC := outcome(wantC, committed(t, c, mirrorTopic, len(wantC)), len(pc.rejected))
			out := "clean"
			if outB != "clean" || outC != "clean" {
				out = "B " + outB + ", C " + outC
			}
			check(t, barrier, "fan-out", out)
		})
	}
}

// TestMirrorFanIn: A → C on topic t1 and B → C on topic t2, two links of
// C. Stopping t1 leaves t2 mirroring (and read-only); one producer of C
// then writes to both topics, meeting A's producer 0 in t1 and B's in t2
// unless the barriers emptied them.
func TestMirrorFanIn(t *testing.T) {
	for _, barrier := range []bool{true, false} {
		t.Run(fmt.Sprintf("barrier=%v", barrier), func(t *testing.T) {
			s := servers(t, barrier, "A", "B", "C")
			a, b, c := s[0], s[1], s[2]
			pa := newProducer(t, a, "t1", "")
			pa.send("a-1", "a-2")
			pb := newProducer(t, b, "t2", "")
			pb.send("b-1", "b-2", "b-3")
			startMirror(t, c, a, "t1")
			startMirror(t, c, b, "t2")
			waitCaughtUp(t, c, a, "t1")
			waitCaughtUp(t, c, b, "t2")

			stopMirror(t, c, "t1")
			refused(t, c, "t2")
			pc := newProducer(t, c, "t1", "")
			pc.send("c-1", "c-2")
			stopMirror(t, c, "t2")
			rejected := len(pc.rejected)
			pc.acked, pc.rejected = nil, nil
			for _, v := range []string{"c-3", "c-4"} {
				ctx := testContext(t, 15*time.Second)
				if err := pc.c.ProduceSync(ctx, &kgo.Record{Topic: "t2", Value: []byte(v)}).FirstErr(); err != nil {
					t.Logf("produce %q to t2: %v", v, err)
					rejected++
				}
			}
			if pa.id() != pb.id() || pa.id() != pc.id() {
				t.Fatalf("producer ids do not collide: %d %d %d", pa.id(), pb.id(), pc.id())
			}
			want1 := []string{"a-1", "a-2", "c-1", "c-2"}
			want2 := []string{"b-1", "b-2", "b-3", "c-3", "c-4"}
			got := append(committed(t, c, "t1", len(want1)), committed(t, c, "t2", len(want2))...)
			check(t, barrier, "fan-in", outcome(append(want1, want2...), got, rejected))
		})
	}
}

// TestMirrorStopKilled SIGKILLs B at a random moment of its stop; the
// stop finishes when B starts again, with exactly one barrier.
func TestMirrorStopKilled(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	if n, err := strconv.Atoi(os.Getenv("PARTLOG_MIRROR_KILL_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	seen := map[string]int{}
	a := startServer(t, t.TempDir())
	pa := newProducer(t, a, mirrorTopic, "")
	pa.send("a-1", "a-2")
	ta := newProducer(t, a, mirrorTopic, "tx-a")
	ta.transaction(true, false, "a-t1")
	ta.transaction(true, true, "a-open")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range rounds {
		b := startServer(t, t.TempDir(), "--fsync")
		startMirror(t, b, a, mirrorTopic)
		waitCaughtUp(t, b, a, mirrorTopic)
		delay := time.Duration(rng.IntN(40)) * time.Millisecond
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = runPartlog(t, "mirror", "stop", "--server", b.admin, "--dir", b.dir, "--topics", mirrorTopic, "--json")
		}()
		time.Sleep(delay)
		b.kill()
		<-done
		atKill := checkpointAt(t, b)
		seen[atKill]++
		b.restart()
		st := status(t, b, mirrorTopic)
		t.Logf("round %d: killed after %v at %s; after restart %s", round, delay, atKill, st.State)
		if st.State != "STOPPED" {
			// Killed before the stop was recorded: still mirroring.
			st = stopMirror(t, b, mirrorTopic)
		}
		if st.BarrierOffset < 0 {
			t.Fatalf("round %d: stopped without a barrier: %+v", round, st)
		}
		pb := newProducer(t, b, mirrorTopic, "")
		pb.send("b-1")
		if len(pb.rejected) > 0 {
			t.Fatalf("round %d: B refused a write after the stop", round)
		}
		dumpShowsBarriers(t, b, mirrorTopic, true, 1)
	}
	t.Logf("checkpoints found at the kills: %v", seen)
}

// checkpointAt is the state and step in the partition's mirror.checkpoint
// (the stop's progress when the server died).
func checkpointAt(t *testing.T, s *server) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, mirrorTopic+"-0", "mirror.checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	var state, step string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "state "); ok {
			state = v
		}
		if v, ok := strings.CutPrefix(line, "step "); ok {
			step = v
		}
	}
	return state + "/" + step
}

// dumpShowsBarriers stops s and checks with `partlog dump` that its
// partition holds want barriers (none without the barrier), between the
// source's batches and its own.
func dumpShowsBarriers(t *testing.T, s *server, topic string, barrier bool, want int) {
	t.Helper()
	s.stop()
	logs, err := filepath.Glob(filepath.Join(s.dir, topic+"-0", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segments in %s: %v", s.dir, err)
	}
	out, code := runPartlog(t, append([]string{"dump", "--deep-iteration", "--mirror-format"}, logs...)...)
	if code != 0 {
		t.Fatalf("dump: exit %d: %s", code, out)
	}
	n := strings.Count(out, "MirrorPidReset")
	if !barrier {
		want = 0
	}
	if n != want {
		t.Errorf("dump shows %d barriers, want %d:\n%s", n, want, out)
	}
	s.restart()
}

// kgoListEnd asks for the latest offset of partition 0.
func kgoListEnd(topic string) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
