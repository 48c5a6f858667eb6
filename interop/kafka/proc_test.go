package kafka

import (
	"strings"
	"testing"
	"time"
)

func TestParseUsage(t *testing.T) {
	status := "Name:\tjava\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   81920 kB\nRssFile:\t   20480 kB\n"
	tests := []struct {
		name    string
		stat    string
		status  string
		want    Usage
		wantErr string
	}{
		{
			name:   "plain name",
			stat:   "42 (java) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 30 0 1000 0 0",
			status: status,
			want:   Usage{CPU: 3250 * time.Millisecond, RSS: 100 << 20, PeakRSS: 200 << 20, AnonRSS: 80 << 20, FileRSS: 20 << 20},
		},
		{
			name:   "name with spaces and parentheses",
			stat:   "42 (a) b (c) R 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 30 0 1000 0 0",
			status: "",
			want:   Usage{CPU: 30 * time.Millisecond},
		},
		{name: "no name", stat: "42 java S 1", wantErr: "no command name"},
		{name: "short", stat: "42 (java) S 1 42", wantErr: "5 fields"},
		{name: "bad utime", stat: "42 (java) S 1 42 42 0 -1 4194560 100 0 0 0 x 75 0", wantErr: "utime"},
		{name: "bad status", stat: "42 (java) S 1 42 42 0 -1 4194560 100 0 0 0 1 1 0", status: "VmRSS: lots kB\n", wantErr: "VmRSS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseUsage([]byte(tc.stat), []byte(tc.status))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestReadUsageSelf reads this process: CPU grows with work, the peak is
// at least the resident set, and a reset peak is below a peak that
// included memory since given back.
func TestReadUsageSelf(t *testing.T) {
	before, err := ReadUsage(0)
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 || before.PeakRSS < before.RSS || before.AnonRSS <= 0 {
		t.Fatalf("implausible usage %+v", before)
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after, err := ReadUsage(0)
	if err != nil {
		t.Fatal(err)
	}
	if after.CPU <= before.CPU {
		t.Fatalf("CPU %v after 100 ms of work, %v before (%d)", after.CPU, before.CPU, x)
	}
	if err := ResetPeakRSS(0); err != nil {
		t.Fatal(err)
	}
	reset, err := ReadUsage(0)
	if err != nil {
		t.Fatal(err)
	}
	if reset.PeakRSS > after.PeakRSS+(8<<20) {
		t.Fatalf("peak %d after the reset, %d before", reset.PeakRSS, after.PeakRSS)
	}
	if _, err := ReadUsage(1 << 30); err == nil {
		t.Fatal("usage of a process that cannot exist")
	}
}
