package partlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
)

// rollClock is a settable clock for Options.Now.
type rollClock struct {
	mu  sync.Mutex
	now time.Time
}

func newRollClock(t time.Time) *rollClock { return &rollClock{now: t} }

func (c *rollClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *rollClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rollAppend is one append as the test sent it.
type rollAppend struct {
	seg, pos, size int64
	first, last    int64
	// maxTs is the largest batch max timestamp of the append and maxOff
	// the last offset of the first batch holding it.
	maxTs, maxOff int64
	data          []byte // the bytes as written (offsets and epoch stamped)
}

// rollLeader appends one leader append made of the given batches and
// records it with values computed from the batches themselves.
func rollLeader(t *testing.T, l *Log, batches ...[]byte) rollAppend {
	t.Helper()
	var src []byte
	for _, b := range batches {
		src = append(src, b...)
	}
	leo := l.LogEndOffset()
	info, err := l.AppendAsLeader(src, 1)
	if err != nil {
		t.Fatalf("append at %d: %v", leo, err)
	}
	a := rollAppend{seg: info.SegmentBaseOffset, pos: info.Position, size: int64(len(src)), first: leo, maxTs: -1}
	data := bytes.Clone(src)
	next := leo
	for p := 0; p < len(data); {
		v := batch.View(data[p:])
		v = v[:v.Size()]
		v.SetBaseOffset(next)
		v.SetPartitionLeaderEpoch(1)
		if v.MaxTimestamp() > a.maxTs {
			a.maxTs, a.maxOff = v.MaxTimestamp(), v.LastOffset()
		}
		next = v.NextOffset()
		p += len(v)
	}
	a.last, a.data = next-1, data
	if info.FirstOffset != a.first || info.LastOffset != a.last {
		t.Fatalf("append reported offsets %d..%d, want %d..%d", info.FirstOffset, info.LastOffset, a.first, a.last)
	}
	return a
}

// rollFollower appends follower batches (offsets kept) and records them.
func rollFollower(t *testing.T, l *Log, batches ...[]byte) rollAppend {
	t.Helper()
	var src []byte
	for _, b := range batches {
		src = append(src, b...)
	}
	info, err := l.AppendAsFollower(src)
	if err != nil {
		t.Fatalf("follower append: %v", err)
	}
	a := rollAppend{seg: info.SegmentBaseOffset, pos: info.Position, size: int64(len(src)), maxTs: -1, data: bytes.Clone(src)}
	it := batch.NewIterator(src, 0)
	first := true
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if first {
			a.first, first = v.BaseOffset(), false
		}
		a.last = v.LastOffset()
		if v.MaxTimestamp() > a.maxTs {
			a.maxTs, a.maxOff = v.MaxTimestamp(), v.LastOffset()
		}
	}
	return a
}

// rollExpectIndexes computes the .index and .timeindex of a sealed
// segment from its appends with Kafka's rules, written independently of
// the segment package: an offset entry (last offset of the append, its
// position) for every append that starts when more than interval bytes
// were appended since the last entry (the first append never gets one),
// with a time entry next to it when the running maximum timestamp grew
// past the last time entry; at roll or close one more time entry for the
// segment's maximum if it grew.
func rollExpectIndexes(appends []rollAppend, interval int64) (offsets []index.OffsetEntry, times []index.TimeEntry) {
	var since int64
	runTs, runOff := int64(-1), int64(-1)
	lastTs := int64(-1)
	for i, a := range appends {
		if a.maxTs > runTs {
			runTs, runOff = a.maxTs, a.maxOff
		}
		if i > 0 && since > interval {
			offsets = append(offsets, index.OffsetEntry{Offset: a.last, Position: int32(a.pos)})
			if runTs > lastTs {
				times = append(times, index.TimeEntry{Timestamp: runTs, Offset: runOff})
				lastTs = runTs
			}
			since = 0
		}
		since += a.size
	}
	if runTs > lastTs {
		times = append(times, index.TimeEntry{Timestamp: runTs, Offset: runOff})
	}
	return offsets, times
}

