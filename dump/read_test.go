package dump

import "testing"

// TestFailedCountsDamageOnly: the rule behind the exit status of both
// renderers. Every problem is damage except offsets that skip ahead,
// which compaction leaves; offsets that go back are damage.
func TestFailedCountsDamageOnly(t *testing.T) {
	gap := Problem{Position: 0, Kind: "nonConsecutiveOffsets"}
	for _, tc := range []struct {
		name     string
		problems []Problem
		pairs    [][2]int64
		want     bool
	}{
		{"nothing", nil, nil, false},
		{"a gap ahead", []Problem{gap}, [][2]int64{{3, 9}}, false},
		{"an offset back", []Problem{gap}, [][2]int64{{9, 3}}, true},
		{"an offset again", []Problem{gap}, [][2]int64{{9, 9}}, true},
		{"a bad crc", []Problem{{Kind: "crc"}}, nil, true},
		{"a gap and a bad control record", []Problem{gap, {Kind: "control"}}, [][2]int64{{3, 9}}, true},
	} {
		f := File{Problems: tc.problems, Pairs: Pairs{NonConsecutive: tc.pairs}}
		if got := f.Failed(); got != tc.want {
			t.Errorf("%s: Failed() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
