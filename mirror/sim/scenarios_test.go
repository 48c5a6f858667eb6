package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partlog/partlog"
)

// expected is mirror.md's prediction for every scenario × strategy, as
// table cells (Result.Label). Where the spec predicts something this
// engine does not reproduce, the cell holds what happens and the comment
// says why.
var expected = map[string]map[Strategy]string{
	// §4.1: without the barrier 5(B)'s batches match 5(A)'s cached ones and
	// are acknowledged as duplicates with A's offsets: nothing is stored.
	// D1–D3 keep the two id spaces apart in a single hop.
	"active-passive": {Barrier: "clean", None: "lost", Negation: "clean", IdempotentNegation: "clean", BitField: "clean"},
	// §4.2: 4.1's false duplicates at B (s0..s2 all match 5(A)'s cache).
	// The spec's cases 1–2 at A need B to have stored some of 5(B)'s
	// batches; with TRUNCATE_LSO and no expiry B stores none, so A only
	// inherits the loss.
	"failback": {Barrier: "clean", None: "lost", Negation: "clean", IdempotentNegation: "clean", BitField: "clean"},
	// §4.3: the 4.1 problem at B and at C independently.
	"fan-out": {Barrier: "clean", None: "lost", Negation: "clean", IdempotentNegation: "clean", BitField: "clean"},
	// §4.4: the 4.1 problem in each partition. The transactional topic tx
	// shows T53: rewritten (negative) ids bypass the producer state, so the
	// aborted transaction is not indexed and the open one does not hold
	// the last stable offset: read_committed consumers on C read both.
	"fan-in": {Barrier: "clean", None: "lost", Negation: "phantom", IdempotentNegation: "phantom", BitField: "phantom"},
	// §4.5 / T46: B's entry for 5(A) expired by time, so B stores 5(B)'s
	// e0 s0; C still holds {5: e0 s1} of 5(A): case 1. Not reproduced for
	// D1: the spec's "-7 / 5 / -7" collision needs a local producer on C,
	// which 4.5 does not have (chain-both and chain4 show it). D2: 5(A)
	// and 5(B) both arrive at C as -7, as predicted, but the producer state
	// ignores negative ids (R11, T53), so the clash causes none of cases
	// 1–3: it is reported as "clash".
	"chain": {Barrier: "clean", None: "corrupt(1)", Negation: "clean", IdempotentNegation: "clash", BitField: "clean"},
	// T48: KEEP_OPEN leaves 5(A)'s transaction open on B; 5(B) (epoch 1,
	// so not a false duplicate) joins it (case 2) and its COMMIT closes it
	// (case 3), on B and on C; consumers read 5(A)'s never-committed
	// records. The barrier strategy cannot keep a transaction open and
	// truncates (C follows by divergence). The rewriting designs do not
	// track the negative ids: 5(A)'s open records are readable on B (and
	// on C unless D1 restores the id there, where the open transaction
	// then pins C's last stable offset and C loses B's committed records).
	"chain-keep-open": {Barrier: "clean", None: "corrupt(2,3) phantom", Negation: "lost phantom", IdempotentNegation: "phantom clash", BitField: "phantom"},
	// §4.6 hop 2: the 4.1 leader problem at C. D1 restores A's id 5 on C,
	// so 5(C) meets it exactly as without any rewriting.
	"chain-hop2": {Barrier: "clean", None: "lost", Negation: "lost", IdempotentNegation: "clean", BitField: "clean"},
	// §4.6 both: hop 1's case 1 at C, then the leader problem at C.
	"chain-both": {Barrier: "clean", None: "corrupt(1) lost", Negation: "lost", IdempotentNegation: "clash", BitField: "clean"},
	// §4.6 hop 2 with lag: the leader problem at B and at C.
	"chain-hop2-lag": {Barrier: "clean", None: "lost", Negation: "lost", IdempotentNegation: "clean", BitField: "clean"},
	// §4.6 re-wire: protected by the truncation to 0.
	"chain-rewire": {Barrier: "clean", None: "clean", Negation: "clean", IdempotentNegation: "clean", BitField: "clean"},
	// §4.7: truncations to 0 protect the phases; the local writes on C
	// between phases show the 4.1 leader problem.
	"reassignment": {Barrier: "clean", None: "lost", Negation: "clean", IdempotentNegation: "clean", BitField: "clean"},
	// §4.8 / T47: four PID-5 producers under one entry on D (5(A) at epoch
	// 2: case 2 for 5(B)'s e0, case 1 for 5(C)'s e0 after it). D1: 5(A)
	// and 5(C) both arrive at D as -7; D2: 5(A), 5(B), 5(C) all become -7
	// on D; both clash invisibly (R11) instead of causing cases 1–3.
	"chain4": {Barrier: "clean", None: "corrupt(1,2)", Negation: "clash", IdempotentNegation: "clash", BitField: "clean"},
}

