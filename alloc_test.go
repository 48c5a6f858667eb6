package partlog

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testutil"
)

// allocTestLog opens a log whose segment and indexes leave room for the
// appends of an AllocsPerRun (no roll, which allocates, in between).
func allocTestLog(t *testing.T) *Log {
	opts := smallOpts(t)
	opts.SegmentBytes = 64 << 20
	opts.MaxIndexBytes = 1 << 20
	l, _ := openTestLog(t, opts)
	return l
}

// TestAppendDoesNotAllocate guards the 0 allocs/op of the append path
// (leader and follower) once the leader epoch is known.
func TestAppendDoesNotAllocate(t *testing.T) {
	l := allocTestLog(t)
	src := makeBatch(t, 3, 100, 1700000000000)
	if _, err := l.AppendAsLeader(src, 1); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := l.AppendAsLeader(src, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendAsLeader allocates %v times per call", n)
	}
	follower := makeFollowerBatch(t, 0, 1, 3, 100, 1700000000000)
	v := batch.View(follower)
	if n := testing.AllocsPerRun(1000, func() {
		v.SetBaseOffset(l.LogEndOffset())
		if _, err := l.AppendAsFollower(follower); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendAsFollower allocates %v times per call", n)
	}
}

// TestReadDoesNotAllocate guards Read + Release on a warm pool.
func TestReadDoesNotAllocate(t *testing.T) {
	if testutil.Race {
		t.Skip("sync.Pool drops items under -race")
	}
	l, _ := openTestLog(t, smallOpts(t))
	for i := 0; i < 50; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	if n := testing.AllocsPerRun(1000, func() {
		v, err := l.Read(37, 4096, end)
		if err != nil || len(v.Records) == 0 {
			t.Fatal(err)
		}
		v.Release()
	}); n != 0 {
		t.Errorf("Read allocates %v times per call", n)
	}
}

// TestIdempotentAppendDoesNotAllocate guards 0 allocs/op for leader
// appends of idempotent producers: one batch of a known producer (the
// commit under its shard lock alone), and two batches of one producer in
// one append (the working copy).
func TestIdempotentAppendDoesNotAllocate(t *testing.T) {
	l := allocTestLog(t)
	const producers = 10
	seqs := make([]int32, producers)
	one := psData(t, 0, 0, 0, 2, false)
	set := func(b []byte, pid int64, seq int32) {
		binary.BigEndian.PutUint64(b[batch.OffProducerID:], uint64(pid))
		binary.BigEndian.PutUint32(b[batch.OffBaseSequence:], uint32(seq))
		binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.Checksum(b[batch.OffAttributes:]))
	}
	next := 0
	step := func() {
		pid := next % producers
		next++
		set(one, int64(pid), seqs[pid])
		if _, err := l.AppendAsLeader(one, 1); err != nil {
			t.Fatal(err)
		}
		seqs[pid] += 2
	}
	for range 2 * producers {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("idempotent AppendAsLeader allocates %v times per call", n)
	}
	two := append(append([]byte(nil), one...), one...)
	pair := func() {
		set(two[:len(one)], 3, seqs[3])
		set(two[len(one):], 3, seqs[3]+2)
		if _, err := l.AppendAsLeader(two, 1); err != nil {
			t.Fatal(err)
		}
		seqs[3] += 4
	}
	pair()
	if n := testing.AllocsPerRun(1000, pair); n != 0 {
		t.Errorf("AppendAsLeader of two batches of one producer allocates %v times per call", n)
	}
}

// TestSyncDoesNotAllocate guards 0 allocs per append+Sync of one writer:
// its groups are recycled, and a flush nobody waits for makes no channel.
func TestSyncDoesNotAllocate(t *testing.T) {
	l := allocTestLog(t)
	src := makeBatch(t, 1, 16<<10, 1)
	ctx := context.Background()
	step := func() {
		info, err := l.AppendAsLeader(src, 1)
		if err == nil {
			err = l.Sync(ctx, info.LastOffset+1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Errorf("AppendAsLeader+Sync of one writer allocates %v times per call", n)
	}
}
