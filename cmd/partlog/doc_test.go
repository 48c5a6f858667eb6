package main

import (
	"go/parser"
	"go/token"
	"io"
	"os"
	"strings"
	"testing"
)

// commandNames are the names of every command of the tree, subcommands
// as "mirror start"; cobra's own help is left out.
func commandNames() []string {
	var names []string
	for _, c := range newRootCommand(io.Discard, io.Discard).Commands() {
		if c.Name() == "help" {
			continue
		}
		if len(c.Commands()) == 0 {
			names = append(names, c.Name())
		}
		for _, sub := range c.Commands() {
			names = append(names, c.Name()+" "+sub.Name())
		}
	}
	return names
}

// TestPackageDocListsEveryCommand: the package documentation (go doc
// partlog/cmd/partlog) listed three of ten commands.
func TestPackageDocListsEveryCommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, name := range commandNames() {
		cmd, sub, _ := strings.Cut(name, " ")
		line := "partlog " + cmd
		if sub != "" && !strings.Contains(doc, "partlog "+name) {
			// Subcommands may share one line: "mirror start|stop|status".
			i := strings.Index(doc, line+" ")
			if i < 0 || !strings.Contains(strings.SplitN(doc[i:], "\n", 2)[0], sub) {
				t.Errorf("package doc does not list %q", "partlog "+name)
			}
			continue
		}
		if !strings.Contains(doc, line) {
			t.Errorf("package doc does not list %q", line)
		}
	}
}

// TestReadmeInstallAndCommands: the README had no go install line, and
// said go doc -all shows the examples (go doc never prints examples).
func TestReadmeInstallAndCommands(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	// The module is not on the Go module proxy: only a clone installs.
	if !strings.Contains(readme, "go install ./cmd/partlog") || strings.Contains(readme, "go install github.com/partlog/partlog/cmd/partlog@latest") {
		t.Error("README lacks the go install line that works from a clone, or gives one that cannot work")
	}
	if !strings.Contains(readme, "go run ./cmd/partlog demo") {
		t.Error("README's first command is not the demo run from a clone")
	}
	if strings.Contains(readme, "go doc -all") {
		t.Error("README says go doc -all shows the examples")
	}
	for _, name := range commandNames() {
		cmd, _, _ := strings.Cut(name, " ")
		if cmd != "completion" && !strings.Contains(readme, "`"+cmd+"`") && !strings.Contains(readme, "partlog "+cmd) {
			t.Errorf("README does not name %q", cmd)
		}
	}
}
