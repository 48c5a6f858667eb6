package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/snapshot"
	"github.com/spf13/cobra"
)

// infoOptions are the flags of `partlog info`.
type infoOptions struct {
	indexInterval int64
	json          bool
}

func (o *infoOptions) addFlags(cmd *cobra.Command) {
	addIndexIntervalFlag(cmd, &o.indexInterval)
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per partition directory (schemaVersion 1): the same fields as the text")
}

func (o *infoOptions) validate() error { return validateIndexInterval(o.indexInterval) }

func newInfoCommand(stdout, stderr io.Writer) *cobra.Command {
	var o infoOptions
	return newDirCommand(&o, "info [--json] DIR...", "Describe partition directories at a glance", `info prints, for every partition directory (DIR as for verify), its
segments, log start and end offsets, recovery point, producer snapshots,
checkpoints, clean-shutdown marker, leader epochs, producers, barriers and
the problems recovery would find. It changes nothing (recovery runs in
dry-run mode). --json prints the same as one JSON object per partition
directory (schemaVersion 1; a directory that could not be read is
{"dir", "status": "error", "error"}).

`+recoveryReads+`

Exit status: 0 no problem (recovery may still list routine changes),
4 problems found, 8 operational error, 16 usage error.`, stdout, stderr)
}

func (o *infoOptions) run(dirs []string, stdout, stderr io.Writer) error {
	type extra struct {
		snaps []snapshot.File
		err   error
	}
	var cur extra
	code := forEachPartition(dirs, stderr, "info", func(t *partitionTarget) partitionResult {
		res := partitionResult{dryRun: true}
		opts := t.recoveryOptions(o.indexInterval)
		opts.DryRun = true
		res.rep, res.err = recovery.Run(t.dir, opts)
		cur = extra{}
		if res.err == nil {
			cur.snaps, cur.err = snapshot.List(t.dir)
			if cur.err != nil {
				res.err = cur.err
			}
		}
		return res
	}, func(t *partitionTarget, res *partitionResult) {
		if res.err != nil {
			fmt.Fprintln(stderr, errLine(t.dir, res.err))
			if o.json {
				writeJSONLine(stdout, errorJSON{SchemaVersion: reportSchemaVersion, Dir: t.dir, Status: "error", Error: res.err.Error()})
			}
			return
		}
		m := newInfoModel(t, res.rep, cur.snaps)
		if o.json {
			writeJSONLine(stdout, m)
			return
		}
		m.printText(stdout)
	})
	return exitWith(code)
}

// infoModel is what info says of one partition directory; the text and
// the JSON are its two renderings.
type infoModel struct {
	SchemaVersion int    `json:"schemaVersion"`
	Dir           string `json:"dir"`
	Status        string `json:"status"`
	LogDir        string `json:"logDir"`
	CleanShutdown bool   `json:"cleanShutdownMarker"`
	// Checkpoints: the partition's entry in the log directory's
	// checkpoints (an offset, "absent", "malformed" or "no entry") and
	// whether its own files are there.
	Checkpoints struct {
		RecoveryPoint     string `json:"recoveryPoint"`
		LogStartOffset    string `json:"logStartOffset"`
		LeaderEpoch       string `json:"leaderEpochCheckpoint"`
		PartitionMetadata string `json:"partitionMetadata"`
	} `json:"checkpoints"`
	LogStartOffset   int64                  `json:"logStartOffset"`
	LogEndOffset     int64                  `json:"logEndOffset"`
	RecoveryPoint    int64                  `json:"recoveryPoint"`
	Segments         []infoSegment          `json:"segments"`
	Snapshots        []int64                `json:"snapshots"`
	LeaderEpochs     []recovery.EpochReport `json:"leaderEpochs"`
	Producers        int                    `json:"producers"`
	LastStableOffset int64                  `json:"lastStableOffset"`
	Barriers         []int64                `json:"barriers"`
	Truncation       *recovery.Truncation   `json:"truncation"`
	Notes            []recovery.Problem     `json:"notes"`
	Changes          []recovery.Change      `json:"changes"`
	Problems         []recovery.Problem     `json:"problems"`
}

