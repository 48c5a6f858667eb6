package snapshot

import (
	"math"
	"testing"
)

func TestFileNameRoundTrip(t *testing.T) {
	for _, offset := range []int64{0, 1, 18, 1234, 1<<31 - 1, 1 << 40, math.MaxInt64 - 1, math.MaxInt64} {
		name := FileName(offset)
		if len(name) != 29 {
			t.Errorf("FileName(%d) = %q, want 29 characters", offset, name)
		}
		got, ok := ParseFileName(name)
		if !ok || got != offset {
			t.Errorf("ParseFileName(%q) = %d, %v; want %d", name, got, ok, offset)
		}
	}
	if got := FileName(18); got != "00000000000000000018.snapshot" {
		t.Errorf("FileName(18) = %q", got)
	}
	if got := FileName(math.MaxInt64); got != "09223372036854775807.snapshot" {
		t.Errorf("FileName(MaxInt64) = %q", got)
	}
}

func TestFileNameNegative(t *testing.T) {
	for _, offset := range []int64{-1, -18, math.MinInt64} {
		name := FileName(offset)
		if _, ok := ParseFileName(name); ok {
			t.Errorf("ParseFileName accepted %q for negative offset %d", name, offset)
		}
	}
	if got := FileName(math.MinInt64); got != "-9223372036854775808.snapshot" {
		t.Errorf("FileName(MinInt64) = %q", got)
	}
}

func TestParseFileNameRejects(t *testing.T) {
	for _, name := range []string{
		"",
		".snapshot",
		"18.snapshot",                       // not 20 digits (Kafka would take it; we do not)
		"0000000000000000018.snapshot",      // 19 digits
		"000000000000000000018.snapshot",    // 21 digits
		"00000000000000000018.snapshot.tmp", // our temporary file
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
		if off, ok := ParseFileName(name); ok {
			t.Errorf("ParseFileName(%q) = %d, true; want rejection", name, off)
		}
	}
}

func FuzzParseFileName(f *testing.F) {
	f.Add("00000000000000000018.snapshot")
	f.Add("09223372036854775807.snapshot")
	f.Add("18.snapshot")
	f.Fuzz(func(t *testing.T, name string) {
		off, ok := ParseFileName(name)
		if !ok {
			return
		}
		if off < 0 || FileName(off) != name {
			t.Fatalf("ParseFileName(%q) = %d but FileName gives %q", name, off, FileName(off))
		}
	})
}