// rollCheckSealed checks the files of every segment listed in segs
// (sealed: after a roll or Close) against the appends: the .log is exactly
// the appended bytes, the indexes exactly rollExpectIndexes' entries (so
// trimmed to entries×8 and entries×12), named with 20-digit offsets.
func rollCheckSealed(t *testing.T, dir string, segs []int64, appends []rollAppend, interval int64) {
	t.Helper()
	for _, base := range segs {
		var mine []rollAppend
		var data []byte
		for _, a := range appends {
			if a.seg == base {
				mine = append(mine, a)
				data = append(data, a.data...)
			}
		}
		name := fmt.Sprintf("%s/%020d", dir, base)
		got, err := os.ReadFile(name + ".log")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("segment %d: .log is %d bytes, want its %d bytes of data", base, len(got), len(data))
		}
		wantOff, wantTime := rollExpectIndexes(mine, interval)
		b, err := os.ReadFile(name + ".index")
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 8*len(wantOff) {
			t.Fatalf("segment %d: .index is %d bytes, want %d entries × 8", base, len(b), len(wantOff))
		}
		gotOff, err := index.DecodeOffsetIndex(b, base)
		if err != nil || !slices.Equal(gotOff, wantOff) {
			t.Fatalf("segment %d: .index %v (%v), want %v", base, gotOff, err, wantOff)
		}
		b, err = os.ReadFile(name + ".timeindex")
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 12*len(wantTime) {
			t.Fatalf("segment %d: .timeindex is %d bytes, want %d entries × 12", base, len(b), len(wantTime))
		}
		gotTime, err := index.DecodeTimeIndex(b, base)
		if err != nil || !slices.Equal(gotTime, wantTime) {
			t.Fatalf("segment %d: .timeindex %v (%v), want %v", base, gotTime, err, wantTime)
		}
		if len(mine) > 0 {
			maxTs, maxOff := int64(-1), int64(-1)
			for _, a := range mine {
				if a.maxTs > maxTs {
					maxTs, maxOff = a.maxTs, a.maxOff
				}
			}
			if last := gotTime[len(gotTime)-1]; last.Timestamp != maxTs || last.Offset != maxOff {
				t.Fatalf("segment %d: last time entry %+v, want (%d, %d)", base, last, maxTs, maxOff)
			}
		}
	}
}

// rollBases returns the distinct segment bases of appends, in order.
func rollBases(appends []rollAppend) []int64 {
	var out []int64
	for _, a := range appends {
		if len(out) == 0 || out[len(out)-1] != a.seg {
			out = append(out, a.seg)
		}
	}
	return out
}

func rollOpts(t *testing.T) *Options {
	o := smallOpts(t)
	o.SegmentMs = -1 // only the rule under test rolls
	return o
}

