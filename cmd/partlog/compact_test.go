package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testutil"
)

// makeCompactedLogDir writes a log directory with one partition,
// changelog-0, of keyed updates and tombstones in several segments, an
// aborted transaction among them, closed as a broker closes it
// (checkpoints, high watermark, clean-shutdown marker). It returns the
// partition directory and the last record of each key.
func makeCompactedLogDir(t *testing.T) (string, map[string]string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "logdir")
	// A cleaner that never falls due by itself: compact does the work.
	opts := &partlog.Options{SegmentBytes: 2048, PrefaultBytes: -1, MinCleanableDirtyRatio: 1}
	d, err := partlog.OpenDir(root, &partlog.DirOptions{Log: opts})
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Create("changelog", 0, partlog.TopicID{7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	var b batch.Builder
	seq := int32(0)
	ts := time.Now().UnixMilli()
	for i := 0; i < 122; i++ {
		spec := batch.NewBatchSpec(0)
		txn := i%17 == 5 && i < 120
		if txn {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = 3, 0, seq, true
			seq++
		}
		k := fmt.Sprintf("key-%d", i%9)
		r := batch.RecordSpec{Timestamp: ts, Key: []byte(k), Value: fmt.Appendf(nil, "v%d", i)}
		if i%11 == 0 || i >= 120 { // the last two: tombstones that stay
			r.Value = nil
		}
		data, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{r})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(data, 1); err != nil {
			t.Fatal(err)
		}
		if txn {
			marker := batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{Timestamp: ts, ProducerID: 3, ProducerEpoch: 0}, false, 1)
			if _, err := l.AppendAsCoordinator(marker, 1); err != nil {
				t.Fatal(err)
			}
			continue // aborted: never the key's value
		}
		last[k] = string(r.Value)
		if r.Value == nil {
			last[k] = "<tombstone>"
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "changelog-0"), last
}

