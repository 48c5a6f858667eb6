package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows one tick per partition directory on stderr, and only
// when stderr is a terminal: never on stdout, never when stderr is a pipe,
// a file or a test's buffer. The zero value (and nil) shows nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress returns a progress bar of n ticks described by desc, or nil
// when stderr is not a terminal or there is at most one directory.
func newProgress(stderr io.Writer, n int, desc string) *progress {
	if n < 2 || !isTerminal(stderr) {
		return nil
	}
	return &progress{bar: progressbar.NewOptions(n,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(0),
	)}
}

// clear removes the bar from the line before something else is printed
// (the next tick draws it again).
func (p *progress) clear() {
	if p != nil {
		_ = p.bar.Clear()
	}
}

// tick counts one partition directory done.
func (p *progress) tick() {
	if p != nil {
		_ = p.bar.Add(1)
	}
}

// finish completes and clears the bar.
func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Finish()
	}
}
