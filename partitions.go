package partlog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/fsutil"
)

// TopicID is a topic's 128-bit id, as partition.metadata holds it.
type TopicID = checkpoint.TopicID

// ParseTopicID parses Kafka's text form of a topic id (22 characters of
// URL-safe base64).
func ParseTopicID(s string) (TopicID, error) { return checkpoint.ParseTopicID(s) }

// loadTopicID reads the partition's partition.metadata, if there is one,
// and checks it against Options.TopicID. A partition without the file
// takes Options.TopicID (written as Kafka does) when one is given.
func (l *Log) loadTopicID() error {
	path := filepath.Join(l.dir, checkpoint.PartitionMetadataFile)
	m, err := checkpoint.PartitionMetadata{}, error(fs.ErrNotExist)
	if l.listed(checkpoint.PartitionMetadataFile) {
		m, err = checkpoint.ReadPartitionMetadata(path)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if l.opts.TopicID.IsZero() {
			return nil
		}
		if err := checkpoint.WritePartitionMetadata(path, checkpoint.PartitionMetadata{TopicID: l.opts.TopicID}); err != nil {
			return err
		}
		l.topicID = l.opts.TopicID
		return nil
	case err != nil:
		return err
	}
	if !l.opts.TopicID.IsZero() && m.TopicID != l.opts.TopicID {
		return fmt.Errorf("%w: %s holds %s, expected %s", ErrInconsistentTopicID, path, m.TopicID, l.opts.TopicID)
	}
	l.topicID = m.TopicID
	return nil
}

// TopicID returns the topic id of the partition's partition.metadata
// (zero when the directory has none).
func (l *Log) TopicID() TopicID { return l.topicID }

// ErrUnknownPartition: Dir.Delete named a partition the directory does
// not serve.
var ErrUnknownPartition = errors.New("partlog: unknown partition")

// ErrInvalidTopic: a topic name Kafka would refuse (empty, longer than
// 249 characters, "." or "..", or a character outside [a-zA-Z0-9._-]),
// or __cluster_metadata, KRaft's metadata log, which Dir.Create refuses
// as Kafka refuses to create it.
var ErrInvalidTopic = errors.New("partlog: invalid topic name")

// checkTopicName applies Kafka's topic name rules.
func checkTopicName(topic string) error {
	if topic == "" || topic == "." || topic == ".." || len(topic) > 249 {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, topic)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q", ErrInvalidTopic, topic)
		}
	}
	return nil
}

// partitionOptions returns the Options a partition opens with: those of
// DirOptions.PartitionOptions, else the template (defaults are applied
// by Open, once).
func (d *Dir) partitionOptions(tp TopicPartition) Options {
	o := d.opts.Log
	if d.opts.PartitionOptions != nil {
		if p := d.opts.PartitionOptions(tp); p != nil {
			o = p
		}
	}
	if o == nil {
		return Options{}
	}
	return *o
}

// Create adds a partition to the log directory and opens it: the
// directory <topic>-<partition> with a first empty segment and Kafka's
// partition.metadata holding topicID (which must not be zero). opts are
// the partition's own settings (nil: DirOptions.PartitionOptions, else
// the template). A partition already served with the same topic id is
// returned as it is; with another id Create fails with
// ErrInconsistentTopicID, as it does when a directory of that name is on
// disk holding another id.
func (d *Dir) Create(topic string, partition int32, topicID TopicID, opts *Options) (*Log, error) {
	if err := checkTopicName(topic); err != nil {
		return nil, err
	}
	if topic == metadataTopic {
		// OpenDir leaves KRaft's metadata log alone: a partition made
		// here would not be served again.
		return nil, fmt.Errorf("%w: %s is KRaft's metadata log", ErrInvalidTopic, topic)
	}
	if partition < 0 {
		return nil, fmt.Errorf("%w: negative partition %d", ErrUnknownPartition, partition)
	}
	if topicID.IsZero() {
		return nil, fmt.Errorf("%w: zero topic id", ErrInconsistentTopicID)
	}
	tp := TopicPartition{Topic: topic, Partition: partition}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if d.readOnly != nil {
		return nil, d.readOnly
	}
	if l, ok := d.logs[tp]; ok {
		if l.TopicID() != topicID {
			return nil, fmt.Errorf("%w: %s has topic id %s, not %s", ErrInconsistentTopicID, tp, l.TopicID(), topicID)
		}
		return l, nil
	}
	var o Options
	if opts != nil {
		o = *opts
	} else {
		o = d.partitionOptions(tp)
	}
	o.TopicID = topicID
	o.CleanShutdown, o.RecoveryPoint, o.LogStartOffset, o.HighWatermark = false, 0, 0, 0
	l, err := Open(filepath.Join(d.path, tp.String()), &o)
	if err != nil {
		return nil, err
	}
	l.onTruncated = d.checkpointAfterTruncation
	if err := fsutil.SyncDir(d.path); err != nil {
		_ = l.Close()
		return nil, err
	}
	d.lmu.Lock()
	d.logs[tp] = l
	d.lmu.Unlock()
	// A partition that had failed to load is served now: its old
	// checkpoint entries no longer stand in for it.
	delete(d.unloaded, tp)
	return l, nil
}

