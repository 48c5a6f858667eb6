package partlog

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// nonRegularFixture builds a cleanly closed partition of three segments
// and returns its directory and a directory outside it.
func nonRegularFixture(t *testing.T) (dir, outside string, leo int64) {
	t.Helper()
	root := t.TempDir()
	dir, outside = filepath.Join(root, "t-0"), filepath.Join(root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, smallOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	b := makeBatch(t, 3, 400, 1)
	for len(l.Segments()) < 3 {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	leo = l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, outside, leo
}

// snapshotTree records name, mode and content of every entry of dir (links
// by their target), to check that nothing outside the partition changed.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := st.Mode().String()
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + target
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTrees(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %s changed (%.60q -> %.60q)", what, k, v, b[k])
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s: %s appeared", what, k)
		}
	}
}

// TestNonRegularSegmentNames: symbolic links, directories and dangling
// links named like segments, indexes, transient files or snapshots are
// never followed, written, preallocated, resized or removed; the partition
// opens (after a clean shutdown and after a crash), serves reads and
// appends, and reopens; recovery reports the names it ignored.
func TestNonRegularSegmentNames(t *testing.T) {
	type setup func(t *testing.T, dir, outside string, segs []int64) (names []string)
	link := func(name, target string) setup {
		return func(t *testing.T, dir, outside string, segs []int64) []string {
			p := filepath.Join(outside, target)
			if _, err := os.Stat(filepath.Dir(p)); err == nil {
				if err := os.WriteFile(p, []byte("precious bytes outside the partition"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			return []string{name}
		}
	}
	// replaceByLink moves a segment file outside and links to it.
	replaceByLink := func(seg int, kind string) setup {
		return func(t *testing.T, dir, outside string, segs []int64) []string {
			name := filenames.Make(segs[(seg+len(segs))%len(segs)], kind)
			p := filepath.Join(outside, name)
			if err := os.Rename(filepath.Join(dir, name), p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			return []string{name}
		}
	}
	mkdir := func(names ...string) setup {
		return func(t *testing.T, dir, outside string, segs []int64) []string {
			for _, n := range names {
				if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
					t.Fatal(err)
				}
				// A file inside, so that a removal of the directory
				// would be seen too.
				if err := os.WriteFile(filepath.Join(dir, n, "keep"), []byte("k"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return names
		}
	}
	const far = "00000000000000099999"
	for _, tc := range []struct {
		name  string
		setup setup
		// rebuilt: the name may be replaced by a rebuilt regular file (a
		// link in place of an index of a live segment; the link itself,
		// not its target, is replaced).
		rebuilt bool
	}{
		{"log-link-beyond-data", link(far+".log", "file"), false},
		{"index-link-beyond-data", link(far+".index", "file"), false},
		{"snapshot-link", link(far+".snapshot", "file"), false},
		{"dangling-log-link", link(far+".log", "absent/file"), false},
		{"active-index-link", replaceByLink(-1, filenames.Index), true},
		{"active-timeindex-link", replaceByLink(-1, filenames.TimeIndex), true},
		{"sealed-index-link", replaceByLink(0, filenames.Index), true},
		{"log-dir", mkdir(far + ".log"), false},
		{"deleted-and-tmp-dirs", mkdir("00000000000000000000.log.deleted", "00000000000000000000.log.tmp",
			"00000000000000000000.index.swap", "00000000000000000000.snapshot"), false},
	} {
		for _, clean := range []bool{true, false} {
			name := tc.name + map[bool]string{true: "/clean", false: "/crashed"}[clean]
			t.Run(name, func(t *testing.T) {
				dir, outside, leo := nonRegularFixture(t)
				segsBefore := segmentBases(t, dir)
				names := tc.setup(t, dir, outside, segsBefore)
				before := snapshotTree(t, outside)
				o := smallOpts(t)
				o.CleanShutdown = clean
				l, err := Open(dir, o)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if l.LogEndOffset() != leo {
					t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
				}
				sameTrees(t, "while open", before, snapshotTree(t, outside))
				if !clean {
					rep := l.RecoveryReport()
					for _, n := range names {
						found := false
						for _, p := range rep.Problems {
							found = found || p.File == n
						}
						if !found && !tc.rebuilt {
							t.Errorf("%s not reported: %+v", n, rep.Problems)
						}
					}
				}
				if _, err := l.AppendAsLeader(makeBatch(t, 2, 100, 1), 0); err != nil {
					t.Fatalf("append: %v", err)
				}
				if err := l.Check(); err != nil {
					t.Fatalf("read back: %v", err)
				}
				if err := l.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				sameTrees(t, "after open", before, snapshotTree(t, outside))
				for _, n := range names {
					st, err := os.Lstat(filepath.Join(dir, n))
					if err != nil {
						t.Fatalf("%s removed: %v", n, err)
					}
					if !tc.rebuilt && st.Mode().IsRegular() {
						t.Fatalf("%s replaced by a regular file", n)
					}
				}
				// Reopen, clean and then as after a crash.
				for _, again := range []bool{true, false} {
					o := smallOpts(t)
					o.CleanShutdown = again
					l, err = Open(dir, o)
					if err != nil {
						t.Fatalf("reopen (clean %v): %v", again, err)
					}
					if l.LogEndOffset() != leo+2 {
						t.Fatalf("reopen: LEO %d, want %d", l.LogEndOffset(), leo+2)
					}
					if err := l.Check(); err != nil {
						t.Fatalf("reopen: read back: %v", err)
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
				sameTrees(t, "after reopen", before, snapshotTree(t, outside))
			})
		}
	}
}

func segmentBases(t *testing.T, dir string) []int64 {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, de := range des {
		if n, err := filenames.Parse(de.Name()); err == nil && n.Kind == filenames.Log && n.Transient == "" {
			bases = append(bases, n.Offset)
		}
	}
	if len(bases) < 3 {
		t.Fatalf("segments %v", bases)
	}
	return bases
}
