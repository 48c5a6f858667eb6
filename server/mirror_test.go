package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveAdmin starts ts's admin endpoint and returns its address.
func serveAdmin(t *testing.T, ts *testServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ts.ServeAdmin(ln) }()
	return ln.Addr().String()
}

func produceOK(t *testing.T, rc *rawConn, topic string, part int32, recs []byte) int64 {
	t.Helper()
	resp := roundTrip[*kmsg.ProduceResponse](rc, produceReq(topic, part, -1, recs))
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("produce to %s-%d: error %d %v", topic, part, p.ErrorCode, p.ErrorMessage)
	}
	return p.BaseOffset
}

// appendBypassing appends records to a partition as a leader without the
// produce path's checks (a transactional batch no coordinator knows of:
// an open transaction of another cluster's producer, as a mirror sees
// one), and moves the high watermark over them.
func appendBypassing(t *testing.T, ts *testServer, topic string, part int32, recs []byte) {
	t.Helper()
	p, code := ts.partitionFor(topic, part)
	if code != errNone {
		t.Fatalf("%s-%d: %d", topic, part, code)
	}
	info, err := p.mirror.AppendClient(recs, p.epoch.Load())
	if err != nil {
		t.Fatalf("append to %s-%d: %v", topic, part, err)
	}
	p.raiseHighWatermark(info.LastOffset + 1)
}

func logOf(t *testing.T, ts *testServer, topic string, n int32) *partlog.Log {
	t.Helper()
	p, code := ts.partitionFor(topic, n)
	if code != errNone {
		t.Fatalf("%s-%d: error %d", topic, n, code)
	}
	return p.log
}

// waitMirrored waits until dst's partition has src's log end.
func waitMirrored(t *testing.T, dst, src *testServer, topic string, n int32) {
	t.Helper()
	want := logOf(t, src, topic, n).LogEndOffset()
	deadline := time.Now().Add(20 * time.Second)
	for logOf(t, dst, topic, n).LogEndOffset() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s-%d: log end %d, want %d; status %+v", topic, n, logOf(t, dst, topic, n).LogEndOffset(), want, dst.MirrorStatus())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mirrorTopic starts dst mirroring topic from src (one link, the default
// name) and waits until its partition 0 has src's log end.
func mirrorTopic(t *testing.T, dst, src *testServer, topic string) {
	t.Helper()
	if _, err := dst.StartMirror(context.Background(), MirrorStartRequest{Source: src.addr, Topics: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, dst, src, topic, 0)
}

// segmentBytes returns the bytes of the partition's first segment up to
// its log end position.
func segmentBytes(t *testing.T, ts *testServer, topic string, n int32) []byte {
	t.Helper()
	l := logOf(t, ts, topic, n)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(l.Dir(), "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10) // the test's data is far smaller; the file is preallocated
	got, err := f.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(buf[:got], "\x00")
}

// TestMirrorInProcess: B mirrors A's two partitions byte for byte,
// refuses produces while mirroring, stops with a barrier per partition
// (truncating the open transaction of partition 1), then takes a batch
// of producer 0 at sequence 0, which without the barrier would be a
// duplicate of A's first batch.
func TestMirrorInProcess(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	aAdmin := serveAdmin(t, a)
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "m", 2)
	for i := range int32(3) {
		produceOK(t, ra, "m", 0, records(t, 2, 0, 0, 2*i, false, 10))
	}
	produceOK(t, ra, "m", 1, records(t, 1, 7, 0, 0, false, 10))
	// An open transaction of producer 1 on partition 1 (the server's
	// coordinator is bypassed: the log takes the batch as a leader).
	appendBypassing(t, a, "m", 1, records(t, 1, 1, 0, 0, true, 10))

	st, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, SourceAdmin: aAdmin, Topics: []string{"m"}})
	if err != nil || len(st) != 2 {
		t.Fatalf("start: %v %+v", err, st)
	}
	for _, p := range st {
		if p.State != "MIRRORING" || p.SourceClusterID != a.meta.clusterID() || p.Mirror != "from-"+a.meta.clusterID() {
			t.Fatalf("after start: %+v", p)
		}
	}
	if id := b.topicByName("m").id; id != a.topicByName("m").id {
		t.Errorf("mirror topic id %v, source %v", id, a.topicByName("m").id)
	}
	waitMirrored(t, b, a, "m", 0)
	waitMirrored(t, b, a, "m", 1)
	for n := range int32(2) {
		if !bytes.Equal(segmentBytes(t, a, "m", n), segmentBytes(t, b, "m", n)) {
			t.Errorf("m-%d: mirrored bytes differ from the source's", n)
		}
	}
	for _, p := range b.MirrorStatus() {
		if p.Lag != 0 || p.SourceHighWatermark != p.LogEndOffset {
			t.Errorf("caught up but status says %+v", p)
		}
	}

	// Read-only: produces and AddPartitionsToTxn refused.
	resp := roundTrip[*kmsg.ProduceResponse](rb, produceReq("m", 0, -1, records(t, 1, -1, 0, 0, false, 10)))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != errPolicyViolation || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "read-only") {
		t.Fatalf("produce while mirroring: %d %v", p.ErrorCode, p.ErrorMessage)
	}

	// Failback lookups are not found while B mirrors.
	if pos := b.LastMirrorPosition(a.meta.clusterID(), "m", mirror.TopicID(a.topicByName("m").id), 0); pos.Found {
		t.Fatalf("position while mirroring: %+v", pos)
	}

	st, err = b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"m"}})
	if err != nil || len(st) != 2 {
		t.Fatalf("stop: %v %+v", err, st)
	}
	if st[0].State != "STOPPED" || st[0].BarrierOffset != 6 || st[0].LastMirroredOffset != 6 {
		t.Errorf("m-0 after stop: %+v", st[0])
	}
	if st[1].State != "STOPPED" || st[1].BarrierOffset != 1 || st[1].LastMirroredOffset != 1 {
		t.Errorf("m-1 after stop (open transaction at 1 truncated): %+v", st[1])
	}
	if len(b.links) != 0 {
		t.Errorf("links left after the last topic stopped: %v", b.links)
	}
	// Producer 0 at sequence 0 is a new producer after the barrier.
	if off := produceOK(t, rb, "m", 0, records(t, 2, 0, 0, 0, false, 10)); off != 7 {
		t.Errorf("first batch of B's producer 0 at %d, want 7", off)
	}
	pos := b.LastMirrorPosition(a.meta.clusterID(), "m", mirror.TopicID(a.topicByName("m").id), 1)
	if !pos.Found || pos.Offset != 1 {
		t.Errorf("position for A: %+v", pos)
	}
	if pos := b.LastMirrorPosition("other", "m", mirror.TopicID(a.topicByName("m").id), 1); pos.Found {
		t.Errorf("position for another cluster: %+v", pos)
	}
}

