package partlog

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/crashfs"
)

// pcPartition is what TestPowerCutDir's workload did to one partition,
// each step stamped with the file system's op count before it began
// (began) and after it returned (done): a cut before op k saw a step
// start when began < k and finish when done < k.
type pcPartition struct {
	tp       TopicPartition
	created  int64 // done of Create
	deleted  int64 // began of Delete (0: never)
	deletedD int64 // done of Delete
	// versions: every batch CRC appended at each base offset, ever.
	versions map[int64][]uint32
	// cur: the batches the log holds now (base -> CRC), in order.
	cur map[int64]uint32
	// acks: at done, every batch below upTo in cur then was durable.
	acks []pcAck
	// truncs and starts: truncations to, and log-start raises to, an
	// offset; starts also records retention's (done, when its segment
	// removal was made durable).
	truncs []pcEvent
	starts []pcEvent
}

type pcAck struct {
	done    int64
	batches map[int64]uint32
}

type pcEvent struct {
	began, done, at int64
	durable         bool // the removal of the segments below at is synced
}

// TestPowerCutDir: a log directory over crashfs with appends and Syncs on
// several partitions, rolls, retention (by bytes), follower truncations,
// log-start raises, checkpoints, partitions created and deleted, and a
// clean close. The image of every chosen cut opens with OpenDir (which
// recovers it) and holds, for each partition, only batches that were
// appended at their offsets, every batch a Sync acknowledged unless a
// truncation or retention that started before the cut removed it,
// nothing a completed retention deleted, the partitions whose Create
// returned and none whose Delete returned; after the final Close it
// opens clean with everything.
func TestPowerCutDir(t *testing.T) {
	runs, cuts := powerCutRuns()
	sweep := crashfs.NewSweep(t, cuts)
	sweep.Loop(runs, func(run int) { powerCutDirRun(t, sweep, run) })
	t.Logf("%d images checked", sweep.Done)
}

func powerCutDirOptions() *DirOptions {
	return &DirOptions{Log: &Options{SegmentBytes: 8 << 10, MaxIndexBytes: 4096, IndexIntervalBytes: 512,
		PrefaultBytes: -1, RetentionBytes: 24 << 10, FileDeleteDelayMs: 1}}
}

