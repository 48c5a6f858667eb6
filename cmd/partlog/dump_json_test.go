package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/partlog/partlog/dump"
)

// decodeJSONLines parses --json output: one dump.File per line.
func decodeJSONLines(t *testing.T, out string) []dump.File {
	t.Helper()
	var files []dump.File
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	for dec.More() {
		var f dump.File
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%v in:\n%s", err, out)
		}
		if f.SchemaVersion != 1 {
			t.Errorf("%s: schemaVersion %d", f.File, f.SchemaVersion)
		}
		files = append(files, f)
	}
	if n := strings.Count(out, "\n"); n != len(files) {
		t.Errorf("%d lines for %d objects", n, len(files))
	}
	return files
}

// TestDumpJSONAllKinds dumps every kind of file with --json and checks the
// decoded content against the sample's known values.
func TestDumpJSONAllKinds(t *testing.T) {
	bin, err := os.ReadFile("testdata/txnindex_entry.bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.txnindex": bin})
	code, out, errOut := runReadOnly(t, dir, "dump", "--json", "--deep-iteration",
		"segment/00000000000000000000.log", "segment/00000000000000000000.index",
		"segment/00000000000000000000.timeindex", "segment/00000000000000000000.txnindex",
		"segment/00000000000000000018.snapshot")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	files := decodeJSONLines(t, out)
	kinds := []string{"log", "index", "timeindex", "txnindex", "snapshot"}
	if len(files) != len(kinds) {
		t.Fatalf("%d objects, want %d", len(files), len(kinds))
	}
	for i, f := range files {
		if f.Kind != kinds[i] || len(f.Problems) != 0 {
			t.Errorf("object %d: kind %s, problems %v", i, f.Kind, f.Problems)
		}
	}

	log := files[0]
	if len(log.Batches) != 10 || log.InvalidBytes != nil {
		t.Fatalf("log: %d batches, invalid %v", len(log.Batches), log.InvalidBytes)
	}
	b := log.Batches[3]
	if b.V2Header == nil || b.Position != 307 || b.BaseOffset != 6 || b.LastOffset != 7 || b.CRC != 3660345671 || !b.CRCValid ||
		b.ProducerID != 1000 || b.ProducerEpoch != 5 || !b.IsTransactional || len(b.Records) != 2 {
		t.Errorf("batch 3: %+v", b)
	}
	r := b.Records[1]
	if r.Offset != 7 || r.Sequence == nil || *r.Sequence != 1 || r.Key == nil || *r.Key != "tk1" || r.KeyEncoding != "utf8" ||
		r.HeaderKeys == nil || len(r.HeaderKeys) != 0 {
		t.Errorf("record 7: %+v", r)
	}
	if keys := log.Batches[1].Records[0].HeaderKeys; strings.Join(keys, ",") != "trace-id,empty,nullval" {
		t.Errorf("header keys %v", keys)
	}
	if r := log.Batches[2].Records[0]; r.Key != nil || r.KeyEncoding != "" || r.KeySize != -1 {
		t.Errorf("null key: %+v", r)
	}
	if c := log.Batches[4].Records[0].Control; c == nil || c.TypeName != "COMMIT" || c.CoordinatorEpoch == nil || *c.CoordinatorEpoch != 7 {
		t.Errorf("commit marker control %+v", c)
	}
	if c := log.Batches[7].Records[0].Control; c == nil || c.Type != 7 || c.MirrorPidReset == nil || c.MirrorPidReset.SourceClusterID != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Errorf("mirror pid reset control %+v", c)
	}
	if b := log.Batches[9]; b.RecordsCount != 0 || b.Records == nil || len(b.Records) != 0 {
		t.Errorf("empty batch %+v", b)
	}

	var ti []dump.TimeEntry
	remarshal(t, files[2].Entries, &ti)
	if len(ti) != 1 || ti[0] != (dump.TimeEntry{Timestamp: 1700000005000, Offset: 15}) {
		t.Errorf("timeindex entries %v", ti)
	}
	var oi []dump.OffsetEntry
	remarshal(t, files[1].Entries, &oi)
	if oi == nil || len(oi) != 0 {
		t.Errorf("index entries %v", files[1].Entries)
	}
	var txn []dump.TxnEntry
	remarshal(t, files[3].Entries, &txn)
	if len(txn) != 1 || txn[0] != (dump.TxnEntry{ProducerID: 4000, FirstOffset: 100, LastOffset: 105, LastStableOffset: 100}) {
		t.Errorf("txnindex entries %v", txn)
	}
	snap := files[4]
	if len(snap.Producers) != 3 || *snap.BaseOffset != 18 {
		t.Fatalf("snapshot %+v", snap)
	}
	if p := snap.Producers[0]; p.ProducerID != 2000 || p.LastOffset != -1 || p.FirstSequence != nil || p.CoordinatorEpoch != 3 {
		t.Errorf("producer 2000 %+v", p)
	}
	if p := snap.Producers[2]; p.ProducerID != 3000 || p.FirstSequence == nil || *p.FirstSequence != 10 || p.LastOffset != 17 {
		t.Errorf("producer 3000 %+v", p)
	}
}

func remarshal(t *testing.T, v any, dst any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		t.Fatal(err)
	}
}

