package main

import (
	"strings"
	"testing"
)

// TestBareInvocation: bare `partlog` prints the help and exits 16 (a usage
// error, as every other one); `partlog help` and -h stay 0.
func TestBareInvocation(t *testing.T) {
	code, out, _ := runCLI(t, "")
	if code != exitUsage || !strings.Contains(out, "Available Commands:") || !strings.Contains(out, "Exit status") {
		t.Errorf("bare partlog: exit %d:\n%s", code, out)
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		if code, out, _ := runCLI(t, "", args...); code != exitOK || !strings.Contains(out, "Available Commands:") {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	if code, _, _ := runCLI(t, "", "no-such-command"); code != exitUsage {
		t.Errorf("unknown command: exit %d", code)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "", "--version")
	if code != exitOK || !strings.HasPrefix(out, "partlog ") || strings.TrimSpace(out) == "partlog" {
		t.Errorf("exit %d: %q", code, out)
	}
	if v := version(); v == "" {
		t.Error("empty version")
	}
}

// TestHelpListsExitCodesAndFiles: every command's help says what it
// reads and what its exit codes mean.
func TestHelpListsExitCodesAndFiles(t *testing.T) {
	root := newRootCommand(nil, nil)
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		for _, want := range []string{"Reads:", "Exit status:", "16 usage error"} {
			if !strings.Contains(c.Long, want) {
				t.Errorf("%s: help lacks %q", c.Name(), want)
			}
		}
	}
}
