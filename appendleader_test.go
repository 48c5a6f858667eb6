package partlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// leaderStep is one AppendAsLeader of a sequence.
type leaderStep struct {
	records []byte
	epoch   int32
}

// TestAppendLeaderMatchesGeneral runs each sequence of leader appends on
// two logs with the same options: one through AppendAsLeader (its one-
// function path for the usual request, appendLeader) and one through the
// general path only (appendAssigned). Every append returns the same info
// and error, and the logs end with the same offsets, segments, files,
// leader epochs and producers. The sequences cover what appendLeader
// takes and each thing it leaves to the general path: several batches, a
// rule or CRC failure, producer-state refusals, a new or stale epoch,
// rolls by size and time, index entries, record timestamps outside the
// window, header max timestamps not the records', the LogAppendTime
// rules, the pwrite path.
func TestAppendLeaderMatchesGeneral(t *testing.T) {
	plain := func(n, size int, ts int64) []byte { return makeBatch(t, n, size, ts) }
	idem := func(pid int64, seq int32, n int) []byte { return psData(t, pid, 0, seq, n, false) }
	many := func(k int, f func(i int) leaderStep) []leaderStep {
		out := make([]leaderStep, k)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	clock := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	type tcase struct {
		name  string
		opts  func(o *Options)
		steps []leaderStep
	}
	cases := []tcase{
		{"plain batches across index entries and size rolls", nil, many(300, func(i int) leaderStep {
			return leaderStep{plain(1+i%4, 30+(i*53)%700, 1_700_000_000_000+int64(i)), 1}
		})},
		{"two batches in one append", nil, []leaderStep{
			{plain(1, 10, 1), 1}, {append(plain(2, 10, 5), plain(1, 10, 9)...), 1}, {plain(1, 10, 11), 1}}},
		{"CRC, control, count, base offset and size refusals", func(o *Options) { o.MaxBatchBytes = 2000 }, []leaderStep{
			{plain(1, 10, 1), 1},
			{func() []byte { b := plain(1, 10, 1); b[len(b)-1] ^= 1; return b }(), 1},
			{edited(plain(1, 10, 1), func(v batch.View) {
				binary.BigEndian.PutUint16(v[batch.OffAttributes:], uint16(batch.AttrControl))
			}), 1},
			{edited(plain(2, 10, 1), func(v batch.View) { binary.BigEndian.PutUint32(v[batch.OffLastOffsetDelta:], 2) }), 1},
			{edited(plain(1, 10, 1), func(v batch.View) { v.SetBaseOffset(5) }), 1},
			{plain(1, 3000, 1), 1},
			{plain(1, 10, 1)[:40], 1},
			{nil, 1},
			{plain(1, 10, 2), 1}}},
		{"idempotent producers: in order, duplicate, gap, new producer", nil, []leaderStep{
			{idem(5, 0, 2), 1}, {idem(5, 2, 1), 1}, {idem(5, 0, 2), 1}, {idem(5, 7, 1), 1},
			{idem(6, 0, 1), 1}, {plain(1, 10, 3), 1}, {idem(5, 3, 3), 1}, {idem(5, 3, 3), 1}}},
		{"transactional batch", nil, []leaderStep{{psData(t, 9, 0, 0, 2, true), 1}, {psData(t, 9, 0, 2, 1, true), 1}}},
		{"new and stale leader epochs", nil, []leaderStep{
			{plain(1, 10, 1), 1}, {plain(1, 10, 2), 3}, {plain(1, 10, 3), 3}, {plain(1, 10, 4), 2}, {plain(1, 10, 5), 3}}},
		{"time roll by timestamps", func(o *Options) { o.SegmentMs = 1000 }, many(40, func(i int) leaderStep {
			return leaderStep{plain(1, 10, 1_700_000_000_000+int64(i)*100), 1}
		})},
		{"time roll by the clock (no timestamps)", func(o *Options) { o.SegmentMs = 1000 }, many(10, func(i int) leaderStep {
			return leaderStep{plain(1, 10, batch.NoTimestamp), 1}
		})},
		{"timestamp window", func(o *Options) { o.MessageTimestampAfterMaxMs = 3_600_000 }, []leaderStep{
			{plain(1, 10, 1), 1}, {plain(2, 10, 2), 1},
			// The header is in the window, the second record two hours ahead.
			{headerMax(plain(2, 10, clock.UnixMilli()+2*3_600_000-1), clock.UnixMilli()), 1},
			{plain(1, 10, 3), 1}}},
		{"max timestamp from the records", nil, []leaderStep{
			{headerMax(plain(3, 10, 1000), 1000), 1}, {headerMax(plain(2, 10, 2000), 9999), 1},
			{plain(1, 10, 3000), 1},
			{edited(plain(1, 10, 4000), func(v batch.View) {
				binary.BigEndian.PutUint16(v[batch.OffAttributes:], uint16(batch.AttrTimestampType))
			}), 1},
			{append(plain(1, 10, 5000), headerMax(plain(2, 10, 6000), 1)...), 1}}},
		{"LogAppendTime", func(o *Options) { o.MessageTimestampType = LogAppendTime }, []leaderStep{
			{plain(1, 10, 1), 1}, {plain(2, 10, 2), 1}}},
		{"pwrite path", func(o *Options) { o.WritePath = WritePwrite }, many(20, func(i int) leaderStep {
			return leaderStep{plain(1, 100, int64(i)), 1}
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs [2]*Log
			var dirs [2]string
			for k := range logs {
				o := smallOpts(t)
				o.SegmentBytes = 16 << 10
				o.Now = func() time.Time { return clock }
				if tc.opts != nil {
					tc.opts(o)
				}
				logs[k], dirs[k] = openTestLog(t, o)
			}
			for i, st := range tc.steps {
				clock = clock.Add(300 * time.Millisecond)
				var infos [2]AppendInfo
				var errs [2]error
				infos[0], errs[0] = logs[0].AppendAsLeader(bytes.Clone(st.records), st.epoch)
				errs[1] = logs[1].appendAssigned(bytes.Clone(st.records), st.epoch, OriginClient, &infos[1])
				if infos[0] != infos[1] || fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) || reflect.TypeOf(errs[0]) != reflect.TypeOf(errs[1]) {
					t.Fatalf("append %d: leader path %+v, %v; general path %+v, %v", i, infos[0], errs[0], infos[1], errs[1])
				}
			}
			a, b := logs[0], logs[1]
			if a.LogEndOffset() != b.LogEndOffset() || !slices.Equal(a.Segments(), b.Segments()) ||
				!slices.Equal(a.LeaderEpochs(), b.LeaderEpochs()) || !reflect.DeepEqual(a.Producers(), b.Producers()) {
				t.Fatalf("logs differ: end %d / %d, segments %v / %v", a.LogEndOffset(), b.LogEndOffset(), a.Segments(), b.Segments())
			}
			for k := range logs {
				if err := logs[k].Close(); err != nil {
					t.Fatal(err)
				}
			}
			names, err := os.ReadDir(dirs[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range names {
				if filepath.Ext(e.Name()) == filenames.Snapshot {
					continue // holds no time, but compared through Producers above
				}
				x, errA := os.ReadFile(filepath.Join(dirs[0], e.Name()))
				y, errB := os.ReadFile(filepath.Join(dirs[1], e.Name()))
				if errA != nil || errB != nil || !bytes.Equal(x, y) {
					t.Fatalf("%s differs (%d and %d bytes; %v, %v)", e.Name(), len(x), len(y), errA, errB)
				}
			}
		})
	}
}
