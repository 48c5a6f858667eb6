package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulateAll runs every scenario under every strategy in-process and
// checks the final table: the barrier column clean everywhere, and the
// comparison strategies showing mirror.md's predictions.
func TestSimulateAll(t *testing.T) {
	code, out, errOut := runCLI(t, "", "simulate", "--topology", "all", "--strategy", "all", "--dir", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	i := strings.Index(out, "\ntopology ")
	if i < 0 {
		t.Fatalf("no table in output:\n%s", out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out[i:]), "\n")[2:] {
		cols := strings.Split(line, "|")
		for j := range cols {
			cols[j] = strings.TrimSpace(cols[j])
		}
		rows[cols[0]] = cols[1:]
	}
	if len(rows) != 12 {
		t.Fatalf("%d table rows:\n%s", len(rows), out[i:])
	}
	for name, cols := range rows {
		if len(cols) != 5 || cols[0] != "clean" {
			t.Errorf("%s: %v (barrier must be clean)", name, cols)
		}
	}
	for _, c := range []struct {
		topology string
		col      int
		want     string
	}{
		{"active-passive", 1, "lost"},
		{"chain", 1, "corrupt(1)"},
		{"chain-keep-open", 1, "corrupt(2,3) phantom"},
		{"chain4", 1, "corrupt(1,2)"},
		{"chain4", 3, "clash"},
		{"chain-hop2", 2, "lost"},
		{"fan-in", 4, "phantom"},
		{"chain-rewire", 1, "clean"},
	} {
		if got := rows[c.topology][c.col]; got != c.want {
			t.Errorf("%s column %d: %q, want %q", c.topology, c.col, got, c.want)
		}
	}
	if !strings.Contains(out, `MirrorPidReset {"version":0,"sourceClusterId":"`) {
		t.Error("no barrier dump in the output")
	}
}

func TestSimulateJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "", "simulate", "--topology", "chain", "--strategy", "all", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d JSON lines, want 5", len(lines))
	}
	for _, l := range lines {
		var v struct {
			SchemaVersion int    `json:"schemaVersion"`
			Topology      string `json:"topology"`
			Strategy      string `json:"strategy"`
			Result        string `json:"result"`
			Cases         []int  `json:"corruptionCases"`
			Steps         []struct {
				Title string `json:"title"`
				Nodes []struct {
					Node string `json:"node"`
				} `json:"nodes"`
			} `json:"steps"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if v.SchemaVersion != 1 || v.Topology != "chain" || len(v.Steps) == 0 || len(v.Steps[0].Nodes) == 0 {
			t.Errorf("unexpected object %s", l)
		}
		if v.Strategy == "none" && (v.Result != "corrupt(1)" || len(v.Cases) != 1 || v.Cases[0] != 1) {
			t.Errorf("none: %s %v", v.Result, v.Cases)
		}
	}
}

func TestSimulateUsage(t *testing.T) {
	if code, _, _ := runCLI(t, "", "simulate", "--topology", "nope"); code != exitUsage {
		t.Errorf("unknown topology: exit %d", code)
	}
	if code, _, _ := runCLI(t, "", "simulate", "--strategy", "nope"); code != exitUsage {
		t.Errorf("unknown strategy: exit %d", code)
	}
}