// Delete removes a partition from the log directory as Kafka does: the
// Log is closed, its directory renamed <topic>-<partition>.<uuid>-delete
// (the topic shortened so the name fits 255 bytes) and removed in the
// background after the partition's FileDeleteDelayMs (at Dir.Close at the
// latest). The partition can be created again at once; nothing waits for
// the removal. The checkpoints are rewritten without it.
func (d *Dir) Delete(topic string, partition int32) error {
	return d.DeletePartitions([]TopicPartition{{Topic: topic, Partition: partition}})
}

// DeletePartitions deletes several partitions as Delete does one, with
// one directory sync and one checkpoint write for all: a topic of 10 000
// partitions is gone in a second, where a Delete per partition synced
// and rewrote the checkpoints 10 000 times (3.5 minutes). The logs are
// closed without a flush or snapshot: their files are being removed. A
// partition the directory does not serve is ErrUnknownPartition (joined
// with the other errors); the others are deleted.
func (d *Dir) DeletePartitions(tps []TopicPartition) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	var errs []error
	type removal struct {
		path  string
		delay int64
	}
	var renamed []removal
	for _, tp := range tps {
		l, ok := d.logs[tp]
		_, failed := d.unloaded[tp]
		if !ok && !failed {
			errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownPartition, tp))
			continue
		}
		po := d.partitionOptions(tp)
		from, delay := filepath.Join(d.path, tp.String()), po.withDefaults().FileDeleteDelayMs
		if ok {
			d.lmu.Lock()
			delete(d.logs, tp)
			d.lmu.Unlock()
			errs = append(errs, l.discard())
			from, delay = l.Dir(), l.opts.FileDeleteDelayMs
		}
		// A partition that failed to load is deleted the same way, and
		// its checkpoint entries go with it.
		delete(d.unloaded, tp)
		name, err := deleteDirName(tp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		to := filepath.Join(d.path, name)
		if err := os.Rename(from, to); err != nil {
			errs = append(errs, err)
			continue
		}
		renamed = append(renamed, removal{to, delay})
	}
	if len(renamed) == 0 {
		return errors.Join(errs...)
	}
	// The renames are durable before anything is removed: a crash never
	// leaves a partition directory half emptied under its own name.
	if err := fsutil.SyncDir(d.path); err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, d.checkpointLocked())
	for _, r := range renamed {
		errs = append(errs, d.deletions.add([]string{r.path}, r.delay))
	}
	return errors.Join(errs...)
}

// deleteDirName is Kafka's name for a partition directory scheduled for
// deletion: <topic>-<partition>.<32 hex digits>-delete, the topic cut so
// the whole fits 255 bytes.
func deleteDirName(tp TopicPartition) (string, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	suffix := "-" + strconv.FormatInt(int64(tp.Partition), 10) + "." + hex.EncodeToString(id[:]) + "-delete"
	topic := tp.Topic
	if n := 255 - len(suffix); len(topic) > n {
		topic = topic[:n]
	}
	return topic + suffix, nil
}
