package group

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partlog/partlog/internal/crashfs"
)

// TestPowerCutOffsets: offset commits to the coordinator whose state file
// is on crashfs, from simple groups and from a member of a classic group
// after its join and sync, each commit cut at every step (every op up to
// a few dozen, then the steps around each sync first). The image's
// coordinator answers OffsetFetch with, for every partition, the last
// acknowledged commit or one of the commits begun after it before the
// cut (the state file is replaced whole), and the classic group's stored
// generation once its sync was answered.
func TestPowerCutOffsets(t *testing.T) {
	cuts := 24
	if testing.Short() {
		cuts = 8
	}
	sweep := crashfs.NewSweep(t, cuts)
	sweep.Loop(2, func(run int) { powerCutOffsetsRun(t, sweep, run) })
	t.Logf("%d images checked", sweep.Done)
}

// pcCommit is one commit of a partition's offset: begun before op began,
// acknowledged once op done had been applied.
type pcCommit struct {
	offset      int64
	began, done int64
}

func powerCutOffsetsRun(t *testing.T, sweep *crashfs.Sweep, run int) {
	m := crashfs.New(t)
	dir := filepath.Join(m.Dir(), "groups")
	if err := os.Mkdir(dir, 0o755); err != nil {
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
	rng := sweep.Rand(uint64(run))
	h := newHarness(t, Config{Dir: dir})
	// A classic group with one member: its generation is stored state.
	join := h.join(joinReq(5, "classic", "", "range"))
	member, gen := join.MemberID, join.Generation
	if join.ErrorCode != 0 {
		join = h.join(joinReq(5, "classic", member, "range"))
		gen = join.Generation
	}
	if r := <-h.syncAsync(syncReq(3, "classic", member, gen, map[string]string{member: "a"})); r.ErrorCode != 0 {
		t.Fatalf("sync: %d", r.ErrorCode)
	}
	synced := ops()

	commits := map[string][]pcCommit{} // group|topic/partition -> commits in order
	groups := []string{"g0", "g1", "classic"}
	next := int64(1)
	for range 40 {
		g := groups[rng.IntN(len(groups))]
		offs := map[string]map[int32]int64{"t": {}}
		for p := range int32(3) {
			if rng.IntN(2) == 0 {
				offs["t"][p] = next
				next += 1 + rng.Int64N(5)
			}
		}
		if len(offs["t"]) == 0 {
			continue
		}
		memberID, generation := "", int32(-1)
		if g == "classic" {
			memberID, generation = member, gen
		}
		began := ops()
		codes := h.commit(commitReq(8, g, memberID, generation, offs))
		done := ops()
		for p, o := range offs["t"] {
			k := g + "|" + tpKey("t", p)
			if c := codes[tpKey("t", p)]; c != 0 {
				t.Fatalf("commit %s: error %d", k, c)
			}
			commits[k] = append(commits[k], pcCommit{offset: o, began: began, done: done})
		}
	}
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
		c, err := Open(Config{Dir: filepath.Join(img, "groups"), Now: h.clock.Now})
		if err != nil {
			t.Fatalf("open after the cut: %v", err)
		}
		h2 := &harness{t: t, clock: h.clock, c: c, dir: filepath.Join(img, "groups")}
		defer c.Close()
		for _, g := range groups {
			got, code := h2.fetch(8, g, map[string][]int32{"t": {0, 1, 2}}, false)
			if code != 0 {
				t.Fatalf("fetch %s after the cut: error %d", g, code)
			}
			for p := range int32(3) {
				k := g + "|" + tpKey("t", p)
				allowed := []int64{-1} // nothing acknowledged yet
				for _, cm := range commits[k] {
					switch {
					case cm.done < im.Cut:
						allowed = []int64{cm.offset} // acknowledged: what came before no longer counts
					case cm.began < im.Cut:
						allowed = append(allowed, cm.offset) // begun, maybe saved
					}
				}
				if o := got[tpKey("t", p)]; !slices.Contains(allowed, o) {
					t.Errorf("%s: offset %d after the cut, want one of %v", k, o, allowed)
				}
			}
		}
		if im.Cut > synced {
			codes := h2.commit(commitReq(8, "classic", member, gen, map[string]map[int32]int64{"t": {0: 1 << 40}}))
			if c := codes[tpKey("t", 0)]; c != 0 {
				t.Errorf("the classic group's generation %d was lost: a commit at it after the cut fails with %d", gen, c)
			}
		}
	})
}
