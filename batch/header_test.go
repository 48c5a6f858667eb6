package batch

import (
	"math/rand/v2"
	"testing"
)

// headerMatchesView fails t unless every field and method of h agrees
// with the View accessor of the same name.
func headerMatchesView(t *testing.T, h *BatchHeader, v View) {
	t.Helper()
	type pair struct {
		name      string
		got, want int64
	}
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	for _, p := range []pair{
		{"BaseOffset", h.BaseOffset, v.BaseOffset()},
		{"BatchLength", int64(h.BatchLength), int64(v.BatchLength())},
		{"Size", int64(h.Size()), int64(v.Size())},
		{"PartitionLeaderEpoch", int64(h.PartitionLeaderEpoch), int64(v.PartitionLeaderEpoch())},
		{"Magic", int64(h.Magic), int64(v.Magic())},
		{"CRC", int64(h.CRC), int64(v.CRC())},
		{"Attributes", int64(h.Attributes), int64(v.Attributes())},
		{"Compression", int64(h.Compression()), int64(v.Compression())},
		{"IsControl", b2i(h.IsControl()), b2i(v.IsControl())},
		{"IsTransactional", b2i(h.IsTransactional()), b2i(v.IsTransactional())},
		{"LastOffsetDelta", int64(h.LastOffsetDelta), int64(v.LastOffsetDelta())},
		{"LastOffset", h.LastOffset(), v.LastOffset()},
		{"BaseTimestamp", h.BaseTimestamp, v.BaseTimestamp()},
		{"MaxTimestamp", h.MaxTimestamp, v.MaxTimestamp()},
		{"ProducerID", h.ProducerID, v.ProducerID()},
		{"ProducerEpoch", int64(h.ProducerEpoch), int64(v.ProducerEpoch())},
		{"BaseSequence", int64(h.BaseSequence), int64(v.BaseSequence())},
		{"LastSequence", int64(h.LastSequence()), int64(v.LastSequence())},
		{"RecordsCount", int64(h.RecordsCount), int64(v.RecordsCount())},
	} {
		if p.got != p.want {
			t.Fatalf("%s: header %d, view %d", p.name, p.got, p.want)
		}
	}
}

// TestHeaderMatchesView decodes random 61-byte headers (every bit
// pattern, including high attribute bits and negative fields) and checks
// each field against the View accessors.
func TestHeaderMatchesView(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, HeaderSize+3)
	for range 2000 {
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		var h BatchHeader
		View(buf).DecodeHeader(&h)
		headerMatchesView(t, &h, View(buf))
	}
	// A sequence near the wrap-around and the no-sequence sentinel.
	v := View(buf)
	for _, seq := range []int32{NoSequence, 0, MaxSequence - 1, MaxSequence} {
		v[OffBaseSequence], v[OffBaseSequence+1], v[OffBaseSequence+2], v[OffBaseSequence+3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
		var h BatchHeader
		v.DecodeHeader(&h)
		headerMatchesView(t, &h, v)
	}
}

// TestHeaderAllocs: decoding a header allocates nothing.
func TestHeaderAllocs(t *testing.T) {
	buf := make([]byte, HeaderSize)
	var h BatchHeader
	if n := testing.AllocsPerRun(100, func() { View(buf).DecodeHeader(&h) }); n != 0 {
		t.Fatalf("DecodeHeader: %v allocs", n)
	}
}