// TestDumpJSONDamagedLog: a CRC failure is reported and the walk goes on;
// the invalid tail is reported with its position and length.
func TestDumpJSONDamagedLog(t *testing.T) {
	data, err := os.ReadFile("testdata/sample/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	orig := data
	data = append([]byte{}, data...)
	data[118+70] ^= 0xff // a byte in the records of the batch at 118
	data = append(data, 0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 1, 0, 0)
	dir := sampleSegment(t, map[string][]byte{"00000000000000000000.log": data})
	code, out, _ := runReadOnly(t, dir, "dump", "--json", "segment/00000000000000000000.log")
	if code != exitProblems {
		t.Errorf("exit %d, want %d", code, exitProblems)
	}
	f := decodeJSONLines(t, out)[0]
	if len(f.Batches) != 10 || f.Batches[1].CRCValid || !f.Batches[2].CRCValid {
		t.Errorf("batches %d, crcValid %t %t", len(f.Batches), f.Batches[1].CRCValid, f.Batches[2].CRCValid)
	}
	if f.InvalidBytes == nil || *f.InvalidBytes != (dump.InvalidBytes{Position: sampleLogSize, Count: 13}) {
		t.Errorf("invalidBytes %+v", f.InvalidBytes)
	}
	var kinds []string
	for _, p := range f.Problems {
		kinds = append(kinds, p.Kind)
	}
	if strings.Join(kinds, ",") != "crc,invalidBytes" || f.Problems[0].Position != 118 {
		t.Errorf("problems %+v", f.Problems)
	}

	// A framing failure ends the walk.
	bad := append([]byte{}, orig...)
	bad[222+16] = 7 // magic 7 in the batch at 222
	dir = sampleSegment(t, map[string][]byte{"00000000000000000000.log": bad})
	_, out, _ = runReadOnly(t, dir, "dump", "--json", "segment/00000000000000000000.log")
	f = decodeJSONLines(t, out)[0]
	if len(f.Batches) != 2 || f.InvalidBytes == nil || f.InvalidBytes.Position != 222 || f.Problems[0].Kind != "framing" {
		t.Errorf("framing: %d batches, invalid %+v, problems %+v", len(f.Batches), f.InvalidBytes, f.Problems)
	}
}

// TestDumpJSONLegacy dumps the legacy gzip wrapper vector.
func TestDumpJSONLegacy(t *testing.T) {
	bin, err := os.ReadFile("testdata/legacy_v1_gzip.bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := sampleSegment(t, map[string][]byte{"00000000000000000100.log": bin})
	code, out, errOut := runReadOnly(t, dir, "dump", "--json", "--deep-iteration", "segment/00000000000000000100.log")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	b := decodeJSONLines(t, out)[0].Batches[0]
	if b.LegacyHeader == nil || b.V2Header != nil || b.Magic != 1 || b.BaseOffset != 2 || b.LastOffset != 3 ||
		b.CRC != 969688407 || b.Compression != "gzip" || len(b.Records) != 2 {
		t.Fatalf("legacy batch %+v", b)
	}
	if r := b.Records[0]; r.Offset != 2 || *r.Key != "a" || *r.Value != "x" || r.CRC == nil || *r.CRC != 2131067474 || r.Sequence != nil {
		t.Errorf("inner message %+v", r)
	}
	// --offsets looks inside the wrapper: 2 is in it, 4 is not.
	for rng, n := range map[string]int{"2:2": 1, "4:": 0} {
		_, out, _ := runReadOnly(t, dir, "dump", "--json", "--offsets", rng, "segment/00000000000000000100.log")
		if got := len(decodeJSONLines(t, out)[0].Batches); got != n {
			t.Errorf("--offsets %s: %d batches, want %d", rng, got, n)
		}
	}
}

// TestDumpJSONProblems: index mismatches, sanity failures, corrupt
// snapshots and missing files all land in problems, with the exit code of
// the text mode, and every object still has schemaVersion 1.
func TestDumpJSONProblems(t *testing.T) {
	good, err := os.ReadFile("testdata/sample/00000000000000000018.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	dir := sampleSegment(t, map[string][]byte{
		"00000000000000000000.index":    offsetIndexBytes(0, [2]int64{2, 0}, [2]int64{7, 118}),
		"00000000000000000030.snapshot": good[:100],
	})
	code, out, errOut := runReadOnly(t, dir, "dump", "--json",
		"segment/00000000000000000000.index", "segment/00000000000000000030.snapshot",
		"segment/00000000000000000040.index", "segment/notes.txt")
	if code != exitProblems|exitOperational {
		t.Errorf("exit %d, want %d", code, exitProblems|exitOperational)
	}
	if errOut != "Ignoring unknown file segment/notes.txt\n" {
		t.Errorf("stderr %q", errOut)
	}
	files := decodeJSONLines(t, out)
	if len(files) != 3 {
		t.Fatalf("%d objects", len(files))
	}
	if p := files[0].Problems; len(p) != 1 || p[0].Kind != "indexMismatch" || p[0].Position != 8 {
		t.Errorf("index problems %+v", p)
	}
	if p := files[1].Problems; len(p) != 1 || p[0].Kind != "corrupt" || files[1].Producers == nil {
		t.Errorf("snapshot problems %+v", p)
	}
	if p := files[2].Problems; len(p) != 1 || p[0].Kind != "io" {
		t.Errorf("missing file problems %+v", p)
	}

	_, out, _ = runReadOnly(t, dir, "dump", "--json", "--index-sanity-check", "segment/00000000000000000000.timeindex")
	if f := decodeJSONLines(t, out)[0]; f.SanityCheck == nil || !f.SanityCheck.Passed || f.Entries != nil {
		t.Errorf("sanity object %+v", f)
	}
}