func powerCutDirRun(t *testing.T, sweep *crashfs.Sweep, run int) {
	m := crashfs.New(t)
	rng := sweep.Rand(uint64(run))
	root := filepath.Join(m.Dir(), "logs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	from, err := m.Settle()
	if err != nil {
		t.Fatal(err)
	}
	ops := func() int64 {
		n, err := m.Ops()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	d, err := OpenDir(root, powerCutDirOptions())
	if err != nil {
		t.Fatal(err)
	}
	var parts []*pcPartition
	logs := map[*pcPartition]*Log{}
	create := func(n int32) {
		p := &pcPartition{tp: TopicPartition{Topic: "t", Partition: n}, versions: map[int64][]uint32{}, cur: map[int64]uint32{}}
		l, err := d.Create("t", n, TopicID{byte(n + 1)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.created = ops()
		parts = append(parts, p)
		logs[p] = l
	}
	create(0)
	create(1)
	ts := time.Now().UnixMilli()
	for step := 0; step < 160; step++ {
		var live []*pcPartition
		for _, p := range parts {
			if p.deleted == 0 {
				live = append(live, p)
			}
		}
		p := live[rng.IntN(len(live))]
		l := logs[p]
		began := ops()
		switch r := rng.IntN(100); {
		case r < 50:
			ts++
			info, err := l.AppendAsLeader(makeBatch(t, 1+rng.IntN(4), 100+rng.IntN(400), ts), 0)
			if err != nil {
				t.Fatal(err)
			}
			rv, err := l.Read(info.FirstOffset, 1, info.LastOffset+1)
			if err != nil {
				t.Fatal(err)
			}
			crc := batch.View(rv.Records).CRC()
			rv.Release()
			p.versions[info.FirstOffset] = append(p.versions[info.FirstOffset], crc)
			p.cur[info.FirstOffset] = crc
		case r < 72:
			leo := l.LogEndOffset()
			if err := l.Sync(t.Context(), leo); err != nil {
				t.Fatal(err)
			}
			l.SetHighWatermark(leo)
			p.acks = append(p.acks, pcAck{done: ops(), batches: maps.Clone(p.cur)})
		case r < 78:
			n, err := l.DeleteOldSegments(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			start := l.LogStartOffset()
			p.starts = append(p.starts, pcEvent{began: began, done: ops(), at: start, durable: n > 0})
			dropBelow(p.cur, start)
		case r < 82:
			bases := slices.Sorted(maps.Keys(p.cur))
			if len(bases) < 2 {
				continue
			}
			to := bases[len(bases)/2+rng.IntN(len(bases)-len(bases)/2)]
			if err := l.TruncateTo(to); err != nil {
				t.Fatal(err)
			}
			p.truncs = append(p.truncs, pcEvent{began: began, done: ops(), at: to})
			for b := range p.cur {
				if b >= to {
					delete(p.cur, b)
				}
			}
		case r < 85:
			bases := slices.Sorted(maps.Keys(p.cur))
			if len(bases) < 3 {
				continue
			}
			start := bases[1+rng.IntN(len(bases)/2)]
			l.SetHighWatermark(l.LogEndOffset())
			if err := l.SetLogStartOffset(start); err != nil {
				t.Fatal(err)
			}
			p.starts = append(p.starts, pcEvent{began: began, done: ops(), at: start})
			dropBelow(p.cur, start)
		case r < 90:
			if err := d.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		case r < 94:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		case r < 97:
			if err := m.Writeback(); err != nil {
				t.Fatal(err)
			}
		case r < 98 && len(parts) < 4:
			create(int32(len(parts)))
		case r < 99 && len(live) > 1:
			p.deleted = began
			if err := d.Delete(p.tp.Topic, p.tp.Partition); err != nil {
				t.Fatal(err)
			}
			p.deletedD = ops()
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	closed := ops()
	for _, p := range parts {
		if p.deleted == 0 {
			p.acks = append(p.acks, pcAck{done: closed, batches: maps.Clone(p.cur)})
		}
	}
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
		d, err := OpenDir(filepath.Join(img, "logs"), powerCutDirOptions())
		if err != nil {
			t.Fatalf("OpenDir after the cut: %v", err)
		}
		defer func() {
			if err := d.Close(); err != nil {
				t.Errorf("close after the cut: %v", err)
			}
		}()
		for _, pr := range d.Problems() {
			if pr.Kind != "scheduled-for-deletion" {
				t.Errorf("OpenDir problem after the cut: %+v", pr)
			}
		}
		if im.Cut > closed && !d.CleanShutdown() {
			t.Errorf("the image after Close returned is not a clean shutdown")
		}
		for _, p := range parts {
			checkPowerCutPartition(t, d, p, im.Cut)
		}
	})
}

func dropBelow(cur map[int64]uint32, start int64) {
	for b := range cur {
		if b < start {
			delete(cur, b)
		}
	}
}

// checkPowerCutPartition checks one partition of an image cut before op
// cut against what the workload did (see TestPowerCutDir).
func checkPowerCutPartition(t *testing.T, d *Dir, p *pcPartition, cut int64) {
	t.Helper()
	l, ok := d.Log(p.tp)
	switch {
	case p.deleted != 0 && p.deletedD < cut:
		if ok {
			t.Errorf("%s: deleted (Delete returned before the cut) but loaded", p.tp)
		}
		return
	case p.created >= cut:
		return // its Create had not returned: either way
	case !ok:
		if p.deleted == 0 || p.deleted >= cut {
			t.Errorf("%s: created before the cut but not loaded", p.tp)
		}
		return
	}
	// What the image holds.
	start, leo := l.LogStartOffset(), l.LogEndOffset()
	have := map[int64]uint32{}
	err := crashScanTo(l, start, leo, 0, func(v batch.View) error {
		have[v.BaseOffset()] = v.CRC()
		return nil
	})
	if err != nil {
		t.Errorf("%s: reading [%d, %d): %v", p.tp, start, leo, err)
		return
	}
	maxStart := int64(0)
	for _, s := range p.starts {
		if s.began < cut {
			maxStart = max(maxStart, s.at)
		}
		if s.durable && s.done < cut && start < s.at {
			// The segments retention deleted below s.at are gone for good
			// once it returned; the log start may stay lower only inside
			// the first segment kept.
			if b := firstBase(have); b >= 0 && b < s.at && !inSegmentOf(l, b, s.at) {
				t.Errorf("%s: batch %d is back after retention deleted the segments below %d", p.tp, b, s.at)
			}
		}
	}
	if start > maxStart && start > 0 {
		t.Errorf("%s: log start %d above every log start set before the cut (%d)", p.tp, start, maxStart)
	}
	for b, crc := range have {
		if !slices.Contains(p.versions[b], crc) {
			t.Errorf("%s: batch at %d (crc %08x) was never appended there", p.tp, b, crc)
		}
	}
	var ack pcAck
	for _, a := range p.acks {
		if a.done < cut {
			ack = a
		}
	}
	for b, crc := range ack.batches {
		removed := b < start && maxStart > b
		for _, tr := range p.truncs {
			if tr.done > ack.done && tr.began < cut && tr.at <= b {
				removed = true
			}
		}
		for _, s := range p.starts {
			if s.done > ack.done && s.began < cut && s.at > b {
				removed = true
			}
		}
		if got, ok := have[b]; !ok && !removed {
			t.Errorf("%s: acknowledged batch at %d lost (log [%d, %d))", p.tp, b, start, leo)
		} else if ok && got != crc && !removed {
			t.Errorf("%s: acknowledged batch at %d changed (crc %08x, acknowledged %08x)", p.tp, b, got, crc)
		}
	}
}

func firstBase(have map[int64]uint32) int64 {
	if len(have) == 0 {
		return -1
	}
	return slices.Min(slices.Collect(maps.Keys(have)))
}

// inSegmentOf reports whether offsets a and b are in the same segment of
// l.
func inSegmentOf(l *Log, a, b int64) bool {
	segs := l.Segments()
	idx := func(o int64) int {
		i := len(segs) - 1
		for i > 0 && segs[i] > o {
			i--
		}
		return i
	}
	return idx(a) == idx(b)
}

// TestPowerCutTruncateLeavesNoHole: a truncation that removes several
// segments, over crashfs, cut at every op. Each image's log is contiguous
// from its start to its end, which lies between the truncation's target
// and the log end before it: a cut before the directory's fsync keeps
// some of the removals' renames, and with the oldest removed first the
// later segments stayed above a hole (the 1000-cut loop found it).
func TestPowerCutTruncateLeavesNoHole(t *testing.T) {
	cuts := 64
	if testing.Short() {
		cuts = 16
	}
	sweep := crashfs.NewSweep(t, cuts)
	defer func() { t.Logf("%d images checked", sweep.Done) }()
	sweep.Loop(1, func(run int) {
		m := crashfs.New(t)
		dir := filepath.Join(m.Dir(), "t-0")
		l, err := Open(dir, crashOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		b := makeBatch(t, 4, 8<<10, 1)
		for len(l.Segments()) < 5 {
			if _, err := l.AppendAsLeader(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		leo, target := l.LogEndOffset(), l.Segments()[1]+4
		from, err := m.Settle()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(target); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := m.History()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
			l, err := Open(filepath.Join(img, "t-0"), crashOptions(nil))
			if err != nil {
				t.Fatalf("open after the cut: %v", err)
			}
			defer l.Close()
			end := l.LogEndOffset()
			if end < target || end > leo {
				t.Errorf("log end %d after the cut, want one in [%d, %d]", end, target, leo)
			}
			if err := crashScan(l, l.LogStartOffset(), end, func(batch.View) error { return nil }); err != nil {
				t.Errorf("log [%d, %d) after the cut: %v", l.LogStartOffset(), end, err)
			}
		})
	})
}
