package main

import (
	"os"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
)

// TestDumpDeepOverDecompressionCap: a batch whose records decompress to
// more than --max-message-size is a problem (exit 4) in the text mode, as
// in --json, for v2 batches and legacy wrappers alike; without
// --deep-iteration nothing is decompressed and the dump is clean.
func TestDumpDeepOverDecompressionCap(t *testing.T) {
	spec := batch.NewBatchSpec(0)
	spec.Compression = batch.CompressionGzip
	recs := make([]batch.RecordSpec, 10)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: 1, Value: []byte(strings.Repeat("z", 1000))}
	}
	var b batch.Builder
	v2, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := os.ReadFile("testdata/legacy_v1_gzip.bin")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"v2": v2, "legacy": legacy} {
		dir := sampleSegment(t, map[string][]byte{"00000000000000000100.log": data})
		seg := "segment/00000000000000000100.log"
		for _, mode := range [][]string{nil, {"--json"}} {
			args := append(append([]string{"dump"}, mode...), "--deep-iteration", "--max-message-size", "8", seg)
			code, out, errOut := runReadOnly(t, dir, args...)
			if code != exitProblems {
				t.Errorf("%s %v: exit %d, want %d\n%s%s", name, args, code, exitProblems, out, errOut)
			}
			args = append(append([]string{"dump"}, mode...), seg)
			if code, out, errOut := runReadOnly(t, dir, args...); code != exitOK {
				t.Errorf("%s %v: exit %d, want 0\n%s%s", name, args, code, out, errOut)
			}
		}
	}
}
