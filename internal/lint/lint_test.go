package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/partlog/partlog"

// allowed lists, for each package of ours, the packages of ours it may
// import directly (ARCHITECTURE.md, "Who may import whom"). A package
// missing from the table may not exist: the test fails so that the table
// is extended deliberately. "*" allows every package of ours.
var allowed = map[string][]string{
	"internal/unsafeutil": {},
	"internal/fsutil":     {"internal/filenames", "internal/testhook"},
	"internal/crc32c":     {},
	"internal/corrupt":    {},
	"internal/filenames":  {},
	"internal/mmapfile":   {"internal/fsutil", "internal/unsafeutil", "internal/testhook", "internal/testutil"},
	"internal/prefault":   {"internal/mmapfile", "internal/testhook", "internal/testutil"},
	"internal/checkpoint": {"internal/corrupt", "internal/fsutil", "internal/filenames", "internal/unsafeutil"},
	"internal/testutil":   {},
	"internal/lint":       {},
	"internal/testhook":   {},
	"internal/crashfs":    {"internal/testutil"},
	"batch":               {"internal/corrupt", "internal/crc32c", "internal/unsafeutil"},
	"snapshot":            {"internal/corrupt", "internal/crc32c", "internal/fsutil", "internal/filenames", "internal/unsafeutil"},
	"index":               {"internal/corrupt", "internal/mmapfile", "internal/unsafeutil"},
	"segment":             {"batch", "index", "internal/fsutil", "internal/filenames", "internal/mmapfile", "internal/prefault", "internal/unsafeutil", "internal/testhook"},
	"producerstate":       {"batch", "snapshot", "index", "internal/filenames", "internal/unsafeutil", "internal/testutil"},
	"recovery": {"batch", "index", "segment", "producerstate", "snapshot",
		"internal/fsutil", "internal/filenames", "internal/mmapfile", "internal/checkpoint", "internal/unsafeutil", "internal/testutil"},
	"cleaner": {"batch", "index", "segment", "internal/fsutil", "internal/filenames", "internal/testhook", "internal/unsafeutil", "internal/testutil"},
	"": {"batch", "index", "segment", "producerstate", "snapshot", "recovery", "cleaner",
		"internal/corrupt", "internal/fsutil", "internal/filenames", "internal/mmapfile", "internal/checkpoint", "internal/unsafeutil", "internal/testhook",
		"internal/crashfs", "internal/testutil"},
	"mirror":       {"", "batch", "snapshot", "internal/checkpoint", "internal/corrupt", "internal/crc32c", "internal/testutil", "internal/fsutil", "internal/unsafeutil", "internal/testhook", "internal/crashfs"},
	"mirror/sim":   {"", "mirror", "batch", "producerstate", "snapshot", "internal/checkpoint", "internal/fsutil", "internal/unsafeutil"},
	"server":       {"", "mirror", "batch", "producerstate", "internal/checkpoint", "internal/fsutil", "internal/testhook", "internal/testutil"},
	"server/group": {"internal/checkpoint", "internal/corrupt", "internal/crc32c", "internal/fsutil", "internal/crashfs"},
	"dump":         {"batch", "index", "snapshot", "internal/crc32c", "internal/filenames", "internal/unsafeutil"},
	"cmd/partlog":  {"*"},
	"bench":        {"*"},
}

