package dump

import (
	"encoding/binary"
	"strings"
	"testing"
)

// timeIndexBytes encodes .timeindex entries (timestamp, absolute offset)
// relative to base.
func timeIndexBytes(base int64, entries ...[2]int64) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]-base))
	}
	return b
}

// TestKafkaIndexSanity is a table of Kafka's sanity checks: an index
// whose trim was lost passes Kafka's offset index check and fails its
// time index check, as Kafka 4.4's tool says of a cleanly stopped
// __cluster_metadata segment.
func TestKafkaIndexSanity(t *testing.T) {
	off := func(entries ...[2]int64) []byte {
		var b []byte
		for _, e := range entries {
			b = binary.BigEndian.AppendUint32(b, uint32(e[0]))
			b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		time bool
		want string // "" passes
	}{
		{"offset empty", nil, false, ""},
		{"offset padded with zeros", append(off([2]int64{3, 100}), make([]byte, 64)...), false, ""},
		{"offset below base", off([2]int64{-1, 0}), false, "Corrupt index found, index file /x has non-zero size but the last offset is 9 which is less than the base offset 10"},
		{"offset partial entry", append(off([2]int64{3, 100}), 1), false, "Index file /x is corrupt, found 9 bytes which is neither positive nor a multiple of 8"},
		{"time ok", timeIndexBytes(10, [2]int64{5, 11}, [2]int64{6, 12}), true, ""},
		{"time padded with zeros", append(timeIndexBytes(10, [2]int64{5, 11}), make([]byte, 24)...), true,
			"Corrupt time index found, time index file (/x) has non-zero size but the last timestamp is 0 which is less than the first timestamp 5"},
		{"time offset below base", timeIndexBytes(10, [2]int64{5, 9}), true,
			"Corrupt time index found, time index file (/x) has non-zero size but the last offset is 9 which is less than the first offset 10"},
		{"time partial entry", make([]byte, 13), true, "Time index file /x is corrupt, found 13 bytes which is neither positive nor a multiple of 12"},
	} {
		var err error
		if tc.time {
			err = kafkaTimeIndexSanity("/x", tc.b, 10)
		} else {
			err = kafkaOffsetIndexSanity("/x", tc.b, 10)
		}
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), corruptIndex+": ")
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