// readKeys reads the last record of each key the partition holds.
func readKeys(t *testing.T, dir string) (map[string]string, int) {
	t.Helper()
	l, err := partlog.Open(dir, &partlog.Options{PrefaultBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, n := map[string]string{}, 0
	aborted, err := l.AbortedTransactions(0, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	for next := l.LogStartOffset(); next < l.LogEndOffset(); {
		v, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			next = b.NextOffset()
			if b.IsControl() {
				continue
			}
			abortedBatch := false
			for _, a := range aborted {
				abortedBatch = abortedBatch || (b.ProducerID() == a.ProducerID && b.BaseOffset() >= a.FirstOffset && b.BaseOffset() <= a.LastOffset)
			}
			data, _ := b.RecordData(nil, 1<<20)
			ri := b.Records(data)
			for r, ok := ri.Next(); ok; r, ok = ri.Next() {
				n++
				if abortedBatch {
					continue
				}
				got[string(r.Key)] = string(r.Value)
				if r.Value == nil {
					got[string(r.Key)] = "<tombstone>"
				}
			}
		}
		v.Release()
	}
	return got, n
}

// TestCompactCLI: without --apply compact only plans and changes nothing;
// with it the partition keeps the last record of each key, verify finds
// nothing wrong, dump shows the delete horizons, the replaced files are in
// the quarantine, and a second run has nothing to clean. A partition open
// elsewhere is refused.
func TestCompactCLI(t *testing.T) {
	dir, want := makeCompactedLogDir(t)
	before := testutil.HashTree(t, filepath.Dir(dir))
	_, records := readKeys(t, dir)
	before = testutil.HashTree(t, filepath.Dir(dir)) // reading wrote its snapshot
	code, out, errOut := runCLI(t, "", "compact", dir)
	if code != exitOK || !strings.Contains(out, "would clean") {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	sameTree(t, before, testutil.HashTree(t, filepath.Dir(dir)))

	code, out, errOut = runCLI(t, "", "compact", "--apply", dir)
	if code != exitRepaired || !strings.Contains(out, "cleaned") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	got, after := readKeys(t, dir)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s: %q, want %q", k, got[k], v)
		}
	}
	if after >= records || after > 2*len(want) {
		t.Fatalf("%d records after cleaning, %d before, %d keys", after, records, len(want))
	}
	q, err := filepath.Glob(filepath.Join(dir, quarantineDir, "*", "*.log"))
	if err != nil || len(q) == 0 {
		t.Fatalf("no replaced segment in the quarantine: %v %v", q, err)
	}
	if code, out, errOut := runCLI(t, "", "verify", "--full", dir); code != exitOK {
		t.Fatalf("verify after compact: exit %d\n%s%s", code, out, errOut)
	}
	checkConsistent(t, dir)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	code, out, _ = runCLI(t, "", "dump", "--deep-iteration", "--print-data-log", segs[0])
	if code != exitOK || !strings.Contains(out, "deleteHorizonMs: OptionalLong[") {
		t.Fatalf("dump of the cleaned segment: exit %d\n%s", code, out)
	}
	checkCleanedShapes(t, dir, segs)

	// The second run writes the delete horizons of the abort markers whose
	// transactions the first one removed; the third finds nothing to do.
	runCLI(t, "", "compact", "--apply", dir)
	code, out, errOut = runCLI(t, "", "compact", "--apply", "--json", dir)
	var rep compactReport
	err = json.Unmarshal([]byte(out), &rep)
	if code != exitOK || err != nil || rep.Groups != 0 || !rep.Applied || len(rep.QuarantinedLog) != 0 {
		t.Fatalf("third run: exit %d %v %+v\n%s%s", code, err, rep, out, errOut)
	}

	l, err := partlog.Open(dir, &partlog.Options{PrefaultBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, errOut = runCLI(t, "", "compact", "--apply", dir)
	if code != exitProblems || !strings.Contains(errOut, "refused") {
		t.Fatalf("open partition: exit %d %s", code, errOut)
	}
}

// TestCompactCLIFlags: bad flag values are usage errors.
func TestCompactCLIFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"compact", "--quarantine", "q", dir},
		{"compact", "--apply", "--delete-retention-ms", "-1", dir},
		{"compact", "--apply", "--segment-bytes", "3", dir},
	} {
		if code, _, _ := runCLI(t, "", args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, quarantineDir)); err == nil {
		t.Fatal("a refused run made a quarantine")
	}
}

// checkCleanedShapes: the cleaned partition holds what only a cleaner
// leaves (an offset gap between batches, an empty batch: the aborted
// producer's last, kept so its sequence survives; a delete horizon), and
// dump shows each as Kafka's tool does: the empty batch as its header
// with count 0 and no record line, the gap as the next batch's offsets.
func checkCleanedShapes(t *testing.T, dir string, segs []string) {
	t.Helper()
	gaps, empties, horizons := 0, 0, 0
	next := int64(0)
	for _, seg := range segs {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		it := batch.NewIterator(data, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if b.BaseOffset() > next {
				gaps++
			}
			next = b.NextOffset()
			if b.HasDeleteHorizon() {
				horizons++
			}
			if b.RecordsCount() != 0 {
				continue
			}
			empties++
			_, out, _ := runCLI(t, "", "dump", "--deep-iteration", "--print-data-log", seg)
			head := fmt.Sprintf("baseOffset: %d lastOffset: %d count: 0 ", b.BaseOffset(), b.NextOffset()-1)
			i := strings.Index(out, head)
			if i < 0 {
				t.Fatalf("dump of %s does not show the empty batch at %d as %q:\n%s", filepath.Base(seg), b.BaseOffset(), head, out)
			}
			rest := out[i:]
			if j := strings.IndexByte(rest, '\n'); j >= 0 && strings.HasPrefix(rest[j+1:], "| offset:") {
				t.Fatalf("dump shows a record under the empty batch at %d:\n%s", b.BaseOffset(), rest)
			}
		}
	}
	if gaps == 0 || empties == 0 || horizons == 0 {
		t.Fatalf("the cleaned partition has %d offset gaps, %d empty batches, %d delete horizons: the test needs each", gaps, empties, horizons)
	}
}