// infoSegment is one segment: its file, size now and after recovery,
// batches (-1: not scanned) and offsets (-1: unknown).
type infoSegment struct {
	File        string `json:"file"`
	BaseOffset  int64  `json:"baseOffset"`
	Size        int64  `json:"size"` // -1: not on disk yet
	SizeAfter   int64  `json:"sizeAfterRecovery"`
	Batches     int    `json:"batches"`
	FirstOffset int64  `json:"firstOffset"`
	LastOffset  int64  `json:"lastOffset"`
}

func newInfoModel(t *partitionTarget, r *recovery.Report, snaps []snapshot.File) *infoModel {
	m := &infoModel{SchemaVersion: reportSchemaVersion, Dir: t.dir, Status: r.Status, LogDir: t.logDir.path, CleanShutdown: t.logDir.clean,
		LogStartOffset: r.LogStartOffset, LogEndOffset: r.LogEndOffset, RecoveryPoint: r.RecoveryPoint,
		Snapshots: []int64{}, LeaderEpochs: nonNil(r.Epochs), Producers: r.Producers, LastStableOffset: r.LastStableOffset,
		Barriers: nonNil(r.Barriers), Truncation: r.Truncation, Notes: nonNil(r.Notes), Changes: nonNil(r.Changes), Problems: nonNil(r.Problems)}
	m.Checkpoints.RecoveryPoint = checkpointEntry(t, t.logDir.hasRP, t.logDir.rps)
	m.Checkpoints.LogStartOffset = checkpointEntry(t, t.logDir.hasStart, t.logDir.starts)
	m.Checkpoints.LeaderEpoch = fileState(filepath.Join(t.dir, checkpoint.LeaderEpochFile))
	m.Checkpoints.PartitionMetadata = fileState(filepath.Join(t.dir, checkpoint.PartitionMetadataFile))
	m.Segments = make([]infoSegment, 0, len(r.Segments))
	for _, s := range r.Segments {
		name := filenames.Make(s.BaseOffset, filenames.Log)
		path := filepath.Join(t.dir, name)
		size := int64(-1)
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
		m.Segments = append(m.Segments, infoSegment{File: name, BaseOffset: s.BaseOffset, Size: size, SizeAfter: s.SizeBytes,
			Batches: s.Batches, FirstOffset: firstOffset(path, s.SizeBytes), LastOffset: s.LastOffset})
	}
	for _, s := range snaps {
		m.Snapshots = append(m.Snapshots, s.Offset)
	}
	return m
}

