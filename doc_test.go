package partlog

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestPackageDocSpeaksToUsers: the package documentation (what go doc
// and pkg.go.dev show first) was the append path's invariants, a rejected
// design and the lock notes; a user needs what to call and what to
// expect, and the internals belong in ARCHITECTURE.md.
func TestPackageDocSpeaksToUsers(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, internal := range []string{"Rejected design", "lock order", "memmove", "ristretto", "fallocate"} {
		if strings.Contains(doc, internal) {
			t.Errorf("package doc speaks of %q", internal)
		}
	}
	for _, want := range []string{"partlog.Open(", "OpenDir", "Release()", "Sync(", "KafkaErrorCode", "ErrCorrupt", "View.Records", "ARCHITECTURE.md"} {
		if !strings.Contains(doc, want) {
			t.Errorf("package doc does not mention %q", want)
		}
	}
}
