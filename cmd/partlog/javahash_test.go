package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestJavaHashMapOrder checks the iteration order against orders printed
// by a java.util.HashMap<String, Integer> (OpenJDK 17) filled with the
// same keys in the same order.
func TestJavaHashMapOrder(t *testing.T) {
	var big []string
	for i := 0; i < 30; i++ {
		big = append(big, fmt.Sprintf("/tmp/x/topic-%d/%020d.log", i%3, i*37))
	}
	// Nine keys with one hash ("Aa" and "BB" hash alike) make the table
	// of 16 grow before their bucket would hold a ninth.
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
		{[]string{"b", "a", "c", "Aa", "BB"}, "Aa|BB|a|b|c", 98},
		{nil, "", 0},
		{big, "/tmp/x/topic-1/00000000000000000814.log|/tmp/x/topic-2/00000000000000000518.log|/tmp/x/topic-1/00000000000000000703.log|/tmp/x/topic-0/00000000000000000666.log|/tmp/x/topic-0/00000000000000000444.log|/tmp/x/topic-1/00000000000000000148.log|/tmp/x/topic-2/00000000000000000962.log|/tmp/x/topic-2/00000000000000000074.log|/tmp/x/topic-1/00000000000000000370.log|/tmp/x/topic-2/00000000000000000407.log|/tmp/x/topic-0/00000000000000000555.log|/tmp/x/topic-1/00000000000000000259.log|/tmp/x/topic-2/00000000000000001073.log|/tmp/x/topic-0/00000000000000000222.log|/tmp/x/topic-2/00000000000000000740.log|/tmp/x/topic-1/00000000000000000481.log|/tmp/x/topic-0/00000000000000000333.log|/tmp/x/topic-2/00000000000000000851.log|/tmp/x/topic-0/00000000000000000999.log|/tmp/x/topic-2/00000000000000000185.log|/tmp/x/topic-1/00000000000000000037.log|/tmp/x/topic-0/00000000000000000000.log|/tmp/x/topic-0/00000000000000000888.log|/tmp/x/topic-0/00000000000000000111.log|/tmp/x/topic-0/00000000000000000777.log|/tmp/x/topic-1/00000000000000001036.log|/tmp/x/topic-2/00000000000000000629.log|/tmp/x/topic-2/00000000000000000296.log|/tmp/x/topic-1/00000000000000000925.log|/tmp/x/topic-1/00000000000000000592.log", 1411456081},
		{colliding, "zz|AaAaAaAa|BBAaAaAa|AaBBAaAa|BBBBAaAa|AaAaBBAa|BBAaBBAa|AaBBBBAa|BBBBBBAa|AaAaAaBB|q", -540425984},
	} {
		if len(tc.keys) > 0 {
			if h := javaStringHash(tc.keys[0]); h != tc.hash {
				t.Errorf("hash of %q = %d, Java says %d", tc.keys[0], h, tc.hash)
			}
		}
		if got := strings.Join(javaHashMapOrder(tc.keys), "|"); got != tc.java {
			t.Errorf("order of %d keys:\n got %s\nwant %s", len(tc.keys), got, tc.java)
		}
	}
}