// TestMirrorNoBarrier: with the test switch, the stop writes no barrier
// and B's producer 0 at sequence 0 is taken for a retry of A's batch.
func TestMirrorNoBarrier(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{UnsafeMirrorNoBarrier: true})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "n", 1)
	produceOK(t, ra, "n", 0, records(t, 2, 0, 0, 0, false, 10))
	mirrorTopic(t, b, a, "n")
	st, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"n"}})
	if err != nil || st[0].BarrierOffset != -1 || st[0].State != "STOPPED" {
		t.Fatalf("stop: %v %+v", err, st)
	}
	// Answered as a duplicate with A's offset: B's records are lost.
	if off := produceOK(t, rb, "n", 0, records(t, 2, 0, 0, 0, false, 10)); off != 0 {
		t.Fatalf("B's batch at %d; want A's offset 0 (a false duplicate)", off)
	}
	if end := logOf(t, b, "n", 0).LogEndOffset(); end != 2 {
		t.Fatalf("log end %d: B's batch was stored", end)
	}
}

// TestMirrorRequestsRefused: what a start or stop refuses, and that it
// changes nothing then.
func TestMirrorRequestsRefused(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "x", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	cases := []struct {
		name  string
		req   MirrorStartRequest
		usage bool
		want  string
	}{
		{"no source", MirrorStartRequest{Topics: []string{"x"}}, true, "no source"},
		{"no topics", MirrorStartRequest{Source: a.addr}, true, "no topics"},
		{"bad topic", MirrorStartRequest{Source: a.addr, Topics: []string{"a/b"}}, true, "invalid topic"},
		{"bad name", MirrorStartRequest{Source: a.addr, Topics: []string{"x"}, Name: "a b"}, true, "white space"},
		{"itself", MirrorStartRequest{Source: b.addr, Topics: []string{"x"}}, true, "is this cluster"},
		{"unknown topic", MirrorStartRequest{Source: a.addr, Topics: []string{"nope"}}, false, "nope"},
		{"unreachable", MirrorStartRequest{Source: deadAddr, Topics: []string{"x"}}, false, "metadata of source"},
		{"unreachable admin", MirrorStartRequest{Source: a.addr, SourceAdmin: deadAddr, Topics: []string{"x"}}, false, "source admin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := b.StartMirror(ctx, c.req)
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, errMirrorUsage) != c.usage {
				t.Fatalf("err %v, want %q (usage %v)", err, c.want, c.usage)
			}
			if len(st) != 0 {
				t.Fatalf("started %+v", st)
			}
		})
	}
	if p, code := b.partitionFor("x", 0); code == errNone && p.mirror.State() != mirror.StateNone {
		t.Fatalf("a refused start left x-0 %s", p.mirror.State())
	}
	// A second source for a mirroring partition is refused.
	c := startTest(t, Config{})
	createTopic(t, dial(t, c.addr), "x", 1)
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: a.addr, Topics: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: c.addr, Topics: []string{"x"}}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("second source: %v", err)
	}
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: c.addr, Name: "from-" + a.meta.clusterID(), Topics: []string{"x"}}); !errors.Is(err, errMirrorUsage) {
		t.Fatalf("link name of another source: %v", err)
	}
	// A loop: A may not mirror x from B while B mirrors it from A.
	if _, err := a.StartMirror(ctx, MirrorStartRequest{Source: b.addr, SourceAdmin: serveAdmin(t, b), Topics: []string{"x"}}); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("loop: %v", err)
	}
	if _, err := b.StopMirror(ctx, MirrorStopRequest{Topics: []string{"x"}, Policy: "KEEP"}); !errors.Is(err, errMirrorUsage) {
		t.Fatalf("unknown policy: %v", err)
	}
	if _, err := b.StopMirror(ctx, MirrorStopRequest{}); !errors.Is(err, errMirrorUsage) {
		t.Fatalf("no topics: %v", err)
	}
	if _, err := b.StopMirror(ctx, MirrorStopRequest{Topics: []string{"nope"}}); err == nil {
		t.Fatal("stop of an unknown topic")
	}
}

