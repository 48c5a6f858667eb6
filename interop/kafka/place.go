package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Placing a partition directory into a broker's log directory: Kafka
// loads a partition only if the topic exists in its metadata with the
// topic id the directory's partition.metadata names, so a test creates
// the topic on the broker (CreateTopic), stops it, and replaces the
// files of the partition directory Kafka made with its own
// (PlacePartition keeps Kafka's partition.metadata). The log-dir files
// that decide how Kafka loads the partition are set while the broker is
// stopped: the recovery point, log start and high-watermark checkpoints
// (SetCheckpoint) and the clean-shutdown marker (SetCleanShutdown).
// Without the marker Kafka recovers every segment from the one holding
// the partition's recovery point (0 when the checkpoint has no entry);
// with it, it trusts the segments.

// The log directory's checkpoint files (Kafka's names).
const (
	RecoveryPointCheckpoint = "recovery-point-offset-checkpoint"
	LogStartCheckpoint      = "log-start-offset-checkpoint"
	HighWatermarkCheckpoint = "replication-offset-checkpoint"
	CleanShutdownFile       = ".kafka_cleanshutdown"
)

// CreateTopic creates a topic on the running broker and waits until every
// partition has a leader.
func (b *Broker) CreateTopic(name string, partitions int32, configs map[string]string) error {
	cl := b.Client(b.t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		v := configs[k]
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", name, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		msg := ""
		if resp.Topics[0].ErrorMessage != nil {
			msg = *resp.Topics[0].ErrorMessage
		}
		return fmt.Errorf("creating topic %s: error %d %s", name, code, msg)
	}
	if _, err := b.WaitLeaders(name, partitions, 60*time.Second); err != nil {
		return err
	}
	// The broker makes the partition directories once it learns of its
	// leadership, after the metadata names it leader.
	deadline := time.Now().Add(60 * time.Second)
	for p := int32(0); p < partitions; p++ {
		for {
			if _, err := os.Stat(filepath.Join(b.PartitionDir(name, p), "partition.metadata")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("topic %s: partition %d has no directory after 60 s", name, p)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// PartitionLeader is a partition's leader and leader epoch as the broker's
// metadata says.
type PartitionLeader struct {
	Leader      int32
	LeaderEpoch int32
}

// WaitLeaders waits until every one of the topic's partitions has a
// leader and returns them by partition.
func (b *Broker) WaitLeaders(topic string, partitions int32, timeout time.Duration) (map[int32]PartitionLeader, error) {
	all := make([]int32, partitions)
	for i := range all {
		all[i] = int32(i)
	}
	return b.WaitPartitionLeaders(topic, all, timeout)
}

// WaitPartitionLeaders waits until each listed partition of the topic has
// a leader (others may have none: a partition of an offline log
// directory) and returns the listed ones' by partition.
func (b *Broker) WaitPartitionLeaders(topic string, partitions []int32, timeout time.Duration) (map[int32]PartitionLeader, error) {
	want := make(map[int32]bool, len(partitions))
	for _, p := range partitions {
		want[p] = true
	}
	cl := b.Client(b.t)
	deadline := time.Now().Add(timeout)
	var last string
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 {
			out := make(map[int32]PartitionLeader)
			for _, p := range resp.Topics[0].Partitions {
				if want[p.Partition] && p.ErrorCode == 0 && p.Leader >= 0 {
					out[p.Partition] = PartitionLeader{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch}
				}
			}
			if len(out) == len(want) {
				return out, nil
			}
			last = fmt.Sprintf("%d of %d partitions have a leader", len(out), len(want))
		} else if err != nil {
			last = err.Error()
		} else if len(resp.Topics) == 1 {
			last = fmt.Sprintf("error %d", resp.Topics[0].ErrorCode)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %s: no leader for every partition within %v: %s", topic, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ListOffsets returns the log start (earliest) and the latest offset of
// each listed partition of topic, as the running broker answers
// ListOffsets (read_uncommitted: the latest offset is the high
// watermark, the log end of a one-replica partition led here).
func (b *Broker) ListOffsets(topic string, partitions []int32) (start, latest map[int32]int64, err error) {
	cl := b.Client(b.t)
	start, latest = map[int32]int64{}, map[int32]int64{}
	for _, ts := range []int64{-2, -1} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, rerr := req.RequestWith(ctx, cl)
		cancel()
		if rerr != nil {
			return nil, nil, rerr
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return nil, nil, fmt.Errorf("ListOffsets %s-%d (%d): error %d", topic, p.Partition, ts, p.ErrorCode)
				}
				if ts == -2 {
					start[p.Partition] = p.Offset
				} else {
					latest[p.Partition] = p.Offset
				}
			}
		}
	}
	return start, latest, nil
}

// PlacePartition replaces the files of a partition directory Kafka made
// (topic-p in LogDir) with the files of src, keeping Kafka's
// partition.metadata (its topic id). Subdirectories of src are not
// copied. The broker must be stopped.
func (b *Broker) PlacePartition(topic string, p int32, src string) error {
	if b.Running() {
		return errors.New("PlacePartition needs the broker stopped")
	}
	dst := b.PartitionDir(topic, p)
	meta, err := os.ReadFile(filepath.Join(dst, "partition.metadata"))
	if err != nil {
		return fmt.Errorf("%s has no partition.metadata (create the topic first): %w", dst, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "partition.metadata" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dst, "partition.metadata"), meta, 0o644)
}

// TopicPartition names one partition in a checkpoint file.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ReadCheckpoint reads one of Kafka's offset checkpoint files (version 0:
// a version line, a count line, then "topic partition offset" lines). A
// missing file reads as empty.
func ReadCheckpoint(path string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan(); n++ {
		if n < 2 {
			continue
		}
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s line %d: %q", path, n+1, sc.Text())
		}
		p, err1 := strconv.ParseInt(fs[1], 10, 32)
		off, err2 := strconv.ParseInt(fs[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s line %d: %q", path, n+1, sc.Text())
		}
		out[TopicPartition{fs[0], int32(p)}] = off
	}
	return out, sc.Err()
}

// WriteCheckpoint writes an offset checkpoint file in Kafka's format,
// entries sorted.
func WriteCheckpoint(path string, entries map[TopicPartition]int64) error {
	keys := make([]TopicPartition, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s %d %d\n", k.Topic, k.Partition, entries[k])
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// SetCheckpoint sets (or, with ok false, removes) a partition's entry in
// one of the checkpoint files (RecoveryPointCheckpoint,
// LogStartCheckpoint, HighWatermarkCheckpoint) of the log directory that
// holds the partition. The broker must be stopped: a running one
// rewrites them.
func (b *Broker) SetCheckpoint(file, topic string, p int32, offset int64, ok bool) error {
	if b.Running() {
		return errors.New("SetCheckpoint needs the broker stopped")
	}
	path := filepath.Join(filepath.Dir(b.PartitionDir(topic, p)), file)
	m, err := ReadCheckpoint(path)
	if err != nil {
		return err
	}
	if ok {
		m[TopicPartition{topic, p}] = offset
	} else {
		delete(m, TopicPartition{topic, p})
	}
	return WriteCheckpoint(path, m)
}

// MovePartition moves a partition directory into another of the broker's
// log directories (logDir, one of LogDirs), as an operator moving disks
// would; its checkpoint entries stay behind, so its new log directory
// has none until SetCheckpoint. Kafka loads it from there and tells its
// controller. The broker must be stopped.
func (b *Broker) MovePartition(topic string, p int32, logDir string) error {
	if b.Running() {
		return errors.New("MovePartition needs the broker stopped")
	}
	from := b.PartitionDir(topic, p)
	to := filepath.Join(logDir, filepath.Base(from))
	if from == to {
		return nil
	}
	return os.Rename(from, to)
}

// SetCleanShutdown creates or removes the clean-shutdown marker of every
// log directory, which decides whether the next start recovers their
// partitions. The broker must be stopped.
func (b *Broker) SetCleanShutdown(clean bool) error {
	for _, d := range b.LogDirs {
		if err := b.SetCleanShutdownIn(d, clean); err != nil {
			return err
		}
	}
	return nil
}

// SetCleanShutdownIn creates or removes the clean-shutdown marker of one
// log directory (one of LogDirs). The broker must be stopped.
func (b *Broker) SetCleanShutdownIn(logDir string, clean bool) error {
	if b.Running() {
		return errors.New("SetCleanShutdown needs the broker stopped")
	}
	path := filepath.Join(logDir, CleanShutdownFile)
	if !clean {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	// Kafka 3.7+ writes {"version":0,"brokerEpoch":N}; an empty file
	// (what older versions wrote) is accepted as clean too.
	return os.WriteFile(path, nil, 0o644)
}
