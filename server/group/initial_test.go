package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInitialDelay: the first rebalance of an Empty group waits the
// initial delay; a member joining within it extends the wait by another
// delay (bounded by the rebalance timeout); without newcomers it ends at
// the delay.
func TestInitialDelay(t *testing.T) {
	cases := []struct {
		name      string
		late      bool          // a second member joins within the delay
		rebalance int32         // rebalance timeout, ms
		done      time.Duration // when the join completes
	}{
		{"alone", false, 30_000, 3 * time.Second},
		{"newcomer extends", true, 30_000, 6 * time.Second},
		{"extension bounded by the rebalance timeout", true, 4_000, 4 * time.Second},
		{"no extension when the timeout is the delay", true, 3_000, 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
			req := joinReq(3, "d", "")
			req.RebalanceTimeoutMillis = tc.rebalance
			chans := []<-chan *kmsg.JoinGroupResponse{h.joinAsync(req)}
			h.waitJoining("d", 1)
			if tc.late {
				h.advance(time.Second)
				chans = append(chans, h.joinAsync(req))
				h.waitJoining("d", 2)
			}
			elapsed := map[bool]time.Duration{true: time.Second}[tc.late]
			for elapsed+time.Second < tc.done {
				h.advance(time.Second)
				elapsed += time.Second
				if st := h.state("d"); st != "PreparingRebalance" {
					t.Fatalf("at %v: %s, want still PreparingRebalance", elapsed, st)
				}
			}
			h.advance(tc.done - elapsed)
			for _, ch := range chans {
				if r := recv(t, ch); r.ErrorCode != 0 || r.Generation != 1 || len(r.Members) > 0 && len(r.Members) != len(chans) {
					t.Fatalf("join: %+v", r)
				}
			}
		})
	}
}
