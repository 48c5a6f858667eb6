package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestProgressOnlyOnTerminal: no bar unless stderr is a terminal, and a
// nil bar is safe to use.
func TestProgressOnlyOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	if p := newProgress(&buf, 10, "x"); p != nil {
		t.Fatal("progress bar on a buffer")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f, 10, "x"); p != nil {
		t.Fatal("progress bar on a regular file")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if p := newProgress(w, 10, "x"); p != nil {
		t.Fatal("progress bar on a pipe")
	}
	var p *progress
	p.clear()
	p.tick()
	p.finish()
	// Commands over several directories print nothing extra on stderr.
	root := t.TempDir()
	dir := makeLog(t, root, 3)
	other := filepath.Join(filepath.Dir(dir), "t-1")
	if err := os.CopyFS(other, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "", "verify", filepath.Dir(dir)); code != exitOK || errOut != "" {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
}
