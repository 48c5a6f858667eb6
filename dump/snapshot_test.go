package dump

import (
	"testing"

	"github.com/partlog/partlog/snapshot"
)

func TestFirstSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ last, delta, want int32 }{
		{1, 1, 0},
		{11, 1, 10},
		{2, 5, 2147483645},
	} {
		e := snapshot.Entry{LastSequence: tc.last, OffsetDelta: tc.delta}
		if got := firstSequence(&e); got != tc.want {
			t.Errorf("firstSequence(%d, %d) = %d, want %d", tc.last, tc.delta, got, tc.want)
		}
	}
}