func TestScenarios(t *testing.T) {
	root := t.TempDir()
	for _, tp := range Topologies {
		want, ok := expected[tp.Name]
		if !ok {
			t.Fatalf("no expectation for %s", tp.Name)
		}
		for _, s := range Strategies {
			t.Run(tp.Name+"/"+s.String(), func(t *testing.T) {
				r, err := Run(tp, s, root)
				if err != nil {
					t.Fatal(err)
				}
				if got := r.Label(); got != want[s] {
					t.Errorf("got %s, want %s", got, want[s])
					for _, f := range r.Findings {
						t.Log(f)
					}
				}
				if s == Barrier && !r.Clean() {
					t.Errorf("the barrier design must be clean")
				}
				checkClusters(t, filepath.Join(root, tp.Name, s.String()))
			})
		}
	}
}

// node is a partition's expected final state under the barrier strategy,
// from the tables of mirror.md §4.
type node struct {
	name     string
	leo      int64
	epoch    int32
	psm      string
	barriers []int64
}

var barrierTables = map[string][]node{
	"active-passive": {{"A t", 4, 3, "{5: e0 s3}", nil}, {"B t", 6, 14, "{5: e0 s1}", []int64{3}}},
	"failback":       {{"A t", 9, 25, "{6: e0 s0}", []int64{3, 7}}, {"B t", 9, 35, "{6: e0 s0}", []int64{3, 7}}},
	"fan-out":        {{"A t", 3, 3, "{5: e0 s2}", nil}, {"B t", 4, 14, "{5: e0 s0}", []int64{2}}, {"C t", 5, 14, "{5: e0 s0}", []int64{3}}},
	"fan-in":         {{"C t1", 3, 14, "{5: e0 s0}", []int64{1}}, {"C t2", 3, 14, "{5: e0 s0}", []int64{1}}, {"C tx", 6, 14, "∅", []int64{5}}},
	"chain":          {{"B t", 5, 14, "{5: e0 s1}", []int64{2}}, {"C t", 5, 23, "{5: e0 s1}", []int64{2}}},
	"chain-hop2":     {{"B t", 3, 13, "{5: e0 s2}", nil}, {"C t", 4, 24, "{5: e0 s0}", []int64{2}}},
	"chain-both":     {{"B t", 5, 14, "{5: e0 s1}", []int64{2}}, {"C t", 8, 24, "{5: e0 s1}", []int64{2, 5}}},
	"chain-hop2-lag": {{"B t", 5, 14, "{5: e0 s1}", []int64{2}}, {"C t", 4, 24, "{5: e0 s0}", []int64{2}}},
	"chain-rewire":   {{"A t", 3, 3, "{5: e0 s2}", nil}, {"C t", 3, 24, "{5: e0 s2}", nil}},
	"reassignment":   {{"A t", 5, 3, "{5: e0 s4}", nil}, {"C t", 5, 15, "{5: e0 s4}", nil}},
	"chain4": {{"B t", 5, 14, "{5: e0 s1}", []int64{2}}, {"C t", 8, 24, "{5: e0 s1}", []int64{2, 5}},
		{"D t", 11, 34, "{5: e0 s1}", []int64{2, 5, 8}}},
}

// TestBarrierTables checks the end state of every node against the
// tables of mirror.md §4 (T36–T44): log end, leader epoch, producer state
// and barrier offsets.
func TestBarrierTables(t *testing.T) {
	root := t.TempDir()
	for _, tp := range Topologies {
		want := barrierTables[tp.Name]
		if want == nil {
			continue
		}
		r, err := Run(tp, Barrier, root)
		if err != nil {
			t.Fatal(err)
		}
		final := r.Steps[len(r.Steps)-1].Nodes
		for _, w := range want {
			i := slices.IndexFunc(final, func(n NodeState) bool { return n.Node == w.name })
			if i < 0 {
				t.Errorf("%s: no node %s", tp.Name, w.name)
				continue
			}
			n := final[i]
			if n.LEO != w.leo || n.Epoch != w.epoch || n.PSM != w.psm || fmt.Sprint(n.Barriers) != fmt.Sprint(nonNil(w.barriers)) {
				t.Errorf("%s %s: LEO %d epoch %d PSM %s barriers %v; want %d %d %s %v", tp.Name, w.name,
					n.LEO, n.Epoch, n.PSM, n.Barriers, w.leo, w.epoch, w.psm, w.barriers)
			}
		}
		if len(r.Barriers) == 0 {
			t.Errorf("%s: no barrier dumped", tp.Name)
		}
	}
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// checkClusters runs partlog's consistency check on every cluster's log
// directory a run left (closed) under dir.
func checkClusters(t *testing.T, dir string) {
	t.Helper()
	clusters, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		if !c.IsDir() {
			continue
		}
		opts := &partlog.Options{SegmentBytes: 64 << 10, SegmentMs: -1, MaxIndexBytes: 4 << 10, PrefaultBytes: -1,
			ProducerIDExpirationMs: expirationMs}
		if err := partlog.Check(filepath.Join(dir, c.Name()), opts); err != nil {
			t.Errorf("consistency check of cluster %s: %v", c.Name(), err)
		}
	}
}
