package segment

import (
	"math"
	"testing"
)

func TestFileNameRoundTrip(t *testing.T) {
	kinds := []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix, SnapshotSuffix}
	transients := []string{"", DeletedSuffix, CleanedSuffix, SwapSuffix}
	for _, off := range []int64{0, 1, 18, 4096, 1 << 31, math.MaxInt64} {
		for _, k := range kinds {
			for _, tr := range transients {
				n := FileName{Offset: off, Kind: k, Transient: tr}
				s := n.String()
				if len(s) != 20+len(k)+len(tr) {
					t.Fatalf("%+v formats as %q", n, s)
				}
				got, err := ParseFileName(s)
				if err != nil || got != n {
					t.Fatalf("ParseFileName(%q) = %+v, %v; want %+v", s, got, err, n)
				}
			}
		}
	}
	if got := MakeFileName(18, SnapshotSuffix); got != "00000000000000000018.snapshot" {
		t.Fatalf("MakeFileName = %q", got)
	}
}

func TestParseFileNameRejects(t *testing.T) {
	for _, name := range []string{
		"", "0.log", "0000000000000000000.log", "000000000000000000000.log",
		"0000000000000000000a.log", "00000000000000000000.logx", "00000000000000000000",
		"00000000000000000000.log.tmp", "00000000000000000000.deleted", "99999999999999999999.log",
		"-0000000000000000001.log", "00000000000000000000.log.deleted.deleted",
		"\u0661\u0662000000000000000000.log", "leader-epoch-checkpoint", "partition.metadata",
	} {
		if n, err := ParseFileName(name); err == nil {
			t.Errorf("ParseFileName(%q) = %+v, want an error", name, n)
		}
	}
}
