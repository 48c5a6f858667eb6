package server

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The hostile-frame generator and the structure-aware fuzzer of the
// review of issue 34, kept: what held then must keep holding. Each
// frame is sent on a connection of its own, closed at once (the server
// decodes and handles what it read before it sees the close); the
// server must not crash, must go on answering, and must end every
// connection's goroutines.

// lengthMarks returns the positions of every length and count in a
// valid body (the walk of its shape) and what each prefixes.
func lengthMarks(key, version int16, body []byte) []lengthMark {
	shape := requestShapes[key]
	var marks []lengthMark
	w := shapeWalk{b: body, version: version, flexible: version >= shape.flexibleFrom, left: 1 << 30,
		total: len(body), mark: func(at int, k wireKind) { marks = append(marks, lengthMark{at, k}) }}
	w.structFields(shape.fields)
	return marks
}

type lengthMark struct {
	at   int
	kind wireKind
}

// hostileBodies derives from a valid body the bodies a broken or
// hostile client sends: cut at every length (and at its last byte),
// every length and count replaced by values that lie (null where none
// is allowed, negative, zero, one past the bytes left, the largest the
// encoding holds), and trailing garbage.
func hostileBodies(key, version int16, body []byte) [][]byte {
	shape := requestShapes[key]
	flexible := version >= shape.flexibleFrom
	var out [][]byte
	marks := lengthMarks(key, version, body)
	for _, m := range marks {
		out = append(out, body[:m.at], body[:min(m.at+1, len(body))])
		old, width := readLength(body[m.at:], m.kind, flexible)
		if width == 0 {
			continue
		}
		left := int64(len(body) - m.at - width)
		for _, v := range []int64{-2, -1, 0, left + 1, left * 8, 1<<31 - 1, 1<<32 - 2} {
			if v == old {
				continue
			}
			enc := writeLength(nil, v, m.kind, flexible)
			if enc == nil {
				continue
			}
			b := slices.Concat(body[:m.at], enc, body[m.at+width:])
			out = append(out, b)
		}
	}
	out = append(out, body[:len(body)/2], append(slices.Clone(body), 0xff, 0xff, 0xff, 0xff, 0x7f))
	return out
}

// readLength reads the length at b and its width (0: cannot).
func readLength(b []byte, k wireKind, flexible bool) (int64, int) {
	switch {
	case flexible:
		u, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, 0
		}
		return int64(u) - 1, n
	case k == wString:
		if len(b) < 2 {
			return 0, 0
		}
		return int64(int16(binary.BigEndian.Uint16(b))), 2
	default:
		if len(b) < 4 {
			return 0, 0
		}
		return int64(int32(binary.BigEndian.Uint32(b))), 4
	}
}

// writeLength encodes v as the length of a k (nil when it cannot hold
// it).
func writeLength(dst []byte, v int64, k wireKind, flexible bool) []byte {
	switch {
	case flexible:
		if v+1 < 0 || v+1 > 1<<32-1 {
			return nil
		}
		return binary.AppendUvarint(dst, uint64(v+1))
	case k == wString:
		if v < -1<<15 || v > 1<<15-1 {
			return nil
		}
		return binary.BigEndian.AppendUint16(dst, uint16(int16(v)))
	default:
		if v < -1<<31 || v > 1<<31-1 {
			return nil
		}
		return binary.BigEndian.AppendUint32(dst, uint32(int32(v)))
	}
}

