package mirror

import (
	"errors"
	"testing"

	"github.com/partlog/partlog/batch"
)

// TestFailMirrorOnlyItsSession: the fetcher's FailMirror fails the
// partition only while it mirrors in the fetcher's session; in any other
// state or session it is refused without effect, in memory and on disk
// (a late verdict of a stopped fetch loop must not make the stopped,
// writable partition read-only again, nor fail a newer session).
func TestFailMirrorOnlyItsSession(t *testing.T) {
	start := func(t *testing.T, p *Partition) SessionID {
		t.Helper()
		s, err := p.Start(StartRequest{MirrorName: "dr", SourceClusterID: "A", TopicID: topic})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		// setup leaves the partition in the state under test and returns
		// the session the fetcher fails.
		setup   func(t *testing.T, p *Partition) SessionID
		want    State
		wantErr error // nil: the partition goes FAILED
	}{
		{"mirroring, its session", func(t *testing.T, p *Partition) SessionID { return start(t, p) }, StateFailed, nil},
		{"mirroring, another session", func(t *testing.T, p *Partition) SessionID { return start(t, p) + 1 }, StateMirroring, ErrFencedSession},
		{"stopped", func(t *testing.T, p *Partition) SessionID {
			s := start(t, p)
			if _, err := p.Stop(bg, TruncateLSO); err != nil {
				t.Fatal(err)
			}
			return s
		}, StateStopped, ErrNotMirroring},
		{"paused", func(t *testing.T, p *Partition) SessionID {
			s := start(t, p)
			if err := p.Pause(); err != nil {
				t.Fatal(err)
			}
			return s
		}, StatePaused, ErrNotMirroring},
		{"a new session after a stop", func(t *testing.T, p *Partition) SessionID {
			s := start(t, p)
			if _, err := p.Stop(bg, TruncateLSO); err != nil {
				t.Fatal(err)
			}
			start(t, p)
			return s
		}, StateMirroring, ErrFencedSession},
		{"never mirrored", func(t *testing.T, p *Partition) SessionID { return 0 }, StateNone, ErrNotMirroring},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartition(t)
			session := tc.setup(t, p)
			before := p.Checkpoint()
			reason := errors.New("the source diverged")
			err := p.FailMirror(session, reason)
			mustState(t, p, tc.want)
			onDisk, found, rerr := ReadCheckpoint(p.dir)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if tc.wantErr == nil {
				if err != nil || !errors.Is(p.Failure(), reason) {
					t.Fatalf("FailMirror: %v, failure %v", err, p.Failure())
				}
				if onDisk.State != StateFailed {
					t.Fatalf("checkpoint file says %s, want FAILED", onDisk.State)
				}
				return
			}
			var se *StateError
			if !errors.Is(err, tc.wantErr) || !errors.As(err, &se) || se.State != tc.want {
				t.Fatalf("FailMirror: %v, want %v in state %s", err, tc.wantErr, tc.want)
			}
			if p.Failure() != nil || p.Checkpoint() != before {
				t.Fatalf("a refused FailMirror changed the partition: %+v, failure %v", p.Checkpoint(), p.Failure())
			}
			if found && onDisk != before {
				t.Fatalf("a refused FailMirror changed the checkpoint file: %+v, was %+v", onDisk, before)
			}
			if !tc.want.ReadOnly() {
				if _, err := p.AppendClient(dataBatch(t, -1, 0, 0, 1, false, batch.CompressionNone), p.LeaderEpoch()); err != nil {
					t.Fatalf("produce after the refused FailMirror: %v", err)
				}
			}
		})
	}
}
