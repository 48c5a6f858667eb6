package cleaner

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
)

// round is one cleaning of a rules case: the clock and the log it must
// leave (helpers_test.go's dump notation).
type round struct {
	now  int64
	want string
}

// TestCleanRules: every rule of the package doc, one case each, over one
// or more rounds (each round cleans the whole log: first dirty offset 0,
// delete.retention.ms 1000).
func TestCleanRules(t *testing.T) {
	cases := []struct {
		name      string
		segs      [][]tb
		producers map[int64]LastRecord
		rounds    []round
	}{
		{name: "the last record of each key is kept",
			segs:   [][]tb{{{recs: kv("a", "1", "b", "1")}, {recs: kv("a", "2")}}, {{recs: kv("c", "1", "b", "2")}, {recs: kv("z", "9")}}},
			rounds: []round{{now: 10_000, want: "2:a=2 | 3:c=1 4:b=2 | 5:z=9"}}},
		{name: "a batch keeping every record is copied, one losing some is rewritten",
			segs:   [][]tb{{{recs: kv("a", "1", "b", "1", "c", "1")}, {recs: kv("b", "2")}}, {{recs: kv("z", "9")}}},
			rounds: []round{{now: 10_000, want: "0:a=1 2:c=1 | 3:b=2 | 4:z=9"}}},
		{name: "keyless records are dropped",
			segs:   [][]tb{{{recs: kv("-", "x", "a", "1")}, {recs: kv("-", "y")}}, {{recs: kv("z", "9")}}},
			rounds: []round{{now: 10_000, want: "1:a=1 | 3:z=9"}}},
		{name: "a tombstone gets a horizon, then goes after it",
			segs: [][]tb{{{recs: kv("a", "1", "b", "1")}, {recs: kv("a", "∅")}}, {{recs: kv("z", "9")}}},
			rounds: []round{
				{now: 10_000, want: "1:b=1 | 2:a=∅ h | 3:z=9"},
				{now: 10_999, want: "1:b=1 | 2:a=∅ h | 3:z=9"},
				{now: 11_000, want: "1:b=1 | 3:z=9"},
			}},
		{name: "records of an aborted transaction go whatever their key; its marker stays while they do",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {recs: kv("k", "1")}, {pid: 7, epoch: 1, ctl: "abort"}},
				{{recs: kv("z", "9")}}},
			rounds: []round{
				{now: 10_000, want: "1:k=1 | 2:[abort] | 3:z=9"},
				{now: 10_000, want: "1:k=1 | 2:[abort] h | 3:z=9"},
				{now: 11_000, want: "1:k=1 | 3:z=9"},
			}},
		{name: "a commit marker goes once its transaction's batches are gone",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {pid: 7, epoch: 1, ctl: "commit"}, {recs: kv("a", "2")}},
				{{recs: kv("z", "9")}}},
			rounds: []round{
				{now: 10_000, want: "1:[commit] | 2:a=2 | 3:z=9"},
				{now: 10_000, want: "1:[commit] h | 2:a=2 | 3:z=9"},
				{now: 11_000, want: "2:a=2 | 3:z=9"},
			}},
		{name: "the barrier is never removed",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0}, {ctl: "barrier"}, {recs: kv("a", "2")}},
				{{recs: kv("z", "9")}}},
			rounds: []round{
				{now: 10_000, want: "1:[barrier] | 2:a=2 | 3:z=9"},
				{now: 1 << 50, want: "1:[barrier] | 2:a=2 | 3:z=9"},
			}},
		{name: "a live producer's last batch stays, empty",
			segs:      [][]tb{{{recs: kv("a", "1"), pid: 7, epoch: 2, seq: 4}, {recs: kv("a", "2")}}, {{recs: kv("z", "9")}}},
			producers: map[int64]LastRecord{7: {LastDataOffset: 0, Epoch: 2}},
			rounds:    []round{{now: 10_000, want: "[empty 0-0] | 1:a=2 | 2:z=9"}}},
		{name: "a producer that is not live loses its batches",
			segs:   [][]tb{{{recs: kv("a", "1"), pid: 7, epoch: 2, seq: 4}, {recs: kv("a", "2")}}, {{recs: kv("z", "9")}}},
			rounds: []round{{now: 10_000, want: "1:a=2 | 2:z=9"}}},
		{name: "the batch ending the round stays, empty",
			segs:   [][]tb{{{recs: kv("a", "1")}, {recs: kv("b", "1")}}, {{recs: kv("b", "2")}, {recs: kv("-", "x"), gap: 3}}},
			rounds: []round{{now: 10_000, want: "0:a=1 | 2:b=2 | [empty 6-6]"}}},
		{name: "a transaction kept empty keeps its marker",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {pid: 7, epoch: 1, ctl: "commit"}, {recs: kv("a", "2")}},
				{{recs: kv("z", "9")}}},
			producers: map[int64]LastRecord{7: {LastDataOffset: 0, Epoch: 1}},
			rounds: []round{
				{now: 10_000, want: "[empty 0-0] | 1:[commit] | 2:a=2 | 3:z=9"},
				{now: 20_000, want: "[empty 0-0] | 1:[commit] | 2:a=2 | 3:z=9"},
			}},
		{name: "partlog: a live producer's last marker stays whole past its horizon",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {pid: 7, epoch: 1, ctl: "commit"},
					{recs: kv("b", "1"), pid: 7, epoch: 1, seq: 1}, {recs: kv("a", "2")}},
				{{recs: kv("z", "9")}}},
			producers: map[int64]LastRecord{7: {LastDataOffset: 2, Epoch: 1}},
			rounds: []round{
				{now: 10_000, want: "1:[commit] | 2:b=1 | 3:a=2 | 4:z=9"},
				{now: 10_000, want: "1:[commit] h | 2:b=1 | 3:a=2 | 4:z=9"},
				{now: 20_000, want: "1:[commit] h | 2:b=1 | 3:a=2 | 4:z=9"},
			}},
		{name: "a marker that is not a live producer's last goes after its horizon",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {pid: 7, epoch: 1, ctl: "commit"},
					{recs: kv("b", "1"), pid: 7, epoch: 1, seq: 1}, {recs: kv("a", "2")}},
				{{recs: kv("z", "9")}}},
			rounds: []round{
				{now: 10_000, want: "1:[commit] | 2:b=1 | 3:a=2 | 4:z=9"},
				{now: 10_000, want: "1:[commit] h | 2:b=1 | 3:a=2 | 4:z=9"},
				{now: 20_000, want: "2:b=1 | 3:a=2 | 4:z=9"},
			}},
		{name: "an epoch-bumping marker of a producer with no data batch stays",
			segs: [][]tb{
				{{recs: kv("a", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {pid: 7, epoch: 2, ctl: "commit"}, {recs: kv("a", "2")}},
				{{recs: kv("z", "9")}}},
			producers: map[int64]LastRecord{7: {LastDataOffset: -1, Epoch: 2}},
			rounds: []round{
				{now: 10_000, want: "1:[commit] | 2:a=2 | 3:z=9"},
				{now: 20_000, want: "1:[commit] h | 2:a=2 | 3:z=9"},
				{now: 40_000, want: "1:[commit] h | 2:a=2 | 3:z=9"},
			}},
		{name: "compressed batches are rewritten with their codec",
			segs: [][]tb{{{recs: kv("a", "1", "b", "1", "c", "1"), comp: batch.CompressionZstd}, {recs: kv("b", "2"), comp: batch.CompressionGzip}},
				{{recs: kv("z", "9"), comp: batch.CompressionLZ4}}},
			rounds: []round{{now: 10_000, want: "0:a=1 2:c=1 | 3:b=2 | 4:z=9"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := buildLog(t, c.segs)
			w := newTestWorker(t, 1<<20)
			for i, r := range c.rounds {
				l.clean(w, 0, c.producers, r.now, testCfg)
				if got := l.dump(); got != r.want {
					t.Fatalf("round %d:\n got %s\nwant %s", i+1, got, r.want)
				}
			}
		})
	}
}

// TestCleanCompressedKeepsCodec: a rewritten batch keeps its codec.
func TestCleanCompressedKeepsCodec(t *testing.T) {
	for _, c := range []batch.Compression{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd} {
		l := buildLog(t, [][]tb{{{recs: kv("a", "1", "b", "1"), comp: c}, {recs: kv("a", "2")}}, {{recs: kv("z", "9")}}})
		l.clean(newTestWorker(t, 1<<20), 0, nil, 10_000, testCfg)
		rng, err := l.segs[0].Read(0, 1<<20, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if got := batch.View(rng.Bytes).Compression(); got != c {
			t.Errorf("codec %v became %v", c, got)
		}
		rng.Release()
	}
}

// TestCleanMapFull: a map too small for the dirty section ends the round
// early: its end is the offset after the last one the map covers, and
// records past it are all kept.
func TestCleanMapFull(t *testing.T) {
	var first []tb
	for i := 0; i < 3000; i++ {
		first = append(first, tb{recs: kv(string(rune('a'+i%2))+string(rune(i)), "v")})
	}
	first = append(first, tb{recs: kv("a\x00", "again")})
	l := buildLog(t, [][]tb{first, {{recs: kv("z", "9")}}})
	w := newTestWorker(t, slotSize*minSlots) // 921 keys
	res := l.clean(w, 0, nil, 10_000, testCfg)
	if res.EndOffset != w.Map().Capacity() || res.Keys != w.Map().Capacity() {
		t.Fatalf("end %d keys %d, want both %d", res.EndOffset, res.Keys, w.Map().Capacity())
	}
	// Record 0's key comes back at 3000, past the map: both stay.
	if res.RecordsKept != 3001 {
		t.Fatalf("kept %d records, want all 3001 of the first segment", res.RecordsKept)
	}
	res = l.clean(w, res.EndOffset, nil, 10_000, testCfg)
	if res.EndOffset != 2*w.Map().Capacity() {
		t.Fatalf("second round ends at %d, want %d", res.EndOffset, 2*w.Map().Capacity())
	}
}

// TestCleanRefusesLegacyAndCorrupt: a corrupt batch makes the log
// uncleanable, and the segment is left as it was.
func TestCleanRefusesCorrupt(t *testing.T) {
	l := buildLog(t, [][]tb{{{recs: kv("a", "1")}, {recs: kv("a", "2")}}, {{recs: kv("z", "9")}}})
	p := l.segs[0].Path(".log")
	_ = l.segs[0].Close()
	data := mustRead(t, p)
	data[len(data)-1] ^= 0xff
	mustWrite(t, p, data)
	l.open()
	_, err := l.tryClean(newTestWorker(t, 1<<20), 0, nil, 10_000, testCfg)
	if !errors.Is(err, ErrUncleanable) {
		t.Fatalf("clean: %v, want ErrUncleanable", err)
	}
	if got := mustRead(t, p); string(got) != string(data) {
		t.Fatal("segment changed")
	}
	assertNoLeftovers(t, l.dir)
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWrite(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertNoLeftovers fails when a .cleaned or .swap file is in dir.
func assertNoLeftovers(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cleaned") || strings.HasSuffix(e.Name(), ".swap") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

// TestCleanLeavesCleanSegments: a segment alone in its group whose every
// batch is kept as it is, with the same transaction index, is not
// rewritten (Kafka rewrites it): a second round over a clean log writes
// nothing.
func TestCleanLeavesCleanSegments(t *testing.T) {
	l := buildLog(t, [][]tb{
		{{recs: kv("a", "1", "b", "1")}, {recs: kv("a", "2")}},
		{{recs: kv("c", "1"), pid: 7, epoch: 1, seq: 0, txn: true}, {recs: kv("k", "1")}, {pid: 7, epoch: 1, ctl: "abort"}},
		{{recs: kv("z", "9")}}})
	w := newTestWorker(t, 1<<20)
	cfg := testCfg
	cfg.SegmentBytes = 1 // one segment per group
	first := l.clean(w, 0, nil, 10_000, cfg)
	if first.Groups != 2 || first.Unchanged != 1 { // the last segment keeps all
		t.Fatalf("first round: %+v", first)
	}
	inode := func() []os.FileInfo {
		var out []os.FileInfo
		for _, s := range l.segs {
			fi, err := os.Stat(s.Path(".log"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fi)
		}
		return out
	}
	before, dump := inode(), l.dump()
	// The abort marker loses its transaction's batch in round one and its
	// .txnindex entry in round two: its segment is rewritten once more.
	second := l.clean(w, 0, nil, 10_000, cfg)
	third := l.clean(w, 0, nil, 10_000, cfg)
	after := inode()
	if second.Groups != 1 || second.Unchanged != 2 || third.Groups != 0 || third.Unchanged != 3 {
		t.Fatalf("second round %+v, third %+v", second, third)
	}
	if !os.SameFile(before[0], after[0]) || !os.SameFile(before[2], after[2]) || os.SameFile(before[1], after[1]) {
		t.Fatal("unchanged segments were rewritten, or the changed one was not")
	}
	if got := l.dump(); got != strings.Replace(dump, "[abort]", "[abort] h", 1) {
		t.Fatalf("log %s, was %s", got, dump)
	}
}
