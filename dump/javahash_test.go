package dump

import (
	"fmt"
	"strings"
	"testing"
)

// TestJavaComputeIfAbsentOrder checks the iteration order against orders
// printed by a java.util.HashMap<String, Integer> (OpenJDK 17) filled
// with computeIfAbsent, one call per key, in the same order.
func TestJavaComputeIfAbsentOrder(t *testing.T) {
	var big []string
	for i := 0; i < 30; i++ {
		big = append(big, fmt.Sprintf("/tmp/x/topic-%d/%020d.log", i%3, i*37))
	}
	var thirteen []string
	for i := 0; i < 13; i++ {
		thirteen = append(thirteen, fmt.Sprintf("/d/%d", i))
	}
	var retention []string
	for i := 100; i <= 220; i += 20 {
		retention = append(retention, fmt.Sprintf("/tmp/k28/corpus/data/retention-0/%020d.log", i))
	}
	// Nine keys with one hash ("Aa" and "BB" hash alike) make the table
	// of 16 grow twice as their bucket fills.
	var colliding []string
	for i := 0; i < 9; i++ {
		var sb strings.Builder
		for b := 0; b < 4; b++ {
			sb.WriteString([]string{"Aa", "BB"}[(i>>b)&1])
		}
		colliding = append(colliding, sb.String())
	}
	colliding = append(colliding, "zz", "q")
	for _, tc := range []struct {
		keys []string
		java string // the HashMap's keySet, joined with "|"
		hash int32  // String.hashCode of the first key
	}{
		{[]string{"/a/00000000000000000000.log", "/a/00000000000000000050.log", "/a/00000000000000000100.log"},
			"/a/00000000000000000050.log|/a/00000000000000000000.log|/a/00000000000000000100.log", 510000563},
		{[]string{"b", "a", "c", "Aa", "BB"}, "BB|Aa|a|b|c", 98},
		{nil, "", 0},
		{big, "/tmp/x/topic-1/00000000000000000814.log|/tmp/x/topic-2/00000000000000000518.log|/tmp/x/topic-1/00000000000000000703.log|/tmp/x/topic-0/00000000000000000666.log|/tmp/x/topic-0/00000000000000000444.log|/tmp/x/topic-2/00000000000000000962.log|/tmp/x/topic-1/00000000000000000148.log|/tmp/x/topic-2/00000000000000000074.log|/tmp/x/topic-1/00000000000000000370.log|/tmp/x/topic-2/00000000000000000407.log|/tmp/x/topic-0/00000000000000000555.log|/tmp/x/topic-2/00000000000000001073.log|/tmp/x/topic-1/00000000000000000259.log|/tmp/x/topic-2/00000000000000000740.log|/tmp/x/topic-0/00000000000000000222.log|/tmp/x/topic-1/00000000000000000481.log|/tmp/x/topic-2/00000000000000000851.log|/tmp/x/topic-0/00000000000000000333.log|/tmp/x/topic-0/00000000000000000999.log|/tmp/x/topic-2/00000000000000000185.log|/tmp/x/topic-1/00000000000000000037.log|/tmp/x/topic-0/00000000000000000000.log|/tmp/x/topic-0/00000000000000000888.log|/tmp/x/topic-0/00000000000000000111.log|/tmp/x/topic-0/00000000000000000777.log|/tmp/x/topic-1/00000000000000001036.log|/tmp/x/topic-2/00000000000000000629.log|/tmp/x/topic-1/00000000000000000925.log|/tmp/x/topic-2/00000000000000000296.log|/tmp/x/topic-1/00000000000000000592.log", 1411456081},
		{thirteen, "/d/0|/d/1|/d/8|/d/9|/d/6|/d/7|/d/4|/d/10|/d/5|/d/11|/d/2|/d/12|/d/3", 1497782},
		// A fourteenth call, for a key already there, finds thirteen keys
		// in a table of 16 and doubles it.
		{append(thirteen, "/d/0"), "/d/0|/d/1|/d/8|/d/9|/d/6|/d/7|/d/4|/d/5|/d/2|/d/3|/d/10|/d/11|/d/12", 1497782},
		{colliding, "zz|AaAaAaBB|BBBBBBAa|AaBBBBAa|BBAaBBAa|AaAaBBAa|BBBBAaAa|AaBBAaAa|BBAaAaAa|AaAaAaAa|q", -540425984},
		{retention, "/tmp/k28/corpus/data/retention-0/00000000000000000200.log|/tmp/k28/corpus/data/retention-0/00000000000000000140.log|/tmp/k28/corpus/data/retention-0/00000000000000000220.log|/tmp/k28/corpus/data/retention-0/00000000000000000180.log|/tmp/k28/corpus/data/retention-0/00000000000000000120.log|/tmp/k28/corpus/data/retention-0/00000000000000000100.log|/tmp/k28/corpus/data/retention-0/00000000000000000160.log", -592280088},
	} {
		if len(tc.keys) > 0 {
			if h := javaStringHash(tc.keys[0]); h != tc.hash {
				t.Errorf("hash of %q = %d, Java says %d", tc.keys[0], h, tc.hash)
			}
		}
		if got := strings.Join(javaComputeIfAbsentOrder(tc.keys), "|"); got != tc.java {
			t.Errorf("order of %d keys:\n got %s\nwant %s", len(tc.keys), got, tc.java)
		}
	}
}