func TestRollOnSize(t *testing.T) {
	opts := rollOpts(t)
	opts.SegmentBytes = 4096
	opts.IndexIntervalBytes = 700
	l, dir := openTestLog(t, opts)
	r := rand.New(rand.NewPCG(1, 2))
	var appends []rollAppend
	// The model: a new segment when size > SegmentBytes - incoming.
	var wantBases []int64
	var cur int64
	for i := 0; i < 60; i++ {
		b := makeBatch(t, 1+r.IntN(3), r.IntN(900), 1_000_000+int64(i))
		if len(wantBases) == 0 || cur > opts.SegmentBytes-int64(len(b)) {
			wantBases = append(wantBases, l.LogEndOffset())
			cur = 0
		}
		cur += int64(len(b))
		a := rollLeader(t, l, b)
		if a.seg != wantBases[len(wantBases)-1] {
			t.Fatalf("append %d (%d bytes) went to segment %d, want %d", i, len(b), a.seg, wantBases[len(wantBases)-1])
		}
		appends = append(appends, a)
		segs := l.Segments()
		// Every segment but the active one is sealed and trimmed now.
		rollCheckSealed(t, dir, segs[:len(segs)-1], appends, opts.IndexIntervalBytes)
	}
	if got := l.Segments(); !slices.Equal(got, wantBases) || len(got) < 5 {
		t.Fatalf("segments %v, want %v", got, wantBases)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rollCheckSealed(t, dir, wantBases, appends, opts.IndexIntervalBytes)
}

func TestRollOnTime(t *testing.T) {
	const segMs = 1000
	clock := newRollClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	opts := rollOpts(t)
	opts.SegmentMs = segMs
	opts.Now = clock.Now
	l, dir := openTestLog(t, opts)
	// Batch timestamps (one record each: max timestamp = the timestamp).
	// Age = incoming max timestamp − the max timestamp of the segment's
	// first batch; roll when age > SegmentMs. The wall clock plays no part
	// while timestamps are known, so it leaps between appends.
	steps := []struct {
		ts   int64
		roll bool
	}{
		{10_000, false}, // first batch of the log
		{10_500, false},
		{9_000, false}, // older: negative age
		{11_000, false},
		{11_001, true}, // age 1001
		{11_500, false},
		{12_001, false}, // age 1000: not more than SegmentMs
		{12_002, true},
		{50_000, true},
		{50_001, false},
	}
	var appends []rollAppend
	var wantBases []int64
	for i, s := range steps {
		if i == 0 || s.roll {
			wantBases = append(wantBases, l.LogEndOffset())
		}
		appends = append(appends, rollLeader(t, l, makeBatch(t, 1, 50, s.ts)))
		if got := l.Segments(); !slices.Equal(got, wantBases) {
			t.Fatalf("after step %d (ts %d): segments %v, want %v", i, s.ts, got, wantBases)
		}
		clock.Add(time.Hour)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rollCheckSealed(t, dir, wantBases, appends, opts.IndexIntervalBytes)
}

func TestRollOnTimeWithoutTimestamps(t *testing.T) {
	// Batches whose max timestamp is -1: the age is the clock's time since
	// the segment was created.
	const segMs = 1000
	clock := newRollClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	opts := rollOpts(t)
	opts.SegmentMs = segMs
	opts.Now = clock.Now
	l, _ := openTestLog(t, opts)
	noTs := func() []byte { return makeBatch(t, 1, 20, batch.NoTimestamp) }
	if v := batch.View(noTs()); v.MaxTimestamp() != batch.NoTimestamp {
		t.Fatalf("max timestamp %d", v.MaxTimestamp())
	}
	steps := []struct {
		advance time.Duration
		roll    bool
	}{
		{0, false},
		{600 * time.Millisecond, false},
		{400 * time.Millisecond, false}, // age 1000
		{time.Millisecond, true},        // age 1001; the new segment is created now
		{999 * time.Millisecond, false},
		{2 * time.Millisecond, true},
	}
	var wantBases []int64
	for i, s := range steps {
		clock.Add(s.advance)
		if i == 0 || s.roll {
			wantBases = append(wantBases, l.LogEndOffset())
		}
		if _, err := l.AppendAsLeader(noTs(), 0); err != nil {
			t.Fatal(err)
		}
		if got := l.Segments(); !slices.Equal(got, wantBases) {
			t.Fatalf("after step %d: segments %v, want %v", i, got, wantBases)
		}
	}
}

// TestTruncatedToEmptyAgesOnTheLogClock: a segment truncated to empty
// restarts its age on the log's Options.Now, not on time.Now, so a log
// on any clock rolls it on time.
func TestTruncatedToEmptyAgesOnTheLogClock(t *testing.T) {
	clock := newRollClock(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	opts := rollOpts(t)
	opts.SegmentMs = 1000
	opts.Now = clock.Now
	l, _ := openTestLog(t, opts)
	noTs := func() []byte { return makeBatch(t, 1, 20, batch.NoTimestamp) }
	for i := 0; i < 3; i++ {
		if _, err := l.AppendAsLeader(noTs(), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(noTs(), 0); err != nil {
		t.Fatal(err)
	}
	// Back to the start of segment 3: empty again, its age restarts now.
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(noTs(), 0); err != nil {
		t.Fatal(err)
	}
	clock.Add(1001 * time.Millisecond)
	if _, err := l.AppendAsLeader(noTs(), 0); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); !slices.Equal(got, []int64{0, 3, 4}) {
		t.Fatalf("segments %v, want [0 3 4]: the segment truncated to empty did not roll 1001 ms (log clock) later", got)
	}
}

func TestRollOnOffsetIndexFull(t *testing.T) {
	opts := rollOpts(t)
	opts.MaxIndexBytes = 80 // 10 offset entries; 6 time slots (5 usable)
	// Every append after the first is indexed. (IndexIntervalBytes 0
	// would mean the default 4096: see TestIndexIntervalBytesZeroIndexesEveryAppend.)
	opts.IndexIntervalBytes = 1
	l, dir := openTestLog(t, opts)
	// Constant timestamps keep the time index at one entry, so only the
	// offset index fills: appends 2..11 of a segment take its 10 slots.
	var appends []rollAppend
	var wantBases []int64
	for i := 0; i < 40; i++ {
		if i%11 == 0 {
			wantBases = append(wantBases, l.LogEndOffset())
		}
		appends = append(appends, rollLeader(t, l, makeBatch(t, 2, 30, 5000)))
		if got := l.Segments(); !slices.Equal(got, wantBases) {
			t.Fatalf("after append %d: segments %v, want %v", i, got, wantBases)
		}
	}
	segs := l.Segments()
	rollCheckSealed(t, dir, segs[:len(segs)-1], appends, 1)
	for _, base := range segs[:len(segs)-1] {
		if st, err := os.Stat(filenames.Path(dir, base, filenames.Index)); err != nil || st.Size() != 80 {
			t.Fatalf("segment %d: full .index should be 80 bytes: %v", base, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rollCheckSealed(t, dir, segs, appends, 1)
}

func TestRollOnTimeIndexFull(t *testing.T) {
	opts := rollOpts(t)
	opts.MaxIndexBytes = 120 // 15 offset entries; 10 time slots, 9 usable
	opts.IndexIntervalBytes = 1
	l, dir := openTestLog(t, opts)
	// Growing timestamps: every indexed append adds a time entry, so
	// appends 2..10 fill the 9 usable slots and the 11th rolls.
	var appends []rollAppend
	var wantBases []int64
	for i := 0; i < 35; i++ {
		if i%10 == 0 {
			wantBases = append(wantBases, l.LogEndOffset())
		}
		appends = append(appends, rollLeader(t, l, makeBatch(t, 2, 30, 5000+int64(i)*10)))
		if got := l.Segments(); !slices.Equal(got, wantBases) {
			t.Fatalf("after append %d: segments %v, want %v", i, got, wantBases)
		}
	}
	segs := l.Segments()
	rollCheckSealed(t, dir, segs[:len(segs)-1], appends, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rollCheckSealed(t, dir, segs, appends, 1)
}

func TestRollOnOffsetOverflow(t *testing.T) {
	cases := []struct {
		second int64 // base offset of the second batch (3 records)
		roll   bool
	}{
		{math.MaxInt32 - 2, false}, // last offset 2^31-1: still relative to 0
		{math.MaxInt32 - 1, true},  // last offset 2^31
		{1<<31 + 10, true},
		{1 << 40, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.second), func(t *testing.T) {
			opts := rollOpts(t)
			l, dir := openTestLog(t, opts)
			a1 := rollFollower(t, l, makeFollowerBatch(t, 0, 0, 3, 40, 100))
			a2 := rollFollower(t, l, makeFollowerBatch(t, tc.second, 0, 3, 40, 200))
			want := []int64{0}
			if tc.roll {
				want = append(want, tc.second)
			}
			if got := l.Segments(); !slices.Equal(got, want) {
				t.Fatalf("segments %v, want %v", got, want)
			}
			if a2.seg != want[len(want)-1] || l.LogEndOffset() != tc.second+3 {
				t.Fatalf("second batch in segment %d, LEO %d", a2.seg, l.LogEndOffset())
			}
			if tc.roll {
				if _, err := os.Stat(fmt.Sprintf("%s/%020d.log", dir, tc.second)); err != nil {
					t.Fatal(err)
				}
				rollCheckSealed(t, dir, []int64{0}, []rollAppend{a1}, opts.IndexIntervalBytes)
			}
			for _, o := range []int64{0, 2, tc.second, tc.second + 2} {
				v, err := l.Read(o, 1, l.LogEndOffset())
				if err != nil {
					t.Fatal(err)
				}
				b, err := batch.Check(v.Records)
				if err != nil || b.BaseOffset() != o/tc.second*tc.second {
					t.Fatalf("read %d: %v", o, err)
				}
				v.Release()
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			rollCheckSealed(t, dir, want, []rollAppend{a1, a2}, opts.IndexIntervalBytes)
		})
	}
}

func TestRollExplicit(t *testing.T) {
	opts := rollOpts(t)
	l, dir := openTestLog(t, opts)
	// An empty log's segment is not rolled.
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); !slices.Equal(got, []int64{0}) {
		t.Fatalf("segments %v", got)
	}
	var appends []rollAppend
	for i := 0; i < 4; i++ {
		appends = append(appends, rollLeader(t, l, makeBatch(t, 2, 100, int64(1000+i))))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); !slices.Equal(got, []int64{0, 8}) {
		t.Fatalf("segments %v", got)
	}
	rollCheckSealed(t, dir, []int64{0}, appends, opts.IndexIntervalBytes)
	// The new active segment is empty: rolling again changes nothing.
	for i := 0; i < 3; i++ {
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Segments(); !slices.Equal(got, []int64{0, 8}) {
		t.Fatalf("segments %v after rolling an empty segment", got)
	}
	ltCheckFiles(t, dir, []int64{0, 8})
	a := rollLeader(t, l, makeBatch(t, 1, 10, 5000))
	if a.seg != 8 || a.first != 8 || a.pos != 0 {
		t.Fatalf("append after roll: %+v", a)
	}
	appends = append(appends, a)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rollCheckSealed(t, dir, []int64{0, 8}, appends, opts.IndexIntervalBytes)
}

// TestIndexPlacementGolden checks the offset-index entries of a known
// sequence of appends (single and multi-batch, of varied sizes) against
// Kafka's cadence with index.interval.bytes = 100.
func TestIndexPlacementGolden(t *testing.T) {
	const interval = 100
	opts := rollOpts(t)
	opts.IndexIntervalBytes = interval
	opts.SegmentBytes = 1 << 20
	l, dir := openTestLog(t, opts)
	// Each append: batches of (records, value size). Sizes: (1,30) is 100
	// bytes, (1,0) 70, (1,5) 75, (1,10) 80, so the counter sometimes sits
	// at exactly 100 (no entry: it must be more). Multi-batch appends get
	// one entry: the last offset of the whole append, the position of its
	// first batch.
	plan := [][][2]int{
		{{1, 30}}, {{1, 0}}, {{1, 0}}, {{1, 5}}, {{1, 30}}, {{1, 10}}, {{1, 0}},
		{{3, 40}, {1, 0}}, {{1, 10}}, {{2, 60}, {2, 60}, {1, 3}}, {{1, 0}},
		{{1, 90}}, {{1, 0}, {2, 3}}, {{1, 0}}, {{4, 100}}, {{1, 3}},
	}
	// The appends that the rule indexes, worked out by hand from the sizes.
	wantIndexed := []int{2, 4, 6, 8, 10, 12, 13, 15}
	var sizes []int
	var appends []rollAppend
	for i, p := range plan {
		var bs [][]byte
		for _, spec := range p {
			bs = append(bs, makeBatch(t, spec[0], spec[1], int64(100+i)))
		}
		a := rollLeader(t, l, bs...)
		sizes = append(sizes, int(a.size))
		appends = append(appends, a)
	}
	// The rule, restated from the appends' positions and sizes alone.
	var want []index.OffsetEntry
	since := 0
	pos := 0
	for i, a := range appends {
		if int(a.pos) != pos {
			t.Fatalf("append %d at position %d, want %d", i, a.pos, pos)
		}
		if i > 0 && since > interval {
			want = append(want, index.OffsetEntry{Offset: a.last, Position: int32(pos)})
			since = 0
		}
		since += sizes[i]
		pos += sizes[i]
	}
	var byHand []index.OffsetEntry
	for _, i := range wantIndexed {
		byHand = append(byHand, index.OffsetEntry{Offset: appends[i].last, Position: int32(appends[i].pos)})
	}
	if !slices.Equal(want, byHand) {
		t.Fatalf("the rule gives %v, the hand-worked list %v (append sizes %v)", want, byHand, sizes)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filenames.Path(dir, 0, filenames.Index))
	if err != nil {
		t.Fatal(err)
	}
	got, err := index.DecodeOffsetIndex(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf(".index entries\n got %v\nwant %v\n(append sizes %v)", got, want, sizes)
	}
	// The raw bytes too: relative offset, position, big-endian.
	for i, e := range want {
		if rel := binary.BigEndian.Uint32(b[8*i:]); int64(rel) != e.Offset || int32(binary.BigEndian.Uint32(b[8*i+4:])) != e.Position {
			t.Fatalf("entry %d bytes %x", i, b[8*i:8*i+8])
		}
	}
}

// TestIndexIntervalBytesZeroIndexesEveryAppend: index.interval.bytes =
// 0, which Kafka accepts, indexes every append but the first of a
// segment (Options take it as Zero; negative values are refused).
func TestIndexIntervalBytesZeroIndexesEveryAppend(t *testing.T) {
	opts := rollOpts(t)
	opts.IndexIntervalBytes = IndexEveryAppend
	l, dir := openTestLog(t, opts)
	var appends []rollAppend
	for i := 0; i < 5; i++ {
		appends = append(appends, rollLeader(t, l, makeBatch(t, 1, 10, int64(i))))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filenames.Path(dir, 0, filenames.Index))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4*8 {
		t.Fatalf(".index holds %d entries, want 4 (appends 2..5)", len(b)/8)
	}
	rollCheckSealed(t, dir, []int64{0}, appends, 0)
}
