package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/partlog/partlog/batch"
)

// codecBatch builds a batch of n records compressed with c, with the
// producer fields given (pid -1: none).
func codecBatch(t testing.TB, c batch.Compression, n int, pid int64, seq int32) []byte {
	t.Helper()
	var b batch.Builder
	spec := batch.NewBatchSpec(0)
	spec.Compression = c
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, seq
	}
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: 1_700_000_000_000 + int64(i), Key: fmt.Appendf(nil, "k%d", i),
			Value: bytes.Repeat([]byte{byte('a' + i%26)}, 300)}
	}
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readOne reads the batch at offset.
func readOne(t *testing.T, l *Log, offset int64) batch.View {
	t.Helper()
	rv, err := l.Read(offset, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Release()
	v, err := batch.Check(rv.Records)
	if err != nil {
		t.Fatalf("stored batch at %d: %v", offset, err)
	}
	return batch.View(bytes.Clone(v[:v.Size()]))
}

// TestCompressionType: a leader stores a client batch with the topic's
// compression.type, recompressing when the codec differs and keeping the
// batch byte for byte (but the offset and leader epoch it assigns) when
// it is the same or the type is producer, as Kafka's LogValidator does.
func TestCompressionType(t *testing.T) {
	codecs := []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	types := []CompressionType{CompressionProducer, CompressionUncompressed, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, ct := range types {
		for _, from := range codecs {
			t.Run(fmt.Sprintf("%s/%s", ct, from), func(t *testing.T) {
				o := smallOpts(t)
				o.CompressionType = ct
				l, _ := openTestLog(t, o)
				in := codecBatch(t, from, 4, 7, 0)
				orig := bytes.Clone(in)
				info, err := l.AppendAsLeader(in, 3)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(in, orig) {
					t.Fatalf("the caller's records were modified")
				}
				got := readOne(t, l, info.FirstOffset)
				want, _ := ct.codec()
				if ct == CompressionProducer {
					want = from
				}
				if got.Compression() != want {
					t.Fatalf("stored codec %s, want %s", got.Compression(), want)
				}
				if want == from {
					exp := batch.View(bytes.Clone(orig))
					exp.SetBaseOffset(info.FirstOffset)
					exp.SetPartitionLeaderEpoch(3)
					if !bytes.Equal(got, exp) {
						t.Fatalf("a batch already in the topic's codec was not stored as it came")
					}
				}
				gd, err := got.RecordData(nil, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				wd, _ := batch.View(orig).RecordData(nil, 1<<20)
				if !bytes.Equal(gd, wd) {
					t.Fatalf("records changed by the recompression")
				}
				if got.ProducerID() != 7 || got.BaseSequence() != 0 || got.LastOffsetDelta() != 3 || got.MaxTimestamp() != 1_700_000_000_003 {
					t.Fatalf("header fields changed: pid %d seq %d lastDelta %d maxTs %d", got.ProducerID(), got.BaseSequence(), got.LastOffsetDelta(), got.MaxTimestamp())
				}
				// The producer state took it: a retry is a duplicate, the
				// next sequence is accepted.
				var dup interface{ Error() string }
				if _, err := l.AppendAsLeader(codecBatch(t, from, 4, 7, 0), 3); err == nil || !errors.As(err, &dup) {
					t.Fatalf("retry of the batch: %v, want a duplicate", err)
				}
				// At the log's epoch, the one-batch fast path would take it:
				// the topic's codec still applies.
				next, err := l.AppendAsLeader(codecBatch(t, from, 2, 7, 4), 3)
				if err != nil {
					t.Fatalf("next sequence: %v", err)
				}
				if got := readOne(t, l, next.FirstOffset); got.Compression() != want {
					t.Fatalf("second append stored as %s, want %s", got.Compression(), want)
				}
			})
		}
	}
}

// TestCompressionTypeRules: what recompression leaves to the usual
// checks, and where it does not apply.
func TestCompressionTypeRules(t *testing.T) {
	t.Run("records that do not decompress are refused as without it", func(t *testing.T) {
		o := smallOpts(t)
		o.CompressionType = CompressionZstd
		l, _ := openTestLog(t, o)
		b := codecBatch(t, batch.CompressionGzip, 3, -1, 0)
		for i := batch.HeaderSize + 10; i < len(b); i++ {
			b[i] ^= 0x33
		}
		b = edited(b, func(batch.View) {})
		plain, _ := openTestLog(t, smallOpts(t))
		_, want := plain.AppendAsLeader(bytes.Clone(b), 0)
		_, err := l.AppendAsLeader(b, 0)
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Fatalf("corrupt gzip records under zstd: %v, want %v as under producer", err, want)
		}
		if l.LogEndOffset() != 0 {
			t.Fatalf("something was written")
		}
	})
	t.Run("a bad CRC is refused as without it", func(t *testing.T) {
		o := smallOpts(t)
		o.CompressionType = CompressionLZ4
		l, _ := openTestLog(t, o)
		b := codecBatch(t, batch.CompressionNone, 3, -1, 0)
		b[len(b)-1] ^= 1
		plain, _ := openTestLog(t, smallOpts(t))
		_, want := plain.AppendAsLeader(bytes.Clone(b), 0)
		if _, err := l.AppendAsLeader(b, 0); err == nil || want == nil || err.Error() != want.Error() {
			t.Fatalf("bad CRC: %v, want %v as under producer", err, want)
		}
	})
	t.Run("too large once recompressed", func(t *testing.T) {
		o := smallOpts(t)
		o.CompressionType = CompressionUncompressed
		o.MaxBatchBytes = 2000
		l, _ := openTestLog(t, o)
		b := codecBatch(t, batch.CompressionGzip, 20, -1, 0) // ~6 KB of records, compressible
		if len(b) > 2000 {
			t.Fatalf("test batch is %d bytes compressed", len(b))
		}
		if _, err := l.AppendAsLeader(b, 0); !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("batch over max.message.bytes once uncompressed: %v, want ErrRecordTooLarge", err)
		}
	})
	t.Run("too large as sent, though smaller recompressed", func(t *testing.T) {
		o := smallOpts(t)
		o.CompressionType = CompressionZstd
		b := codecBatch(t, batch.CompressionNone, 20, -1, 0)
		o.MaxBatchBytes = int64(len(b)) - 1
		l, _ := openTestLog(t, o)
		if _, err := l.AppendAsLeader(b, 0); !errors.Is(err, ErrRecordTooLarge) {
			t.Fatalf("batch over max.message.bytes as sent: %v, want ErrRecordTooLarge (Kafka checks before recompressing)", err)
		}
	})
	t.Run("a second batch refused as sent is named at its position in the request", func(t *testing.T) {
		for _, name := range []string{"bad CRC", "torn"} {
			second := codecBatch(t, batch.CompressionNone, 2, -1, 0)
			if name == "bad CRC" {
				second[len(second)-1] ^= 1
			} else {
				second = second[:len(second)-3]
			}
			records := append(codecBatch(t, batch.CompressionNone, 3, -1, 0), second...)
			plain, _ := openTestLog(t, smallOpts(t))
			_, want := plain.AppendAsLeader(bytes.Clone(records), 0)
			o := smallOpts(t)
			o.CompressionType = CompressionLZ4
			l, _ := openTestLog(t, o)
			if _, err := l.AppendAsLeader(records, 0); err == nil || want == nil || err.Error() != want.Error() {
				t.Fatalf("%s: %v, want %v as under producer", name, err, want)
			}
		}
	})
	t.Run("LogAppendTime stamps the recompressed batch", func(t *testing.T) {
		o := smallOpts(t)
		o.CompressionType = CompressionSnappy
		o.MessageTimestampType = LogAppendTime
		l, _ := openTestLog(t, o)
		info, err := l.AppendAsLeader(codecBatch(t, batch.CompressionNone, 3, -1, 0), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := readOne(t, l, info.FirstOffset)
		if got.Compression() != batch.CompressionSnappy || got.TimestampType() != batch.LogAppendTime {
			t.Fatalf("stored %s, %v; want snappy, LogAppendTime", got.Compression(), got.TimestampType())
		}
	})
	t.Run("followers keep the leader's codec", func(t *testing.T) {
		o := smallOpts(t)
		o.CompressionType = CompressionZstd
		l, _ := openTestLog(t, o)
		b := codecBatch(t, batch.CompressionGzip, 3, -1, 0)
		batch.View(b).SetPartitionLeaderEpoch(0)
		b = edited(b, func(batch.View) {})
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
		if got := readOne(t, l, 0); got.Compression() != batch.CompressionGzip {
			t.Fatalf("follower batch stored as %s, want gzip as fetched", got.Compression())
		}
	})
	t.Run("Reconfigure changes it", func(t *testing.T) {
		o := smallOpts(t)
		l, _ := openTestLog(t, o)
		o.CompressionType = CompressionLZ4
		if err := l.Reconfigure(o); err != nil {
			t.Fatal(err)
		}
		info, err := l.AppendAsLeader(codecBatch(t, batch.CompressionNone, 2, -1, 0), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := readOne(t, l, info.FirstOffset); got.Compression() != batch.CompressionLZ4 {
			t.Fatalf("stored %s after Reconfigure to lz4", got.Compression())
		}
		o.CompressionType = 9
		if err := l.Reconfigure(o); err == nil {
			t.Fatalf("Reconfigure accepted CompressionType 9")
		}
	})
}

// TestParseCompressionType: Kafka's names, any case; others refused.
func TestParseCompressionType(t *testing.T) {
	for _, c := range []struct {
		in   string
		want CompressionType
		ok   bool
	}{
		{"producer", CompressionProducer, true}, {"uncompressed", CompressionUncompressed, true},
		{"GZIP", CompressionGzip, true}, {"snappy", CompressionSnappy, true}, {"lz4", CompressionLZ4, true},
		{"zstd", CompressionZstd, true}, {"none", 0, false}, {"brotli", 0, false}, {"", 0, false},
	} {
		got, err := ParseCompressionType(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseCompressionType(%q) = %v, %v", c.in, got, err)
		}
		if c.ok && got.String() != map[bool]string{true: c.in, false: "gzip"}[c.in != "GZIP"] {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

// BenchmarkRecompress: a 16-record 1 KiB-value batch appended as it came
// (producer) and recompressed from lz4 to zstd, alternating in one
// process.
func BenchmarkRecompress(b *testing.B) {
	for _, ct := range []CompressionType{CompressionProducer, CompressionZstd} {
		b.Run(ct.String(), func(b *testing.B) {
			o := &Options{CompressionType: ct}
			l, err := Open(b.TempDir(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rec := codecBatch(b, batch.CompressionLZ4, 16, -1, 0)
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.AppendAsLeader(rec, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
