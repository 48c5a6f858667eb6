package recovery

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
)

// flipCRC breaks the CRC of the batch at pos of segment base.
func flipCRC(t testing.TB, dir string, base, pos int64) {
	t.Helper()
	patch(t, segPath(dir, base, filenames.Log), func(b []byte) []byte {
		b[pos+batch.OffCRC] ^= 0xff
		return b
	})
}

// expectProblemAt checks that a problem names file at exactly pos.
func expectProblemAt(t testing.TB, r *Report, file string, pos int64) {
	t.Helper()
	if !slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.File == file && p.Position == pos }) {
		t.Errorf("no problem at %s@%d: %+v", file, pos, r.Problems)
	}
}

// TestFlushedDamageInRecoveryPointSegment: damage below the recovery
// point, in the segment that holds the recovery point, is corrupt-flushed
// (the walk locating the recovery point's position used to stop at the
// damage, which made it corrupt-unflushed and cut durable batches). The
// library cuts as Kafka does; RefuseFlushedCut changes nothing.
func TestFlushedDamageInRecoveryPointSegment(t *testing.T) {
	for _, c := range []struct {
		name    string
		rp      int64
		segBase int64
		offset  int64 // the damaged batch holds it
	}{
		{"rp-inside-segment", 590, 300, 350},
		// The recovery point at the log end: no batch holds it; the
		// position is the end of the batches found past the damage.
		{"rp-at-log-end", 750, 600, 610},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fixture(t)
			bad := batchAt(t, dir, c.segBase, c.offset)
			flipCRC(t, dir, c.segBase, bad.pos)
			logName := filenames.Make(c.segBase, filenames.Log)

			o := unclean(c.rp)
			o.DryRun = true
			dr := mustRun(t, dir, o)
			if dr.Truncation == nil || dr.Truncation.Class != ClassCorruptFlushed || dr.Truncation.Position != bad.pos {
				t.Fatalf("truncation %+v, want corrupt-flushed at %d", dr.Truncation, bad.pos)
			}
			expectProblemAt(t, dr, logName, bad.pos)
			expectStatus(t, dr, StatusProblems)
			checkVerdict(t, dr, true)

			before := testutil.HashTree(t, dir)
			o = unclean(c.rp)
			o.RefuseFlushedCut = true
			o.Quarantine = filepath.Join(t.TempDir(), "q")
			rr := mustRun(t, dir, o)
			if d := diffHashes(before, testutil.HashTree(t, dir)); len(d) > 0 {
				t.Fatalf("a refused repair changed %v", d)
			}
			if rr.Refused == "" || rr.Status != StatusProblems || len(rr.Changes) != 0 || !hasProblem(rr, kindRefused) {
				t.Fatalf("refused %q status %s changes %+v problems %+v", rr.Refused, rr.Status, rr.Changes, rr.Problems)
			}
			if _, err := os.Stat(o.Quarantine); err == nil {
				t.Error("a refused repair created the quarantine")
			}

			// Without RefuseFlushedCut, Kafka's outcome: cut there.
			r := mustRun(t, dir, unclean(c.rp))
			if r.Truncation == nil || r.Truncation.Class != ClassCorruptFlushed || r.LogEndOffset != bad.base {
				t.Fatalf("truncation %+v LEO %d, want corrupt-flushed, LEO %d", r.Truncation, r.LogEndOffset, bad.base)
			}
			expectProblemAt(t, r, logName, bad.pos)
		})
	}
}

// TestUnflushedDamageStaysUnflushed: damage in the recovery point's own
// page or above it keeps its unflushed class.
func TestUnflushedDamageStaysUnflushed(t *testing.T) {
	dir := fixture(t)
	bad := batchAt(t, dir, 600, 700)
	flipCRC(t, dir, 600, bad.pos)
	o := unclean(650)
	o.DryRun = true
	r := mustRun(t, dir, o)
	if r.Truncation == nil || r.Truncation.Class != ClassCorruptUnflushed || r.Truncation.Position != bad.pos {
		t.Fatalf("truncation %+v, want corrupt-unflushed at %d", r.Truncation, bad.pos)
	}
	expectProblemAt(t, r, filenames.Make(600, filenames.Log), bad.pos)
}

