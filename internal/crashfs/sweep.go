package crashfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Environment of the power-cut tests (every package's):
//
//	PARTLOG_POWERCUT_SEED=S   replay the run of seed S (printed by each test)
//	PARTLOG_POWERCUT_RUN=R    with it, only run R of the test's workload
//	PARTLOG_POWERCUT_CUT=K    with it, only the image of cut K
//	PARTLOG_POWERCUT_CUTS=N   cuts per scenario (the long loop: 1000 or more)
const (
	EnvSeed = "PARTLOG_POWERCUT_SEED"
	EnvRun  = "PARTLOG_POWERCUT_RUN"
	EnvCut  = "PARTLOG_POWERCUT_CUT"
	EnvCuts = "PARTLOG_POWERCUT_CUTS"
)

// Sweep runs the images of many cuts of a workload through a check,
// each image chosen by a seed derived from the test's seed and the cut,
// so a failure names what replays it.
type Sweep struct {
	// Seed drives the workload (Rand) and every image's choices.
	Seed uint64
	// Cuts is the number of cuts Run checks (all of them when the
	// workload has fewer ops).
	Cuts int
	// Only, when set, is the one cut Run checks; OnlyRun, when ≥ 0, the
	// one run Loop makes.
	Only    int64
	OnlyRun int
	// Done counts the images checked, over every Run.
	Done int
}

// NewSweep reads the environment for t; cuts is the default number of
// cuts per Run (a few dozen keep go test fast). It logs the seed.
func NewSweep(t testing.TB, cuts int) *Sweep {
	t.Helper()
	s := &Sweep{Seed: uint64(time.Now().UnixNano()), Cuts: cuts, OnlyRun: -1}
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, v, err)
		}
		s.Seed = n
		if v := os.Getenv(EnvCut); v != "" {
			if s.Only, err = strconv.ParseInt(v, 10, 64); err != nil {
				t.Fatalf("%s=%q: %v", EnvCut, v, err)
			}
		}
		if v := os.Getenv(EnvRun); v != "" {
			if s.OnlyRun, err = strconv.Atoi(v); err != nil {
				t.Fatalf("%s=%q: %v", EnvRun, v, err)
			}
		}
	}
	if v := os.Getenv(EnvCuts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", EnvCuts, v)
		}
		s.Cuts = n
	}
	t.Logf("power-cut seed %d (replay: %s=%d), %d cuts per run", s.Seed, EnvSeed, s.Seed, s.Cuts)
	return s
}

// Loop calls run for runs 0, 1, ... until at least runs were made and
// Cuts images were checked per run (a workload of few ops yields fewer
// cuts than asked, so the long loop makes more runs), or only for
// OnlyRun.
func (s *Sweep) Loop(runs int, run func(run int)) {
	if s.OnlyRun >= 0 {
		run(s.OnlyRun)
		return
	}
	for i := 0; i < runs || (s.Done < s.Cuts*runs && i < 100*runs); i++ {
		run(i)
	}
}

// Rand returns a generator for one of the test's random streams.
func (s *Sweep) Rand(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.Seed, stream^0x2545f4914f6cdd1d))
}

// imageSeed is the seed of the image of cut k in run run. The cut after
// the last op (end) always loses every pending op: it is where a
// missing sync of a finished operation shows for sure.
func (s *Sweep) imageSeed(run int, k, end int64) uint64 {
	seed := s.Seed ^ uint64(run)<<48 ^ uint64(k)*0x9e3779b97f4a7c15
	for k == end && ImageMode(seed) != "lose" {
		seed++
	}
	return seed
}

// Choose returns the cuts a run of the workload in r checks, ascending,
// in (from, r.Len()+1]: every one if there are no more than s.Cuts, else
// the cut just before and just after each sync first (where a missing
// sync shows), then others at random, s.Cuts in all.
func (s *Sweep) Choose(r *Replay, from int64, rng *rand.Rand) []int64 {
	end := r.Len() + 1
	if s.Only != 0 {
		if s.Only > from && s.Only <= end {
			return []int64{s.Only}
		}
		return nil
	}
	if end-from <= int64(s.Cuts) {
		var all []int64
		for k := from + 1; k <= end; k++ {
			all = append(all, k)
		}
		return all
	}
	picked := map[int64]bool{end: true}
	var near []int64
	for _, o := range r.Ops()[from:] {
		if o.IsSync() {
			near = append(near, o.Seq, o.Seq+1)
		}
	}
	rng.Shuffle(len(near), func(i, j int) { near[i], near[j] = near[j], near[i] })
	for _, k := range near {
		if len(picked) >= s.Cuts*2/3 {
			break
		}
		picked[k] = true
	}
	for len(picked) < s.Cuts {
		picked[from+1+rng.Int64N(end-from)] = true
	}
	out := make([]int64, 0, len(picked))
	for k := range picked {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Run checks the image of each chosen cut of r after op from (the
// workload's settle): check gets the image's directory (the mount's
// root) and what the cut kept. A failure stops the run with the cut, the
// seed that replays it, what the image kept and lost, and what was
// synced before the cut.
func (s *Sweep) Run(t testing.TB, run int, r *Replay, from int64, check func(dir string, im *Image)) {
	t.Helper()
	rng := s.Rand(uint64(run) + 1<<32)
	for _, k := range s.Choose(r, from, rng) {
		if err := r.To(k); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "image")
		im, err := r.Image(s.imageSeed(run, k, r.Len()+1), dst)
		if err != nil {
			t.Fatalf("image of cut %d: %v", k, err)
		}
		func() {
			// Also when check stops the test (t.Fatal unwinds through here).
			defer func() {
				if t.Failed() {
					t.Errorf("power cut before op %d of run %d fails (replay: %s=%d %s=%d %s=%d): %s%s%s",
						k, run, EnvSeed, s.Seed, EnvRun, run, EnvCut, k, im, describe(r, from), keep(r, s.imageSeed(run, k, r.Len()+1)))
				}
			}()
			check(dst, im)
		}()
		s.Done++
		if t.Failed() {
			t.FailNow()
		}
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
	}
}

// describe lists the last ops before the cut, syncs marked.
func describe(r *Replay, from int64) string {
	ops := r.Ops()[from:r.next]
	if len(ops) > 24 {
		ops = ops[len(ops)-24:]
	}
	out := "\nlast ops before the cut:"
	for i := range ops {
		out += "\n  " + ops[i].String()
	}
	return out
}

// keep saves the image and the op list of a failure: a workload's ops
// depend on timing (group commit, the kernel's writeback), so the seed
// replays the workload but not always the same cut.
func keep(r *Replay, seed uint64) string {
	// The check may have changed image (recovery repairs it): make it
	// again from the replay, which is still at the cut.
	dir, err := os.MkdirTemp("", "crashfs-failure-")
	if err == nil {
		_, err = r.Image(seed, filepath.Join(dir, "image"))
	}
	if err != nil {
		return fmt.Sprintf("\nkeeping the image: %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "ops.txt"))
	if err == nil {
		for i := range r.ops {
			fmt.Fprintln(f, r.ops[i].String())
		}
		err = f.Close()
	}
	if err != nil {
		return fmt.Sprintf("\nkeeping the op log: %v", err)
	}
	return "\nimage and op list kept in " + dir
}
