package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/testutil"
)

// localData gives b a local history: 6 one-record batches of producer 5
// at epoch 3 (offsets 0..5) and one two-record batch at epoch 5 (6..7).
func localData(t *testing.T, b *cluster) {
	t.Helper()
	for s := int32(0); s < 6; s++ {
		b.produce(5, 0, s, 1, false)
	}
	b.epoch = 5
	b.produce(5, 0, 6, 2, false)
}

// TestStartAlignmentTarget: LOG_ALIGNMENT truncates to the target of
// mirror.md §2.5 step 2 (T32 for "not found").
func TestStartAlignmentTarget(t *testing.T) {
	cases := []struct {
		name   string
		pos    Position
		target int64
	}{
		{"T32 not found: from scratch", Position{}, 0},
		{"found: LMO", Position{Found: true, Epoch: 3, Offset: 4}, 4},
		{"found: epoch divergence lowers it", Position{Found: true, Epoch: 3, Offset: 7}, 6},
		{"found: never above LEO", Position{Found: true, Epoch: 9, Offset: 50}, 8},
		{"found: a straddling batch goes entirely", Position{Found: true, Epoch: 5, Offset: 7}, 6},
		{"found: LMO 0", Position{Found: true, Epoch: -1, Offset: 0}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newCluster(t, "B", 3)
			localData(t, b)
			s, err := b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic, SourcePosition: tc.pos, SourceLeaderEpoch: -1})
			if err != nil {
				t.Fatal(err)
			}
			if s != 1 {
				t.Fatalf("session %d", s)
			}
			mustState(t, b.p, StateMirroring)
			if got := b.log().LogEndOffset(); got != tc.target {
				t.Fatalf("LEO %d, want %d", got, tc.target)
			}
			if c := b.p.Checkpoint(); c.AlignTargetOffset != tc.target {
				t.Fatalf("recorded target %d", c.AlignTargetOffset)
			}
			wantSeq := map[int64]int32{}
			if tc.target > 0 {
				wantSeq[5] = int32(tc.target) - 1 // offsets and sequences coincide
			}
			checkProducers(t, "PSM after alignment", b.log(), wantSeq)
		})
	}
}

var alignCrashPoints = []crashPoint{crashAlignIntent, crashAlignPositionResolved, crashAlignTruncatedUnrecorded, crashAlignTruncated, crashFenced}

// TestT33AlignmentCrashPoints: a crash after every step of LOG_ALIGNMENT
// leaves the partition read-only, and the restart completes the alignment
// (with Options.LookupPosition, or with Start again when the crash was at
// INTENT and no lookup is configured), then mirroring makes the log equal
// to the source.
func TestT33AlignmentCrashPoints(t *testing.T) {
	for _, pt := range alignCrashPoints {
		for _, lookup := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/lookup=%v", pt, lookup), func(t *testing.T) {
				a := newCluster(t, "A", 3)
				for s := int32(0); s < 4; s++ {
					a.produce(7, 0, s, 1, false)
				}
				image := filepath.Join(t.TempDir(), "image")
				var b *cluster
				l := openLog(t, filepath.Join(t.TempDir(), "B", "t-0"))
				b = &cluster{t: t, id: "B", epoch: 3}
				b.p = openPartition(t, l, Options{LeaderEpoch: 3, crash: func(p crashPoint) bool {
					if p != pt {
						return false
					}
					testutil.CopyTree(t, l.Dir(), image)
					return true
				}})
				localData(t, b)
				req := StartRequest{SourceClusterID: "A", TopicID: topic, SourceLeaderEpoch: 3}
				if _, err := b.p.Start(req); !errors.Is(err, ErrCrashed) {
					t.Fatalf("start: %v", err)
				}
				opts := Options{LeaderEpoch: 3}
				if lookup {
					opts.LookupPosition = func(_ context.Context, c Checkpoint) (Position, error) {
						if c.SourceClusterID != "A" {
							t.Errorf("lookup for %q", c.SourceClusterID)
						}
						return Position{}, nil
					}
				}
				p := openPartition(t, openLog(t, image), opts)
				if p.Session() != 1 {
					t.Fatalf("session %d", p.Session())
				}
				if !lookup && pt == crashAlignIntent {
					mustState(t, p, StateLogAlignment)
					if _, err := p.AppendClient(dataBatch(t, 5, 0, 7, 1, false, batch.CompressionNone), 9); !errors.Is(err, ErrReadOnly) {
						t.Fatalf("client append during alignment: %v", err)
					}
					if s, err := p.Start(req); err != nil || s != 1 {
						t.Fatalf("start again: %d %v", s, err)
					}
				}
				mustState(t, p, StateMirroring)
				if p.Log().LogEndOffset() != 0 {
					t.Fatalf("not truncated: LEO %d", p.Log().LogEndOffset())
				}
				pump(t, p, p.Session(), a.log())
				if !bytes.Equal(readAll(t, a.log(), 0), readAll(t, p.Log(), 0)) {
					t.Fatal("not byte-equal to the source")
				}
				checkProducers(t, "PSM", p.Log(), map[int64]int32{7: 3})
			})
		}
	}
}

// TestT61TruncateBelowBarrier: right after a stop (producer state empty)
// a new session truncating below the barrier rebuilds the producer state
// of the kept prefix.
func TestT61TruncateBelowBarrier(t *testing.T) {
	f := newStopFixture(t, Options{})
	if _, err := f.b.p.Stop(bg, AbortOpen); err != nil {
		t.Fatal(err)
	}
	checkProducers(t, "after stop", f.b.log(), nil)
	_, err := f.b.p.Start(StartRequest{SourceClusterID: "A", TopicID: topic,
		SourcePosition: Position{Found: true, Epoch: 3, Offset: 3}})
	if err != nil {
		t.Fatal(err)
	}
	checkProducers(t, "kept prefix [0,3)", f.b.log(), map[int64]int32{5: 0})
}