// TestEveryProblemAtItsPosition: the cause of every cut of the damage
// cases is a problem at the cut's exact position (checkVerdict, run by
// TestCases too), and a torn tail is not left out.
func TestEveryProblemAtItsPosition(t *testing.T) {
	dir := fixture(t)
	last := batchAt(t, dir, 600, 740)
	if err := os.Truncate(segPath(dir, 600, filenames.Log), last.pos+30); err != nil {
		t.Fatal(err)
	}
	o := unclean(600)
	o.DryRun = true
	r := mustRun(t, dir, o)
	if r.Truncation == nil || r.Truncation.Class != ClassTornTail {
		t.Fatalf("truncation %+v", r.Truncation)
	}
	expectProblemAt(t, r, filenames.Make(600, filenames.Log), last.pos)
	checkVerdict(t, r, true)
}

// TestCorruptSnapshotFound: a snapshot no replay needs is read all the
// same; a bad CRC is a problem, and the repair quarantines the file.
func TestCorruptSnapshotFound(t *testing.T) {
	dir := fixture(t)
	name := filenames.Make(300, filenames.Snapshot)
	patch(t, filepath.Join(dir, name), func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
	o := clean()
	o.DryRun = true
	if r := mustRun(t, dir, o); len(r.Problems) != 0 {
		t.Fatalf("without CheckSnapshots the unused snapshot was read: %+v", r.Problems)
	}
	o.CheckSnapshots = true
	dr := mustRun(t, dir, o)
	if !slices.ContainsFunc(dr.Problems, func(p Problem) bool { return p.File == name && p.Kind == kindSnapshot }) {
		t.Fatalf("no snapshot problem for %s: %+v", name, dr.Problems)
	}
	expectStatus(t, dr, StatusProblems)

	o = clean()
	o.Quarantine = filepath.Join(t.TempDir(), "q")
	o.CheckSnapshots = true
	r := mustRun(t, dir, o)
	if exists(dir, name) {
		t.Error("corrupt snapshot left in place")
	}
	i := slices.IndexFunc(r.Changes, func(c Change) bool { return c.File == name && c.Action == ActionRemove })
	if i < 0 || r.Changes[i].Saved == "" {
		t.Fatalf("changes %+v", r.Changes)
	}
	if _, err := os.Stat(filepath.Join(o.Quarantine, r.Changes[i].Saved)); err != nil {
		t.Error(err)
	}
	expectStatus(t, r, StatusRepaired)
}

// TestHealthyVerdicts: directories Kafka loads without losing or changing
// data get status ok under DryRun, with the routine steps of Kafka's load
// listed as changes only; the repair makes exactly those changes, keeps
// the old bytes, and a second repair changes nothing.
func TestHealthyVerdicts(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    Options
		setup   func(t testing.TB, dir string)
		changes []string // kinds
		notes   []string
	}{
		{name: "clean", opts: clean()},
		{name: "unclean-below-rp", opts: unclean(600)},
		{name: "no-recovery-point", opts: unclean(-1), notes: []string{kindFullRecovery}},
		{name: "no-recovery-point-no-snapshot", opts: unclean(-1), setup: func(t testing.TB, dir string) {
			for _, off := range []int64{300, 600, 750} {
				_ = os.Remove(filepath.Join(dir, filenames.Make(off, filenames.Snapshot)))
			}
		}, changes: []string{kindProducerSnapshot}, notes: []string{kindFullRecovery}},
		{name: "empty-partition-epoch-0-0", opts: unclean(0), setup: func(t testing.TB, dir string) {
			emptyDir(t, dir)
			for _, k := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
				if err := os.WriteFile(segPath(dir, 0, k), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			writeEpochs(t, dir, []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}})
		}, changes: []string{kindEpochs}},
		{name: "empty-partition-without-indexes", opts: clean(), setup: func(t testing.TB, dir string) {
			emptyDir(t, dir)
			if err := os.WriteFile(segPath(dir, 0, filenames.Log), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			writeEpochs(t, dir, []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}})
		}, changes: []string{kindIndex, kindEpochs}},
		{name: "missing-active-indexes", opts: unclean(600), setup: func(t testing.TB, dir string) {
			_ = os.Remove(segPath(dir, 600, filenames.Index))
			_ = os.Remove(segPath(dir, 600, filenames.TimeIndex))
		}, changes: []string{kindIndex}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fixture(t)
			if c.setup != nil {
				c.setup(t, dir)
			}
			before := testutil.HashTree(t, dir)
			dry := c.opts
			dry.DryRun = true
			dr := mustRun(t, dir, dry)
			if len(dr.Problems) != 0 || dr.Status != StatusOK {
				t.Fatalf("status %s problems %+v", dr.Status, dr.Problems)
			}
			var kinds, notes []string
			for _, ch := range dr.Changes {
				if !slices.Contains(kinds, ch.Kind) {
					kinds = append(kinds, ch.Kind)
				}
			}
			for _, n := range dr.Notes {
				notes = append(notes, n.Kind)
			}
			slices.Sort(kinds)
			want := slices.Sorted(slices.Values(c.changes))
			if !slices.Equal(kinds, want) {
				t.Errorf("change kinds %v, want %v (%+v)", kinds, want, dr.Changes)
			}
			if !slices.Equal(notes, c.notes) {
				t.Errorf("notes %+v, want %v", dr.Notes, c.notes)
			}
			if d := diffHashes(before, testutil.HashTree(t, dir)); len(d) > 0 {
				t.Fatalf("DryRun changed %v", d)
			}

			o := c.opts
			o.Quarantine = filepath.Join(t.TempDir(), "q")
			r := mustRun(t, dir, o)
			if !slices.Equal(changeKeys(dr), changeKeys(r)) {
				t.Errorf("DryRun listed %v, the repair made %v", changeKeys(dr), changeKeys(r))
			}
			checkChangesKept(t, before, dir, o.Quarantine, r)

			mid := testutil.HashTree(t, dir)
			o2 := c.opts
			o2.Clean, o2.RecoveryPoint = false, r.RecoveryPoint
			o2.Quarantine = filepath.Join(t.TempDir(), "q2")
			r2 := mustRun(t, dir, o2)
			if d := diffHashes(mid, testutil.HashTree(t, dir)); len(d) > 0 || len(r2.Changes) > 0 || r2.Status != StatusOK {
				t.Errorf("second repair changed %v: %+v, status %s", d, r2.Changes, r2.Status)
			}
		})
	}
}

