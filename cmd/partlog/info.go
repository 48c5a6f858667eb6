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
}

func (o *infoOptions) addFlags(cmd *cobra.Command) {
	addIndexIntervalFlag(cmd, &o.indexInterval)
}

func (o *infoOptions) validate() error { return validateIndexInterval(o.indexInterval) }

func newInfoCommand(stdout, stderr io.Writer) *cobra.Command {
	var o infoOptions
	cmd := &cobra.Command{
		Use:   "info DIR...",
		Short: "Describe partition directories at a glance",
		Long: `info prints, for every partition directory (DIR as for verify), its
segments, log start and end offsets, recovery point, producer snapshots,
checkpoints, clean-shutdown marker, leader epochs, producers, barriers and
the problems recovery would find. It changes nothing (recovery runs in
dry-run mode).

` + recoveryReads + `

Exit status: 0 no problem (recovery may still list routine changes),
4 problems found, 8 operational error, 16 usage error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(args, stdout, stderr)
		},
	}
	o.addFlags(cmd)
	return cmd
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
			return
		}
		printInfo(stdout, t, res.rep, cur.snaps)
	})
	if code != exitOK {
		return &exitError{code: code}
	}
	return nil
}

// printInfo prints the description of one partition directory.
func printInfo(w io.Writer, t *partitionTarget, r *recovery.Report, snaps []snapshot.File) {
	fmt.Fprintf(w, "%s\n", t.dir)
	fmt.Fprintf(w, "  status: %s\n", r.Status)
	marker := "absent"
	if t.logDir.clean {
		marker = "present"
	}
	fmt.Fprintf(w, "  log directory: %s (clean-shutdown marker %s)\n", t.logDir.path, marker)
	fmt.Fprintf(w, "  checkpoints: %s: %s, %s: %s, %s: %s, %s: %s\n",
		checkpoint.RecoveryPointFile, checkpointEntry(t, t.logDir.hasRP, t.logDir.rps),
		checkpoint.LogStartOffsetFile, checkpointEntry(t, t.logDir.hasStart, t.logDir.starts),
		checkpoint.LeaderEpochFile, fileState(filepath.Join(t.dir, checkpoint.LeaderEpochFile)),
		checkpoint.PartitionMetadataFile, fileState(filepath.Join(t.dir, checkpoint.PartitionMetadataFile)))
	fmt.Fprintf(w, "  log start offset: %d, log end offset: %d, recovery point: %d\n",
		r.LogStartOffset, r.LogEndOffset, r.RecoveryPoint)
	fmt.Fprintf(w, "  segments: %d\n", len(r.Segments))
	for _, s := range r.Segments {
		printSegmentLine(w, t.dir, s)
	}
	if len(snaps) == 0 {
		fmt.Fprintf(w, "  snapshots: none\n")
	} else {
		offs := make([]int64, len(snaps))
		for i, s := range snaps {
			offs[i] = s.Offset
		}
		fmt.Fprintf(w, "  snapshots: %s\n", joinInts(offs))
	}
	if len(r.Epochs) > 0 {
		parts := make([]string, len(r.Epochs))
		for i, e := range r.Epochs {
			parts[i] = fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset)
		}
		fmt.Fprintf(w, "  leader epochs: %s\n", strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(w, "  leader epochs: none\n")
	}
	fmt.Fprintf(w, "  producers: %d, last stable offset: %d, %s\n", r.Producers, r.LastStableOffset, barriersText(r.Barriers))
	if t := r.Truncation; t != nil {
		fmt.Fprintf(w, "  cut: %s in segment %d at position %d, offset %d, %d bytes to remove: %s\n",
			t.Class, t.SegmentBaseOffset, t.Position, t.Offset, t.BytesRemoved, t.Reason)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n.Detail)
	}
	if len(r.Changes) > 0 {
		fmt.Fprintf(w, "  changes recovery would make: %d\n", len(r.Changes))
		for _, c := range r.Changes {
			fmt.Fprintf(w, "    %s\n", changeText(c))
		}
	}
	if len(r.Problems) == 0 {
		fmt.Fprintf(w, "  problems: none\n")
		return
	}
	fmt.Fprintf(w, "  problems: %d\n", len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "    %s %s: %s\n", p.Kind, problemPlace(p), p.Detail)
	}
}

// printSegmentLine prints one segment: base offset, size on disk (and
// after recovery when that differs), batches and offset range. The first
// offset is read from the first batch header; the last is known only for
// the segments recovery scanned.
func printSegmentLine(w io.Writer, dir string, s recovery.SegmentReport) {
	name := filenames.Make(s.BaseOffset, filenames.Log)
	var b strings.Builder
	fmt.Fprintf(&b, "    %s  base %d", name, s.BaseOffset)
	path := filepath.Join(dir, name)
	size := int64(-1)
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	switch {
	case size < 0:
		fmt.Fprintf(&b, "  size %d (not on disk yet)", s.SizeBytes)
	case size != s.SizeBytes:
		fmt.Fprintf(&b, "  size %d (%d after recovery)", size, s.SizeBytes)
	default:
		fmt.Fprintf(&b, "  size %d", size)
	}
	if s.Batches >= 0 {
		fmt.Fprintf(&b, "  batches %d", s.Batches)
	}
	first := firstOffset(path, s.SizeBytes)
	switch {
	case s.SizeBytes == 0:
		b.WriteString("  empty")
	case first >= 0 && s.LastOffset >= 0:
		fmt.Fprintf(&b, "  offsets %d..%d", first, s.LastOffset)
	case first >= 0:
		fmt.Fprintf(&b, "  first offset %d", first)
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
