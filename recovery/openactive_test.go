package recovery

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testutil"
	"github.com/partlog/partlog/segment"
)

// runBothWays runs the read-only recovery of dir with o, and Load with
// o.OpenActive on a copy of dir (returned, with the same base name), for
// the caller to compare the two.
func runBothWays(t *testing.T, dir string, o Options) (want *Report, ld *Loaded, copied string) {
	t.Helper()
	copied = filepath.Join(t.TempDir(), filepath.Base(dir))
	testutil.CopyTree(t, dir, copied)
	want = mustRun(t, dir, o)
	o.OpenActive = true
	ld, err := Load(copied, o)
	if err != nil {
		t.Fatalf("Load with OpenActive: %v", err)
	}
	return want, ld, copied
}

// TestOpenActiveSameVerdict runs every catalogue case (recovery.md §8.2)
// on two copies of the damaged directory, one with Options.OpenActive: the
// reports and the files left must be the same, so checking the last
// segment through its files opened for appending misses no damage. When
// Load hands over the active segment, it is the one segment.OpenActive
// opens from the same files, with the same tail state.
func TestOpenActiveSameVerdict(t *testing.T) {
	handed := 0
	for _, c := range cases() {
		t.Run(c.id, func(t *testing.T) {
			dir := fixture(t)
			if c.damage != nil {
				c.damage(t, dir)
			}
			want, ld, dir2 := runBothWays(t, dir, c.opts)
			o := c.opts
			got := ld.Report
			gj, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			wj, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if g := strings.ReplaceAll(string(gj), dir2, dir); g != string(wj) {
				t.Errorf("with OpenActive:\n%s\nwithout:\n%s", g, wj)
			}
			if a := ld.Active; a != nil {
				handed++
				last := got.Segments[len(got.Segments)-1]
				if !o.Clean || got.Status != StatusOK && len(got.Problems) > 0 && got.Truncation != nil {
					t.Errorf("active segment handed over for %+v", got)
				}
				if a.BaseOffset() != last.BaseOffset || a.Size() != last.SizeBytes || a.NextOffset() != got.LogEndOffset {
					t.Errorf("handed segment %d: size %d next %d; report %+v, LEO %d",
						a.BaseOffset(), a.Size(), a.NextOffset(), last, got.LogEndOffset)
				}
				sameActive(t, a, dir)
				// A cleanly closed segment closes to the same bytes.
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if d := diffHashes(testutil.HashTree(t, dir), testutil.HashTree(t, dir2)); len(d) > 0 {
				t.Errorf("with OpenActive the files differ: %v", d)
			}
		})
	}
	if handed == 0 {
		t.Fatal("no case handed over an active segment")
	}
	t.Logf("%d of %d cases handed over the active segment", handed, len(cases()))
}

// sameActive compares a, handed over by Load, with the last segment of dir
// opened by segment.OpenActive (its own checks and tail read).
func sameActive(t *testing.T, a *segment.Segment, dir string) {
	t.Helper()
	ref := filepath.Join(t.TempDir(), filepath.Base(dir))
	testutil.CopyTree(t, dir, ref)
	b, err := segment.OpenActive(ref, a.BaseOffset(), testCfg, testNow(), segment.Opened{})
	if err != nil {
		t.Fatalf("segment.OpenActive: %v", err)
	}
	defer b.Close()
	if a.Size() != b.Size() || a.NextOffset() != b.NextOffset() {
		t.Errorf("handed: size %d next %d; OpenActive: size %d next %d", a.Size(), a.NextOffset(), b.Size(), b.NextOffset())
	}
	ta, oa, erra := a.MaxTimestampSoFar()
	tb, ob, errb := b.MaxTimestampSoFar()
	if ta != tb || oa != ob || erra != nil || errb != nil {
		t.Errorf("max timestamp: handed (%d, %d, %v), OpenActive (%d, %d, %v)", ta, oa, erra, tb, ob, errb)
	}
	// The rolling timestamp (segment.ms), seen through ShouldRoll.
	for _, d := range []int64{-1, 0, 1, 1000, 3_600_000, 1 << 40} {
		ts := ta + d
		if ta == batch.NoTimestamp {
			ts = d
		}
		ra := a.ShouldRoll(1, a.NextOffset(), ts, 1000, 0, testNow)
		rb := b.ShouldRoll(1, b.NextOffset(), ts, 1000, 0, testNow)
		if ra != rb {
			t.Errorf("ShouldRoll at timestamp %d: handed %v, OpenActive %v", ts, ra, rb)
		}
	}
}

// TestOpenActiveNotUnderDryRun checks that OpenActive opens nothing for
// writing under DryRun and hands nothing over, nor without Clean.
func TestOpenActiveNotUnderDryRun(t *testing.T) {
	for _, o := range []Options{clean(), unclean(750)} {
		dir := fixture(t)
		before := testutil.HashTree(t, dir)
		dry := o
		dry.DryRun, dry.OpenActive = true, true
		ld, err := Load(dir, dry)
		if err != nil {
			t.Fatal(err)
		}
		if ld.Active != nil {
			t.Fatalf("DryRun (clean %v) handed over an active segment", o.Clean)
		}
		if d := diffHashes(before, testutil.HashTree(t, dir)); len(d) > 0 {
			t.Fatalf("DryRun changed %v", d)
		}
		o.OpenActive = true
		ld, err = Load(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		if (ld.Active != nil) != o.Clean {
			t.Fatalf("clean %v: active handed over: %v", o.Clean, ld.Active != nil)
		}
		if ld.Active != nil {
			_ = ld.Active.Close()
		}
	}
}

// TestTrustedLargeSegmentChecks checks the trusted check of a cleanly
// closed segment above the read limit (mapped, its pages faulted in as
// the check touches the first batch and the tail, not populated whole):
// an intact one is trusted (and, the last one, handed over with
// OpenActive); damage in its first batch or its tail is found, with and
// without OpenActive, and the same report is given.
func TestTrustedLargeSegmentChecks(t *testing.T) {
	build := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "t-0")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.WriteLeaderEpochs(filepath.Join(dir, epochFileName), []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}}); err != nil {
			t.Fatal(err)
		}
		seq := map[int64]int32{}
		offset := int64(0)
		for _, base := range []int64{0, 2000} {
			s, err := segment.Create(dir, base, testCfg, testNow())
			if err != nil {
				t.Fatal(err)
			}
			for offset < base+2000 {
				var out segment.Appended
				raw := encodeBatch(fixtureBatch{records: 10, pid: -1}, offset, seq)
				hdrs, err := batch.CheckAll(raw, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Append(raw, hdrs, segment.Stamp{Assign: true, NextOffset: offset, LeaderEpoch: 0}, &out); err != nil {
					t.Fatal(err)
				}
				offset = out.LastOffset + 1
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if n := batchesOf(t, dir, base); n[len(n)-1].pos+int64(n[len(n)-1].size) <= readSmallBytes {
				t.Fatalf("segment %d is not above the read limit", base)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		ok     bool
	}{
		{"intact", nil, true},
		{"last batch of the active segment", func(t *testing.T, dir string) {
			b := batchesOf(t, dir, 2000)
			l := b[len(b)-1]
			patch(t, segPath(dir, 2000, filenames.Log), func(d []byte) []byte { d[l.pos+int64(l.size)-3] ^= 0xff; return d })
		}, false},
		{"first batch of the sealed segment", func(t *testing.T, dir string) {
			patch(t, segPath(dir, 0, filenames.Log), func(d []byte) []byte { d[100] ^= 0xff; return d })
		}, false},
		{"last batch of the sealed segment", func(t *testing.T, dir string) {
			b := batchesOf(t, dir, 0)
			l := b[len(b)-1]
			patch(t, segPath(dir, 0, filenames.Log), func(d []byte) []byte { d[l.pos+int64(l.size)-3] ^= 0xff; return d })
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := build(t)
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			want, ld, _ := runBothWays(t, dir, Options{Clean: true, RecoveryPoint: 4000, Segment: testCfg, Now: testNow})
			if ld.Active != nil {
				defer ld.Active.Close()
			}
			got := ld.Report
			if tc.ok != (len(got.Problems) == 0) || tc.ok != (len(want.Problems) == 0) {
				t.Fatalf("status %s / %s, problems %+v / %+v", got.Status, want.Status, got.Problems, want.Problems)
			}
			if (ld.Active != nil) != (tc.ok || tc.name != "last batch of the active segment") {
				t.Fatalf("active handed over: %v", ld.Active != nil)
			}
			if got.LogEndOffset != want.LogEndOffset || len(got.Problems) != len(want.Problems) || (got.Truncation == nil) != (want.Truncation == nil) {
				t.Fatalf("with OpenActive %+v; without %+v", got, want)
			}
		})
	}
}
