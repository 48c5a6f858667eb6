package filenames

import (
	"math"
	"testing"
)

func TestNameRoundTrip(t *testing.T) {
	kinds := []string{Log, Index, TimeIndex, TxnIndex, Snapshot}
	transients := []string{"", Deleted, Cleaned, Swap}
	for _, off := range []int64{0, 1, 18, 1234, 4096, 1<<31 - 1, 1 << 31, 1 << 40, math.MaxInt64 - 1, math.MaxInt64} {
		for _, k := range kinds {
			for _, tr := range transients {
				n := Name{Offset: off, Kind: k, Transient: tr}
				s := n.String()
				if len(s) != 20+len(k)+len(tr) {
					t.Fatalf("%+v formats as %q", n, s)
				}
				got, err := Parse(s)
				if err != nil || got != n {
					t.Fatalf("Parse(%q) = %+v, %v; want %+v", s, got, err, n)
				}
			}
		}
		name := Make(off, Snapshot)
		if got, ok := ParseSnapshot(name); !ok || got != off || len(name) != 29 {
			t.Errorf("ParseSnapshot(%q) = %d, %v; want %d", name, got, ok, off)
		}
	}
	if got := Make(18, Snapshot); got != "00000000000000000018.snapshot" {
		t.Fatalf("Make = %q", got)
	}
	if got := Make(math.MaxInt64, Snapshot); got != "09223372036854775807.snapshot" {
		t.Errorf("Make(MaxInt64) = %q", got)
	}
}

// TestNegativeOffsetNeverParses: a negative offset formats with its sign,
// which Parse rejects, so it can never name a file partlog reads back.
func TestNegativeOffsetNeverParses(t *testing.T) {
	for _, offset := range []int64{-1, -18, math.MinInt64} {
		name := Make(offset, Snapshot)
		if _, ok := ParseSnapshot(name); ok {
			t.Errorf("ParseSnapshot accepted %q for negative offset %d", name, offset)
		}
	}
	if got := Make(math.MinInt64, Snapshot); got != "-9223372036854775808.snapshot" {
		t.Errorf("Make(MinInt64) = %q", got)
	}
}

func TestParseRejects(t *testing.T) {
	for _, name := range []string{
		"", "0.log", "0000000000000000000.log", "000000000000000000000.log",
		"0000000000000000000a.log", "00000000000000000000.logx", "00000000000000000000",
		"00000000000000000000.log.tmp", "00000000000000000000.deleted", "99999999999999999999.log",
		"-0000000000000000001.log", "00000000000000000000.log.deleted.deleted",
		"\u0661\u0662000000000000000000.log", "leader-epoch-checkpoint", "partition.metadata",
	} {
		if n, err := Parse(name); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", name, n)
		}
	}
	for _, name := range []string{
		"",
		".snapshot",
		"18.snapshot",                       // not 20 digits (Kafka would take it; we do not)
		"0000000000000000018.snapshot",      // 19 digits
		"000000000000000000018.snapshot",    // 21 digits
		"00000000000000000018.snapshot.tmp", // a temporary file
		"00000000000000000018.snapshot.deleted",
		"00000000000000000018.log",
		"00000000000000000018.snapsho",
		"00000000000000000018.SNAPSHOT",
		"-0000000000000000018.snapshot",     // sign
		"+0000000000000000018.snapshot",     // sign
		" 0000000000000000018.snapshot",     // space
		"0000000000000000001a.snapshot",     // hex digit
		"00000000000000000１8.snapshot",      // fullwidth digit (non-ASCII)
		"0000000000000000000٨.snapshot",     // Arabic-Indic digit
		"00000000000000000１.snapshot",       // 17 digits + fullwidth one: 20 bytes
		"09223372036854775808.snapshot",     // MaxInt64 + 1
		"99999999999999999999.snapshot",     // overflows int64
		"dir/00000000000000000018.snapshot", // a path, not a name
	} {
		if off, ok := ParseSnapshot(name); ok {
			t.Errorf("ParseSnapshot(%q) = %d, true; want rejection", name, off)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("00000000000000000018.snapshot")
	f.Add("09223372036854775807.log.deleted")
	f.Add("18.snapshot")
	f.Fuzz(func(t *testing.T, name string) {
		n, err := Parse(name)
		if err != nil {
			return
		}
		if n.Offset < 0 || n.String() != name {
			t.Fatalf("Parse(%q) = %+v but it formats as %q", name, n, n.String())
		}
	})
}
