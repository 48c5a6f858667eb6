package server

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch response's record bytes are the last field of each partition
// (before its tagged fields), and they alias the segment mappings until
// the response is written (Log.Read). Copying them into the response
// buffer cost a consumer more CPU than the rest of its fetch path
// together (memmove and the buffer's growth in kmsg's AppendTo), so the
// writer takes them out of the encoding and writes the frame as the
// encoded pieces between them and the mapped bytes themselves, one
// writev.
//
// kmsg stays the only encoder: each partition's record bytes of at least
// spliceMin are replaced by spliceMarker before AppendTo, and the
// markers are found in the encoding afterwards, in partition order, each
// right after the length prefix kmsg writes for 16 bytes (which the
// frame then carries for the real length). The marker is 16 random bytes
// of this process, never sent; the only client bytes a Fetch response
// echoes are topic names, and a response naming a topic that holds the
// marker is encoded whole (as is one whose markers are not found where
// the encoding puts record bytes, which cannot happen short of a kmsg
// change).

// spliceMin is the smallest record bytes of a partition written from
// their mapping: below it an iovec costs more than the copy.
const spliceMin = 8 << 10

var (
	spliceMarker = func() (m [16]byte) {
		_, _ = rand.Read(m[:])
		return m
	}()
	spliceMarkerString = string(spliceMarker[:])
)

// splicer holds one response's record bytes taken out of its encoding.
// A connection's writer keeps one and reuses its slices.
type splicer struct {
	parts  []*kmsg.FetchResponseTopicPartition // partitions whose records were taken, in encoding order
	taken  [][]byte                            // their record bytes
	prefix []byte                              // the real length prefixes, 5 bytes reserved for each
	vecs   [][]byte                            // the frame's pieces
	out    net.Buffers                         // vecs, as written (WriteTo consumes it)
}

// take replaces resp's record bytes of at least spliceMin with the
// marker. It reports whether it took any; a response with none, or
// naming a topic that holds the marker, is left as it was.
func (sp *splicer) take(resp *kmsg.FetchResponse) bool {
	sp.parts, sp.taken = sp.parts[:0], sp.taken[:0]
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if strings.Contains(t.Topic, spliceMarkerString) {
			sp.restore()
			return false
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if len(p.RecordBatches) < spliceMin {
				continue
			}
			sp.parts = append(sp.parts, p)
			sp.taken = append(sp.taken, p.RecordBatches)
			p.RecordBatches = spliceMarker[:]
		}
	}
	return len(sp.parts) > 0
}

// restore gives the partitions their record bytes back.
func (sp *splicer) restore() {
	for i, p := range sp.parts {
		p.RecordBatches = sp.taken[i]
	}
	sp.parts = sp.parts[:0]
}

// pieces splits frame (the size field, the header, the body AppendTo
// wrote with the markers) into the frame's pieces with the record bytes
// in place of the markers (sp.out), and sets the size field to the real
// frame's. It reports false when a marker is not where the encoding of
// a partition's record bytes puts it; frame is then unchanged.
func (sp *splicer) pieces(frame []byte, flexible bool) bool {
	// The prefix kmsg wrote for the 16 marker bytes.
	markerPrefix := []byte{0, 0, 0, 16}
	if flexible {
		markerPrefix = []byte{17} // compact: length + 1
	}
	if cap(sp.prefix) < 5*len(sp.taken) {
		sp.prefix = make([]byte, 0, 5*len(sp.taken))
	}
	prefix := sp.prefix[:0]
	sp.vecs = sp.vecs[:0]
	size := len(frame) - 4
	at := 0
	for _, rec := range sp.taken {
		i := bytes.Index(frame[at:], spliceMarker[:])
		if i < 0 {
			return false
		}
		i += at
		start := i - len(markerPrefix)
		if start < at || !bytes.Equal(frame[start:i], markerPrefix) {
			return false
		}
		n := len(prefix)
		if flexible {
			prefix = binary.AppendUvarint(prefix, uint64(len(rec))+1)
		} else {
			prefix = binary.BigEndian.AppendUint32(prefix, uint32(len(rec)))
		}
		sp.vecs = append(sp.vecs, frame[at:start], prefix[n:], rec)
		size += len(prefix) - n + len(rec) - len(markerPrefix) - len(spliceMarker)
		at = i + len(spliceMarker)
	}
	sp.vecs = append(sp.vecs, frame[at:])
	binary.BigEndian.PutUint32(frame, uint32(size))
	sp.out = sp.vecs
	return true
}
