package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchResponseShape builds a Fetch response of version v: topics of
// partitions whose record bytes have the given sizes (-1: nil), every
// third partition with an aborted transaction, every fifth an error.
func fetchResponseShape(v int16, topics [][]int) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	resp.ThrottleMillis, resp.SessionID = 7, 0
	fill := byte(1)
	for ti, sizes := range topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("topic-%d", ti)
		for pi, size := range sizes {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = int32(pi)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = int64(1000+pi), int64(999+pi), 3
			if pi%5 == 4 {
				p.ErrorCode = errOffsetOutOfRange
			}
			if pi%3 == 2 {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = int64(pi), 40
				p.AbortedTransactions = append(p.AbortedTransactions, at)
			}
			if size >= 0 {
				p.RecordBatches = bytes.Repeat([]byte{fill}, size)
				fill++
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// writeThrough writes vecs to a loopback TCP connection as the writer
// does (net.Buffers: writev, IOV_MAX pieces at a time) and returns the
// bytes read at the other end.
func writeThrough(t *testing.T, vecs net.Buffers) []byte {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vecs.WriteTo(c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	return <-got
}

// TestSplicedFetchFrame: a frame whose record bytes are taken out and
// written as pieces is byte for byte the frame kmsg encodes whole, at
// every Fetch version the server answers, and the response gets its
// record bytes back.
func TestSplicedFetchFrame(t *testing.T) {
	big, small := spliceMin, spliceMin-1
	shapes := []struct {
		name    string
		topics  [][]int
		spliced int
	}{
		{"no records", [][]int{{0, -1, 0}}, 0},
		{"below the threshold", [][]int{{small, 10, 0}}, 0},
		{"one large", [][]int{{big}}, 1},
		{"large among small and empty", [][]int{{small, big, 0, -1, 3 * big, 1}}, 2},
		{"several topics", [][]int{{big, 0}, {}, {1, big + 1, big + 2}}, 3},
		{"a length needing a long varint", [][]int{{1 << 21}}, 1},
		{"more pieces than one writev takes", [][]int{manySizes(600, big)}, 600},
	}
	for v := int16(4); v <= 12; v++ {
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("v%d/%s", v, shape.name), func(t *testing.T) {
				resp := fetchResponseShape(v, shape.topics)
				p := &pending{corr: 42, key: 1, resp: resp, flexHead: resp.IsFlexible()}
				want := appendFrame(nil, p)
				before := make([][]byte, 0)
				for _, tp := range resp.Topics {
					for _, pp := range tp.Partitions {
						before = append(before, pp.RecordBatches)
					}
				}
				var sp splicer
				took := sp.take(resp)
				if took != (shape.spliced > 0) || len(sp.taken) != shape.spliced {
					t.Fatalf("took %v, %d partitions; want %d", took, len(sp.taken), shape.spliced)
				}
				if !took {
					return
				}
				taken := 0
				for _, rec := range sp.taken {
					taken += len(rec)
				}
				frame := appendFrame(nil, p)
				if !sp.pieces(frame, resp.IsFlexible()) {
					t.Fatal("markers not found")
				}
				sp.restore()
				if got := writeThrough(t, sp.out); !bytes.Equal(got, want) {
					t.Fatalf("spliced frame differs from kmsg's (%d bytes, want %d)", len(got), len(want))
				}
				if len(frame) > len(want)-taken+32*shape.spliced {
					t.Fatalf("the encoding holds %d bytes for a frame of %d with %d taken out: the record bytes were copied", len(frame), len(want), taken)
				}
				i := 0
				for _, tp := range resp.Topics {
					for _, pp := range tp.Partitions {
						if len(pp.RecordBatches) != len(before[i]) || (len(pp.RecordBatches) > 0 && &pp.RecordBatches[0] != &before[i][0]) {
							t.Fatalf("partition %d's record bytes were not restored", i)
						}
						i++
					}
				}
			})
		}
	}
}

func manySizes(n, size int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = size
	}
	return s
}

// TestSplicerRefuses: a response naming a topic that holds the marker
// is not spliced, and a frame whose marker is not after the length
// prefix of its record bytes is refused and left as it was.
func TestSplicerRefuses(t *testing.T) {
	resp := fetchResponseShape(12, [][]int{{spliceMin}})
	resp.Topics[0].Topic = "x" + spliceMarkerString
	var sp splicer
	if sp.take(resp) {
		t.Fatal("spliced a response whose topic name holds the marker")
	}
	if len(resp.Topics[0].Partitions[0].RecordBatches) != spliceMin {
		t.Fatal("the record bytes were not left in place")
	}

	for _, flexible := range []bool{false, true} {
		resp := fetchResponseShape(11, [][]int{{spliceMin}})
		if flexible {
			resp.Version = 12
		}
		if !sp.take(resp) {
			t.Fatal("nothing taken")
		}
		p := &pending{corr: 1, key: 1, resp: resp, flexHead: flexible}
		frame := appendFrame(nil, p)
		i := bytes.Index(frame, spliceMarker[:])
		frame[i-1]++ // not the prefix of 16 bytes any more
		saved := bytes.Clone(frame)
		if sp.pieces(frame, flexible) {
			t.Fatalf("flexible %v: a marker after a wrong prefix was spliced", flexible)
		}
		if !bytes.Equal(frame, saved) {
			t.Fatal("a refused frame was changed")
		}
		missing := appendFrame(nil, &pending{corr: 1, key: 1, resp: fetchResponseShape(resp.Version, nil), flexHead: flexible})
		if sp.pieces(missing, flexible) {
			t.Fatal("a frame without the marker was spliced")
		}
		sp.restore()
	}
}

