package group

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/crc32c"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzKeys are the API keys FuzzHandle picks from with its first byte.
var fuzzKeys = []int16{8, 9, 11, 12, 13, 14, 15, 16, 28}

// FuzzHandle decodes arbitrary bytes as a group request (first byte: API
// key, second: version, rest: body) with kmsg and hands what decodes to
// Handle: no panic, and the response encodes and decodes at its
// version. The coordinator lives across inputs, its clock moving a few
// seconds per input so that expirations run too.
func FuzzHandle(f *testing.F) {
	for v := int16(0); v <= 10; v++ {
		for _, req := range groupRequests(v) {
			if v > req.MaxVersion() {
				continue
			}
			for i, k := range fuzzKeys {
				if k == req.Key() {
					f.Add(append([]byte{byte(i), byte(v)}, req.AppendTo(nil)...))
				}
			}
		}
	}
	clock := newFakeClock()
	c, err := Open(Config{Dir: f.TempDir(), Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel() // waiting calls answer at once
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		key := fuzzKeys[int(data[0])%len(fuzzKeys)]
		req := kmsg.RequestForKey(key)
		req.SetVersion(int16(data[1] % 12))
		if err := req.ReadFrom(data[2:]); err != nil {
			return
		}
		clock.Advance(time.Duration(len(data)%8) * time.Second)
		resp, ok := c.Handle(done, req)
		if !ok {
			t.Fatalf("key %d not handled", key)
		}
		if resp.GetVersion() != req.GetVersion() {
			t.Fatalf("response v%d for request v%d", resp.GetVersion(), req.GetVersion())
		}
		if req.GetVersion() > resp.MaxVersion() {
			return // kmsg cannot encode it; the server never asks
		}
		back := kmsg.ResponseForKey(key)
		back.SetVersion(resp.GetVersion())
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("response does not decode: %v", err)
		}
	})
}

// FuzzDecodeState: the state file decoder never panics, and what it
// accepts encodes to a file it reads back the same.
func FuzzDecodeState(f *testing.F) {
	c, err := Open(Config{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	inst := "inst"
	j := joinReq(5, "g", "")
	j.InstanceID = &inst
	c.Handle(context.Background(), j)
	c.mu.Lock()
	m := c.groups["g"].members[0].id
	c.mu.Unlock()
	c.Handle(context.Background(), syncReq(5, "g", m, 1, map[string]string{m: "assignment"}))
	c.Handle(context.Background(), commitReq(9, "g2", "", -1, map[string]map[int32]int64{"t": {0: 1, 1: 2}, "u": {0: 3}}))
	c.CommitTxnOffsets(txnReq(3, "g2", 7, 1, map[int32]int64{0: 9}))
	c.mu.Lock()
	seed := c.encodeLocked()
	c.mu.Unlock()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Let the fuzzer skip the checksum: recompute it over the body.
		if len(data) >= 4 && bytes.HasPrefix(data, []byte(stateMagic)) {
			data = binary.BigEndian.AppendUint32(data[:len(data)-4:len(data)-4], crc32c.Checksum(data[:len(data)-4]))
		}
		groups, seq, err := decodeState(data)
		if err != nil {
			return
		}
		enc := func(groups []*group, seq uint64) []byte {
			c := &Coordinator{groups: map[string]*group{}, seq: seq}
			for _, g := range groups {
				c.groups[g.id] = g
			}
			return c.encodeLocked()
		}
		once := enc(groups, seq)
		g2, seq2, err := decodeState(once)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if twice := enc(g2, seq2); !bytes.Equal(once, twice) {
			t.Fatal("state does not survive a round trip")
		}
	})
}