// checkChangesKept checks that every file of dir that differs from before
// is named by a change of r, and that the old bytes of every file written,
// truncated, renamed or removed are in the quarantine.
func checkChangesKept(t testing.TB, before map[string]string, dir, quarantine string, r *Report) {
	t.Helper()
	named := map[string]bool{}
	for _, c := range r.Changes {
		named[c.File] = true
		if c.To != "" {
			named[c.To] = true
		}
		if c.Action == ActionCreate {
			continue
		}
		if c.Saved == "" {
			t.Errorf("change %+v keeps no copy of the old bytes", c)
			continue
		}
		if _, err := os.Stat(filepath.Join(quarantine, c.Saved)); err != nil {
			t.Errorf("change %+v: %v", c, err)
		}
	}
	after := testutil.HashTree(t, dir)
	for _, name := range diffHashes(before, after) {
		if strings.HasPrefix(name, quarantineDirName) || strings.HasSuffix(name, "/") {
			continue
		}
		if !named[name] {
			t.Errorf("%s changed but no change names it (%+v)", name, r.Changes)
		}
	}
}

// TestEveryChangeKept repairs every damage case with a quarantine: every
// file changed is listed, and the old bytes of each are kept.
func TestEveryChangeKept(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.id, func(t *testing.T) {
			dir := fixture(t)
			if c.damage != nil {
				c.damage(t, dir)
			}
			before := testutil.HashTree(t, dir)
			o := c.opts
			o.Quarantine = filepath.Join(t.TempDir(), "q")
			r := mustRun(t, dir, o)
			checkChangesKept(t, before, dir, o.Quarantine, r)
		})
	}
}