// TestAdminEndpoint: the HTTP answers and their status codes.
func TestAdminEndpoint(t *testing.T) {
	s := startTest(t, Config{})
	h := httptest.NewServer(s.AdminHandler())
	defer h.Close()
	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(h.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, v
	}
	post := func(path, body string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, h.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.AdminToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, v
	}
	if code, v := get("/v1/mirrors"); code != 200 || v["cluster_id"] != s.meta.clusterID() || v["partitions"] == nil {
		t.Fatalf("status: %d %v", code, v)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/mirrors/start", "{"},
		{"/v1/mirrors/start", `{"source": "x", "topics": ["t"], "extra": 1}`},
		{"/v1/mirrors/start", `{"topics": ["t"]}`},
		{"/v1/mirrors/stop", `{"topics": []}`},
		{"/v1/mirrors/stop", `[1, 2]`},
	} {
		if code, v := post(c.path, c.body); code != 400 || v["error"] == "" {
			t.Errorf("%s %s: %d %v", c.path, c.body, code, v)
		}
	}
	for _, q := range []string{"partition=x&topic_id=AAAAAAAAAAAAAAAAAAAAAA", "partition=-1&topic_id=AAAAAAAAAAAAAAAAAAAAAA", "partition=0&topic_id=zz"} {
		if code, _ := get("/v1/mirrors/position?" + q); code != 400 {
			t.Errorf("position?%s: %d", q, code)
		}
	}
	if code, v := get("/v1/mirrors/position?cluster_id=c&topic=t&topic_id=AAAAAAAAAAAAAAAAAAAAAA&partition=0"); code != 200 || v["found"] != false {
		t.Errorf("position of an unknown partition: %d %v", code, v)
	}
	if code, v := get("/v1/mirrors/mirrors-from?cluster_id=c&topic=t&partition=0"); code != 200 || v["mirrors"] != false {
		t.Errorf("mirrors-from: %d %v", code, v)
	}
	if code, _ := get("/v1/mirrors/mirrors-from?partition=q"); code != 400 {
		t.Errorf("mirrors-from with a bad partition: %d", code)
	}
}

// TestMirrorErrorCodes: a read-only partition's answer by state.
func TestMirrorErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int16
	}{
		{&mirror.ReadOnlyError{State: mirror.StateMirroring}, errPolicyViolation},
		{&mirror.ReadOnlyError{State: mirror.StateFailed, Reason: errors.New("x")}, errPolicyViolation},
		{&mirror.ReadOnlyError{State: mirror.StateLogAlignment}, errPolicyViolation},
		{&mirror.ReadOnlyError{State: mirror.StateStopping}, errNotLeaderOrFollower},
		{fmt.Errorf("wrapped: %w", &mirror.ReadOnlyError{State: mirror.StateStopping}), errNotLeaderOrFollower},
		{partlog.ErrClosed, partlog.KafkaErrorCode(partlog.ErrClosed)},
	} {
		if got := errorCode(c.err); got != c.want {
			t.Errorf("%v: %d, want %d", c.err, got, c.want)
		}
	}
}