// printText prints the description of one partition directory.
func (m *infoModel) printText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", m.Dir)
	fmt.Fprintf(w, "  status: %s\n", m.Status)
	marker := "absent"
	if m.CleanShutdown {
		marker = "present"
	}
	fmt.Fprintf(w, "  log directory: %s (clean-shutdown marker %s)\n", m.LogDir, marker)
	fmt.Fprintf(w, "  checkpoints: %s: %s, %s: %s, %s: %s, %s: %s\n",
		checkpoint.RecoveryPointFile, m.Checkpoints.RecoveryPoint,
		checkpoint.LogStartOffsetFile, m.Checkpoints.LogStartOffset,
		checkpoint.LeaderEpochFile, m.Checkpoints.LeaderEpoch,
		checkpoint.PartitionMetadataFile, m.Checkpoints.PartitionMetadata)
	fmt.Fprintf(w, "  log start offset: %d, log end offset: %d, recovery point: %d\n",
		m.LogStartOffset, m.LogEndOffset, m.RecoveryPoint)
	fmt.Fprintf(w, "  segments: %d\n", len(m.Segments))
	for _, s := range m.Segments {
		s.printText(w)
	}
	if len(m.Snapshots) == 0 {
		fmt.Fprintf(w, "  snapshots: none\n")
	} else {
		fmt.Fprintf(w, "  snapshots: %s\n", joinInts(m.Snapshots))
	}
	if len(m.LeaderEpochs) > 0 {
		parts := make([]string, len(m.LeaderEpochs))
		for i, e := range m.LeaderEpochs {
			parts[i] = fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset)
		}
		fmt.Fprintf(w, "  leader epochs: %s\n", strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(w, "  leader epochs: none\n")
	}
	fmt.Fprintf(w, "  producers: %d, last stable offset: %d, %s\n", m.Producers, m.LastStableOffset, barriersText(m.Barriers))
	if t := m.Truncation; t != nil {
		fmt.Fprintf(w, "  cut: %s in segment %d at position %d, offset %d, %d bytes to remove: %s\n",
			t.Class, t.SegmentBaseOffset, t.Position, t.Offset, t.BytesRemoved, t.Reason)
	}
	for _, n := range m.Notes {
		fmt.Fprintf(w, "  note: %s\n", n.Detail)
	}
	if len(m.Changes) > 0 {
		fmt.Fprintf(w, "  changes recovery would make: %d\n", len(m.Changes))
		for _, c := range m.Changes {
			fmt.Fprintf(w, "    %s\n", changeText(c))
		}
	}
	if len(m.Problems) == 0 {
		fmt.Fprintf(w, "  problems: none\n")
		return
	}
	fmt.Fprintf(w, "  problems: %d\n", len(m.Problems))
	for _, p := range m.Problems {
		fmt.Fprintf(w, "    %s %s: %s\n", p.Kind, problemPlace(p), p.Detail)
	}
}

// printText prints one segment: base offset, size on disk (and after
// recovery when that differs), batches and offset range. The first
// offset is read from the first batch header; the last is known only for
// the segments recovery scanned.
func (s infoSegment) printText(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "    %s  base %d", s.File, s.BaseOffset)
	switch {
	case s.Size < 0:
		fmt.Fprintf(&b, "  size %d (not on disk yet)", s.SizeAfter)
	case s.Size != s.SizeAfter:
		fmt.Fprintf(&b, "  size %d (%d after recovery)", s.Size, s.SizeAfter)
	default:
		fmt.Fprintf(&b, "  size %d", s.Size)
	}
	if s.Batches >= 0 {
		fmt.Fprintf(&b, "  batches %d", s.Batches)
	}
	switch {
	case s.SizeAfter == 0:
		b.WriteString("  empty")
	case s.FirstOffset >= 0 && s.LastOffset >= 0:
		fmt.Fprintf(&b, "  offsets %d..%d", s.FirstOffset, s.LastOffset)
	case s.FirstOffset >= 0:
		fmt.Fprintf(&b, "  first offset %d", s.FirstOffset)
	}
	fmt.Fprintln(w, b.String())
}

// firstOffset reads the base offset of the first batch of a .log, or
// returns -1 when it cannot.
func firstOffset(path string, size int64) int64 {
	if size < batch.LogOverhead {
		return -1
	}
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	var hdr [8]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return -1
	}
	return int64(binary.BigEndian.Uint64(hdr[:]))
}

// checkpointEntry describes a log-directory checkpoint for one partition.
// A malformed one was reported when read and counts as missing.
func checkpointEntry(t *partitionTarget, present bool, m map[partlog.TopicPartition]int64) string {
	if !present {
		return "absent"
	}
	if m == nil {
		return "malformed"
	}
	if v, ok := m[t.tp]; ok && t.tpOK {
		return strconv.FormatInt(v, 10)
	}
	return "no entry"
}

// fileState says whether a file exists.
func fileState(path string) string {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return "present"
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	}
	return "unreadable (" + err.Error() + ")"
}
