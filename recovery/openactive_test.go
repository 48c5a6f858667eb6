package recovery

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

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
			dir2 := filepath.Join(t.TempDir(), filepath.Base(dir))
			copyDir(t, dir, dir2)
			want := mustRun(t, dir, c.opts)
			o := c.opts
			o.OpenActive = true
			ld, err := Load(dir2, o)
			if err != nil {
				t.Fatalf("Load with OpenActive: %v", err)
			}
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
			if d := diffHashes(hashDir(t, dir), hashDir(t, dir2)); len(d) > 0 {
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
	copyDir(t, dir, ref)
	b, err := segment.OpenActive(ref, a.BaseOffset(), testCfg, testNow())
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
		before := hashDir(t, dir)
		dry := o
		dry.DryRun, dry.OpenActive = true, true
		ld, err := Load(dir, dry)
		if err != nil {
			t.Fatal(err)
		}
		if ld.Active != nil {
			t.Fatalf("DryRun (clean %v) handed over an active segment", o.Clean)
		}
		if d := diffHashes(before, hashDir(t, dir)); len(d) > 0 {
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