// TestFullVerify: Full validates the segments a run would trust; damage
// found in them is data the log had declared durable.
func TestFullVerify(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"clean", clean()},
		{"below-recovery-point", unclean(600)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fixture(t)
			bad := batchAt(t, dir, 0, 150)
			flipCRC(t, dir, 0, bad.pos)
			o := c.opts
			o.DryRun = true
			if r := mustRun(t, dir, o); r.Truncation != nil || len(r.Problems) != 0 {
				t.Fatalf("without Full the trusted segment was scanned: %+v %+v", r.Truncation, r.Problems)
			}
			o.Full = true
			r := mustRun(t, dir, o)
			// Found, and (without CutFlushed) left as it is: Kafka never
			// scans such a segment.
			if r.Truncation != nil {
				t.Fatalf("truncation %+v, want none", r.Truncation)
			}
			expectProblemAt(t, r, filenames.Make(0, filenames.Log), bad.pos)
			expectProblem(t, r, kindFlushedDamage)
			for _, s := range r.Segments {
				if s.Batches < 0 && s.BaseOffset == 0 {
					t.Errorf("segment %d not scanned", s.BaseOffset)
				}
			}
		})
	}
}

// TestMetadataLogFullyRecovered: __cluster_metadata-0 is recovered from
// recovery point 0 whatever the marker says, as Kafka opens it.
func TestMetadataLogFullyRecovered(t *testing.T) {
	src := fixture(t)
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	testutil.CopyTree(t, src, dir)
	if err := os.Truncate(segPath(dir, 600, filenames.Log), batchAt(t, dir, 600, 740).pos+30); err != nil {
		t.Fatal(err)
	}
	o := clean()
	o.DryRun = true
	r := mustRun(t, dir, o)
	expectNote(t, r, kindMetadataLog)
	for _, s := range r.Segments {
		if s.Batches < 0 {
			t.Errorf("segment %d trusted", s.BaseOffset)
		}
	}
	if r.Truncation == nil || r.Truncation.Class != ClassTornTail || hasProblem(r, kindCleanMarker) {
		t.Errorf("truncation %+v problems %+v", r.Truncation, r.Problems)
	}
	if r.RecoveryPoint != 0 {
		t.Errorf("recovery point %d, want 0", r.RecoveryPoint)
	}
	if !IsMetadataLog(dir) || IsMetadataLog(src) || IsMetadataLog(filepath.Join(dir, "x")) {
		t.Error("IsMetadataLog")
	}
	// Without the marker, a recovery point from the checkpoint is ignored
	// too: every segment is validated.
	o = unclean(600)
	o.DryRun = true
	r = mustRun(t, dir, o)
	expectNote(t, r, kindMetadataLog)
	if r.RecoveryPoint != 0 {
		t.Errorf("unclean open with recovery point 600: recovery point %d, want 0", r.RecoveryPoint)
	}
	for _, s := range r.Segments {
		if s.Batches < 0 {
			t.Errorf("unclean open with recovery point 600: segment %d not validated", s.BaseOffset)
		}
	}
}

// TestTimeIndexEntryInsideBatch: Kafka 3.6 and 3.7 put the offset of the
// record with the largest timestamp in the time index (KAFKA-16310): an
// offset inside a batch. A trusted segment with such entries stays
// trusted.
func TestTimeIndexEntryInsideBatch(t *testing.T) {
	dir := fixture(t)
	p := segPath(dir, 300, filenames.TimeIndex)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := index.DecodeTimeIndex(b, 300)
	if err != nil || len(entries) < 2 {
		t.Fatalf("time index of segment 300: %d entries, %v", len(entries), err)
	}
	var out []byte
	inside := 0
	for i, e := range entries {
		bp := batchAt(t, dir, 300, e.Offset)
		if e.Offset == bp.last && bp.last > bp.base && (i == 0 || entries[i-1].Offset < e.Offset-1) {
			e.Offset--
			inside++
		}
		out, _ = index.AppendTimeEntry(out, 300, e)
	}
	if inside == 0 {
		t.Fatal("no entry moved inside its batch")
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	o := clean()
	o.DryRun = true
	r := mustRun(t, dir, o)
	if len(r.Problems) != 0 || len(r.Changes) != 0 || r.Status != StatusOK {
		t.Fatalf("problems %+v changes %+v status %s", r.Problems, r.Changes, r.Status)
	}
}