type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	touchSources(t)
	cmd := exec.Command("go", "list", "-deps=false", "-json", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []goPackage
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// touchSources opens every Go file of the module, so that go test's
// cache, which records the files a test opens, reruns these tests when
// any of them changes (go list runs in a child process it cannot see).
func touchSources(t *testing.T) {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	err = filepath.WalkDir(strings.TrimSpace(string(root)), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != strings.TrimSpace(string(root)) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") || d.Name() == "go.mod" {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ours returns the module-relative name of an import path of ours.
func ours(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// TestImportGraph fails when a package imports one of ours that
// ARCHITECTURE.md does not allow (lower packages never import higher
// ones; batch imports nothing of ours but internal/unsafeutil). Test
// files are held to the same rule.
func TestImportGraph(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := ours(p.ImportPath)
		if _, known := allowed[name]; !known {
			t.Errorf("package %q is not in the import table of internal/lint; add it with the edges ARCHITECTURE.md allows", p.ImportPath)
			continue
		}
		for _, v := range importViolations(name, slices.Concat(p.Imports, p.TestImports, p.XTestImports), p.Deps) {
			t.Error(v)
		}
	}
}

// importViolations checks the package of ours named name (module-relative)
// against the table: each package of ours it imports directly (code or
// tests) must be listed for it, and each one it depends on only
// indirectly must be listed or reachable through listed packages. So a
// package may not import directly what it is only allowed to reach
// through another (mirror uses segment through partlog, never itself).
func importViolations(name string, direct, deps []string) []string {
	rules := allowed[name]
	if slices.Contains(rules, "*") {
		return nil
	}
	var out []string
	isDirect := map[string]bool{}
	for _, imp := range direct {
		dep, isOurs := ours(imp)
		if !isOurs || dep == name {
			continue
		}
		isDirect[dep] = true
		if !slices.Contains(rules, dep) {
			out = append(out, fmt.Sprintf("%s imports %s directly, which ARCHITECTURE.md does not allow", path.Join(module, name), imp))
		}
	}
	for _, imp := range deps {
		dep, isOurs := ours(imp)
		if !isOurs || dep == name || isDirect[dep] {
			continue
		}
		if !slices.Contains(rules, dep) && !transitivelyAllowed(rules, dep) {
			out = append(out, fmt.Sprintf("%s depends on %s through its imports, which ARCHITECTURE.md does not allow", path.Join(module, name), imp))
		}
	}
	return out
}

// TestImportRuleDirectVsIndirect pins the rule of importViolations on
// made-up import lists: the transitive allowance covers indirect
// dependencies only.
func TestImportRuleDirectVsIndirect(t *testing.T) {
	m := func(rel ...string) []string {
		out := make([]string, len(rel))
		for i, r := range rel {
			out[i] = path.Join(module, r)
		}
		return out
	}
	root := []string{module}
	for _, tc := range []struct {
		name         string
		pkg          string
		direct, deps []string
		bad          int
	}{
		{"mirror reaches segment through partlog", "mirror", root, m("segment", "index", "batch"), 0},
		{"mirror imports segment directly", "mirror", append(m("segment"), module), m("segment"), 1},
		{"mirror's test imports segment directly", "mirror", m("segment"), nil, 1},
		{"segment imports batch directly", "segment", m("batch", "index"), m("batch", "index", "internal/mmapfile"), 0},
		{"segment imports internal/unsafeutil directly", "segment", m("internal/unsafeutil"), nil, 0},
		{"producerstate imports segment", "producerstate", m("segment"), m("segment"), 1},
		{"batch depends on index indirectly", "batch", nil, m("index"), 1},
		{"index imports internal/testhook directly", "index", m("internal/testhook"), m("internal/testhook"), 1},
		{"index reaches internal/testhook through mmapfile", "index", m("internal/mmapfile"), m("internal/mmapfile", "internal/testhook"), 0},
		{"cmd/partlog imports anything", "cmd/partlog", m("segment", "recovery", "internal/testhook"), nil, 0},
		{"standard library and others are not checked", "batch", []string{"fmt", "golang.org/x/sys/unix"}, []string{"os"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := importViolations(tc.pkg, tc.direct, tc.deps)
			if len(got) != tc.bad {
				t.Fatalf("%d violations %q, want %d", len(got), got, tc.bad)
			}
		})
	}
}

// transitivelyAllowed reports whether dep is reachable through packages
// that rules allow, i.e. an indirect dependency that the table permits.
func transitivelyAllowed(rules []string, dep string) bool {
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(p string) bool {
		if seen[p] {
			return false
		}
		seen[p] = true
		for _, next := range allowed[p] {
			if next == dep || next == "*" || walk(next) {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		if r == dep || walk(r) {
			return true
		}
	}
	return false
}

// testOnly lists the packages of ours that only tests may import: the
// engine never depends on them.
var testOnly = []string{"internal/crashfs"}

// TestTestOnlyPackages fails when a package's code (not its tests)
// imports a package of testOnly.
func TestTestOnlyPackages(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if dep, ok := ours(imp); ok && slices.Contains(testOnly, dep) {
				t.Errorf("%s imports %s, which only tests may import", p.ImportPath, imp)
			}
		}
	}
}

// TestUnsafeConfined fails when a package other than internal/unsafeutil
// imports "unsafe" (in its code or its tests).
func TestUnsafeConfined(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := ours(p.ImportPath)
		if name == "internal/unsafeutil" {
			continue
		}
		if slices.Contains(p.Imports, "unsafe") || slices.Contains(p.TestImports, "unsafe") || slices.Contains(p.XTestImports, "unsafe") {
			t.Errorf("%s imports unsafe; only internal/unsafeutil may", p.ImportPath)
		}
	}
}

// TestArchitectureGraph fails when the import graph of ARCHITECTURE.md
// ("## Import graph", one "package -> imports" line each) and the table
// above disagree: the document says what the table enforces.
func TestArchitectureGraph(t *testing.T) {
	b, err := os.ReadFile("../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, after, ok := strings.Cut(doc, "## Import graph")
	if !ok {
		t.Fatal("ARCHITECTURE.md has no import graph section")
	}
	_, after, _ = strings.Cut(after, "```\n")
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("the import graph section has no code block")
	}
	name := func(s string) string {
		if s = strings.TrimSpace(s); s == "partlog (root)" {
			return ""
		}
		return s
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		pkg, deps, ok := strings.Cut(line, "->")
		if !ok {
			t.Errorf("graph line %q is not \"package -> imports\"", line)
			continue
		}
		p := name(pkg)
		seen[p] = true
		want, known := allowed[p]
		if !known {
			t.Errorf("ARCHITECTURE.md lists %q, which the table does not", p)
			continue
		}
		var got []string
		if d := strings.TrimSpace(deps); d != "(none)" {
			for _, x := range strings.Split(d, ",") {
				got = append(got, name(x))
			}
		}
		if !slices.Equal(sortedCopy(got), sortedCopy(want)) {
			t.Errorf("%q: ARCHITECTURE.md says %q, the table %q", p, got, want)
		}
	}
	for p := range allowed {
		if !seen[p] {
			t.Errorf("ARCHITECTURE.md's graph lacks %q", p)
		}
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