// requestFrame is a size-prefixed request: header v1 (or v2 with an empty
// tag section when flexible) and body.
func requestFrame(key, version int16, corr int32, flexible bool, body []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = append(b, 0, 1, 'h')
	if flexible && key != 18 {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// headerFrames are frames whose framing or header is wrong.
func headerFrames() [][]byte {
	size := func(n int32, rest ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(n)), rest...)
	}
	return [][]byte{
		size(-1), size(0), size(7, 0, 18, 0, 0, 0, 0, 0), size(100<<20 + 1), size(1 << 30), size(8, 0, 18, 0, 3, 0, 0, 0, 1),
		requestFrame(999, 0, 1, false, nil),
		requestFrame(-1, 0, 1, false, nil),
		requestFrame(0, -1, 1, false, nil),
		requestFrame(18, 0x7fff, 1, false, nil),
		{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff},                   // client id past the end
		{0, 0, 0, 13, 0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, // flexible header: 2^32-1 tags
		{0, 0, 0, 12, 0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0x01, 0x05},       // a tag past the end
	}
}

// sendAndClose opens a connection, writes frame and closes it.
func sendAndClose(t *testing.T, addr string, frame []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	_, _ = c.Write(frame) // the server may close first
	_ = c.Close()
}

// checkServes fails the test unless the server answers ApiVersions and a
// produce and a fetch of partition t-0, once the connections of the
// frames sent before are over (their requests handled).
func checkServes(t *testing.T, ts *testServer, after string) {
	t.Helper()
	// Connections are accepted in order: once this one is answered,
	// every earlier one was accepted; then they end.
	rc := dial(t, ts.addr)
	if r := roundTrip[*kmsg.ApiVersionsResponse](rc, kmsg.NewPtrApiVersionsRequest()); r.ErrorCode != 0 {
		t.Fatalf("after %s: ApiVersions %d", after, r.ErrorCode)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts.mu.Lock()
		n := len(ts.conns)
		ts.mu.Unlock()
		if n <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d connections still open", after, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The frames may have deleted it (DeleteTopics names it).
	if c := roundTrip[*kmsg.CreateTopicsResponse](rc, createTopicsReq(5, false, map[string]int32{"t": 2})).Topics[0].ErrorCode; c != 0 && c != errTopicAlreadyExists {
		t.Fatalf("after %s: create t: %d", after, c)
	}
	p := roundTrip[*kmsg.ProduceResponse](rc, produceReq("t", 0, 1, records(t, 1, -1, 0, 0, false, 8)))
	if c := p.Topics[0].Partitions[0].ErrorCode; c != 0 {
		mr := kmsg.NewPtrMetadataRequest()
		mr.Version = 9
		name := "t"
		mr.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
		m := roundTrip[*kmsg.MetadataResponse](rc, mr)
		t.Fatalf("after %s: produce %d; metadata of t: %+v", after, c, m.Topics)
	}
	// Read what was just produced: the frames may have raised the log
	// start offset (DeleteRecords names t), so offset 0 may be gone.
	base := p.Topics[0].Partitions[0].BaseOffset
	f := roundTrip[*kmsg.FetchResponse](rc, fetchReq("t", 0, base, 0, 1, 1<<20, 1<<20, 0))
	if p := f.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("after %s: fetch at %d: error %d, %d record bytes", after, base, p.ErrorCode, len(p.RecordBatches))
	}
	_ = rc.c.Close()
}

// waitGoroutines waits until the goroutines are back to about before.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before+10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+10 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after the frames, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// hostileEvery is the stride through the versions and variants of
// TestHostileFrames: every one with PARTLOG_HOSTILE_FULL set, a sample
// in -short.
func hostileEvery(t *testing.T) int {
	switch {
	case os.Getenv("PARTLOG_HOSTILE_FULL") != "":
		return 1
	case testing.Short():
		return 7
	}
	return 2
}

// TestHostileFrames sends, for every API the server decodes at every
// version kmsg knows, the hostile variants of a valid request, and the
// frames whose framing or header is wrong.
func TestHostileFrames(t *testing.T) {
	ts := startTest(t, Config{AutoCreate: true, MaxRequestEntries: 10_000, IdleTimeout: 2 * time.Second})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "t", 2)
	_ = rc.c.Close()
	runtime.GC()
	goroutines := runtime.NumGoroutine()
	every := hostileEvery(t)
	g := newReqGen(34, "t")
	keys := slices.Sorted(func(yield func(int16) bool) {
		for k := range requestShapes {
			if !yield(k) {
				return
			}
		}
	})
	sent, n := 0, 0
	for _, key := range keys {
		maxV := kmsg.RequestForKey(key).MaxVersion()
		for v := int16(0); v <= maxV; v++ {
			req := g.requestAt(kmsg.RequestForKey(key), v)
			body := req.AppendTo(nil)
			for _, b := range hostileBodies(key, v, body) {
				if n++; n%every != 0 {
					continue
				}
				sendAndClose(t, ts.addr, requestFrame(key, v, int32(n), req.IsFlexible(), b))
				sent++
			}
		}
		checkServes(t, ts, apiName(key)+"'s frames")
	}
	for _, f := range headerFrames() {
		sendAndClose(t, ts.addr, f)
		sent++
	}
	checkServes(t, ts, "the header frames")
	t.Logf("%d hostile frames sent (of %d)", sent, n+len(headerFrames()))
	waitGoroutines(t, goroutines)
}