// TestFetchSpliced: one fetch of partitions with more record bytes than
// spliceMin, and some with less, arrives whole through the server and
// decodes to the batches produced.
func TestFetchSpliced(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	const parts = 12
	createTopic(t, rc, "wide", parts)
	batches := make([][]byte, parts)
	for i := range batches {
		size := spliceMin / 2
		if i%4 == 3 {
			size = 100
		}
		batches[i] = records(t, 3, -1, 0, 0, false, size)
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("wide", int32(i), 1, batches[i]))
		if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce to %d: error %d", i, c)
		}
	}
	for _, version := range []int16{11, 12} {
		req := fetchReq("wide", 0, 0, 0, 1, 64<<20, 1<<20, 0)
		req.Version = version
		for i := 1; i < parts; i++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(i), 0, 1<<20
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		resp := roundTrip[*kmsg.FetchResponse](rc, req)
		got := resp.Topics[0].Partitions
		if len(got) != parts {
			t.Fatalf("v%d: %d partitions answered", version, len(got))
		}
		for i, p := range got {
			if p.ErrorCode != 0 || p.Partition != int32(i) || len(p.RecordBatches) != len(batches[i]) {
				t.Fatalf("v%d: partition %d: error %d, %d record bytes, want %d", version, p.Partition, p.ErrorCode, len(p.RecordBatches), len(batches[i]))
			}
			// The stored batch differs from the produced one in its base
			// offset and leader epoch only; its records are the same.
			if !bytes.Equal(p.RecordBatches[61:], batches[i][61:]) {
				t.Fatalf("v%d: partition %d's records differ", version, i)
			}
		}
	}
}

// BenchmarkFetchResponseWrite writes Fetch response frames to a loopback
// TCP connection (a goroutine reads and drops them), the record bytes
// copied into the frame (copy: kmsg's AppendTo, then one write) and
// spliced from where they are (splice: the encoding without them, then
// one writev of the pieces), alternated in rounds of 16 frames, and
// reports each variant's time per frame and the median of the per-round
// ratios copy/splice (above 1: splicing is faster).
func BenchmarkFetchResponseWrite(b *testing.B) {
	for _, shape := range []struct {
		parts, size int
	}{{1, 1 << 20}, {100, 64 << 10}, {1000, 16 << 10}} {
		b.Run(fmt.Sprintf("partitions=%d/size=%dKiB", shape.parts, shape.size>>10), func(b *testing.B) {
			resp := fetchResponseShape(12, [][]int{manySizes(shape.parts, shape.size)})
			p := &pending{corr: 1, key: 1, resp: resp, flexHead: true}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					_, _ = io.Copy(io.Discard, c)
					c.Close()
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var buf []byte
			var sp splicer
			write := func(splice bool) {
				if splice && sp.take(resp) {
					buf = appendFrame(buf[:0], p)
					ok := sp.pieces(buf, true)
					sp.restore()
					if !ok {
						b.Fatal("not spliced")
					}
					if _, err := sp.out.WriteTo(c); err != nil {
						b.Fatal(err)
					}
					return
				}
				buf = appendFrame(buf[:0], p)
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			write(false)
			write(true)
			b.SetBytes(int64(shape.parts * shape.size))
			b.ReportAllocs()
			const round = 16
			var spent [2]time.Duration
			var ratios []float64
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(round, b.N-done)
				var t [2]time.Duration
				for v := range 2 {
					m := (done/round + v) % 2
					start := time.Now()
					for range k {
						write(m == 1)
					}
					t[m] = time.Since(start)
					spent[m] += t[m]
				}
				if t[1] > 0 {
					ratios = append(ratios, float64(t[0])/float64(t[1]))
				}
				done += k
			}
			b.StopTimer()
			per := func(m int) float64 { return float64(spent[m].Nanoseconds()) / float64(b.N) }
			b.ReportMetric(per(0), "copy-ns/frame")
			b.ReportMetric(per(1), "splice-ns/frame")
			if len(ratios) > 0 {
				slices.Sort(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "copy/splice-median")
			}
		})
	}
}
