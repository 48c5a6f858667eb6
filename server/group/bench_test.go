package group

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/fsutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fill commits parts offsets in each of groups groups.
func fill(b *testing.B, c *Coordinator, groups, parts int) {
	for g := range groups {
		r := commitReq(9, fmt.Sprintf("group-%d", g), "", -1, nil)
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		for p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(p), int64(p)*1000
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		c.handleOffsetCommit(r)
	}
}

var stateSizes = []struct{ groups, parts int }{{1, 10}, {10, 100}, {100, 100}}

// BenchmarkOffsetCommit measures one OffsetCommit of one partition with
// the state of the given size (every commit rewrites the whole file),
// beside the two alternatives' floor in the same run: an atomic replace
// of a 100-byte file (the same two fsyncs) and an append of one record
// to a log with one fsync.
func BenchmarkOffsetCommit(b *testing.B) {
	for _, sz := range stateSizes {
		b.Run(fmt.Sprintf("groups=%d/partitions=%d", sz.groups, sz.parts), func(b *testing.B) {
			c, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			fill(b, c, sz.groups, sz.parts)
			req := commitReq(9, "group-0", "", -1, map[string]map[int32]int64{"orders": {3: 1}})
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				req.Topics[0].Partitions[0].Offset = int64(i)
				if resp := c.handleOffsetCommit(req); resp.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Fatal(resp.Topics[0].Partitions[0].ErrorCode)
				}
			}
			c.mu.Lock()
			b.ReportMetric(float64(len(c.encodeLocked())), "file-bytes")
			c.mu.Unlock()
		})
	}
	b.Run("floor=atomic-replace-100B", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "f")
		data := make([]byte, 100)
		for b.Loop() {
			if err := fsutil.WriteFileAtomic(path, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor=append-fsync-64B", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		rec := make([]byte, 64)
		for b.Loop() {
			if _, err := f.Write(rec); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncodeState measures encoding the state alone.
func BenchmarkEncodeState(b *testing.B) {
	for _, sz := range stateSizes {
		b.Run(fmt.Sprintf("groups=%d/partitions=%d", sz.groups, sz.parts), func(b *testing.B) {
			c, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			fill(b, c, sz.groups, sz.parts)
			c.mu.Lock()
			defer c.mu.Unlock()
			for b.Loop() {
				c.encodeLocked()
			}
		})
	}
}