// TestHostileStructuredRequests is the structure-aware fuzzer as a
// bounded loop: random requests of every API kmsg knows (served or not),
// at random versions, filled by reqGen (boundary integers, empty and long
// strings, null and empty lists, unknown tags, valid and corrupt batches,
// the names of existing topics), some with a byte flipped, each on a
// connection of its own. PARTLOG_FUZZ_REQUESTS sets how many.
func TestHostileStructuredRequests(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	if s := os.Getenv("PARTLOG_FUZZ_REQUESTS"); s != "" {
		var err error
		if rounds, err = strconv.Atoi(s); err != nil {
			t.Fatalf("PARTLOG_FUZZ_REQUESTS: %v", err)
		}
	}
	ts := startTest(t, Config{AutoCreate: true, MaxRequestEntries: 10_000, IdleTimeout: 2 * time.Second})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "t", 2)
	_ = rc.c.Close()
	runtime.GC()
	goroutines := runtime.NumGoroutine()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	g := newReqGen(seed, "t", "u", "__consumer_offsets")
	var keys []int16
	for k := int16(0); k < 100; k++ {
		if kmsg.RequestForKey(k) != nil {
			keys = append(keys, k)
		}
	}
	for i := 0; i < rounds; i++ {
		key := keys[g.r.IntN(len(keys))]
		req := g.request(key)
		body := req.AppendTo(nil)
		if len(body) > 0 && g.r.IntN(4) == 0 {
			body[g.r.IntN(len(body))] ^= byte(1 + g.r.IntN(255))
		}
		sendAndClose(t, ts.addr, requestFrame(key, req.GetVersion(), int32(i), req.IsFlexible(), body))
		if i%500 == 499 {
			checkServes(t, ts, strconv.Itoa(i+1)+" requests (seed "+strconv.FormatUint(seed, 10)+")")
		}
	}
	checkServes(t, ts, "the requests")
	waitGoroutines(t, goroutines)
}

// FuzzRequestDecoder is the request decoder (header, shape walk, kmsg's
// decode) under the fuzzer, seeded with a valid request of every API the
// server decodes: it never panics, a body the walk accepts within its
// budget decodes to no more entries than the walk counted, and what the
// walk refuses it refuses before kmsg allocates anything.
func FuzzRequestDecoder(f *testing.F) {
	g := newReqGen(1, "t")
	for key := range requestShapes {
		for _, v := range []int16{0, kmsg.RequestForKey(key).MaxVersion()} {
			req := g.requestAt(kmsg.RequestForKey(key), v)
			f.Add(requestFrame(key, v, 1, req.IsFlexible(), req.AppendTo(nil))[4:])
		}
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		req, _, body, err := parseRequest(msg)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("parseRequest: %v, want errBadRequest", err)
			}
			return
		}
		entries, shaped, err := checkRequestShape(req.Key(), req.GetVersion(), body, 1000)
		if !shaped {
			return
		}
		if err != nil {
			if !errors.Is(err, errBadRequest) && !errors.Is(err, errTooManyEntries) {
				t.Fatalf("shape: %v", err)
			}
			return
		}
		if req.ReadFrom(body) != nil {
			return
		}
		if n := sliceEntries(reflect.ValueOf(req)); n > entries {
			t.Fatalf("%s v%d: kmsg decoded %d entries, the walk counted %d", apiName(req.Key()), req.GetVersion(), n, entries)
		}
	})
}
