package crashfs

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// script builds an op log by hand: node numbers are given, Seq follows.
type script []Op

func (s *script) add(o Op) *script {
	o.Seq = int64(len(*s) + 1)
	*s = append(*s, o)
	return s
}
func (s *script) mkdir(parent, ino uint64, name string) *script {
	return s.add(Op{Kind: OpCreate, Parent: parent, Ino: ino, Name: name, Type: TypeDir, Path: name})
}
func (s *script) create(parent, ino uint64, name string) *script {
	return s.add(Op{Kind: OpCreate, Parent: parent, Ino: ino, Name: name, Type: TypeFile, Path: name})
}
func (s *script) write(ino uint64, off int64, data string) *script {
	return s.add(Op{Kind: OpWrite, Ino: ino, Off: off, Data: []byte(data)})
}
func (s *script) setSize(ino uint64, n int64) *script {
	return s.add(Op{Kind: OpSetSize, Ino: ino, Size: n})
}
func (s *script) fsync(ino uint64) *script { return s.add(Op{Kind: OpFsync, Ino: ino}) }
func (s *script) unlink(parent, ino uint64, name string) *script {
	return s.add(Op{Kind: OpUnlink, Parent: parent, Ino: ino, Name: name})
}
func (s *script) rename(ino, from uint64, name string, to uint64, newName string) *script {
	return s.add(Op{Kind: OpRename, Ino: ino, Parent: from, Name: name, NewParent: to, NewName: newName})
}
func (s *script) settle() *script { return s.add(Op{Kind: OpSettle}) }

// tree reads a materialised image: path -> content ("/" for a directory).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "/"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func imageOf(t *testing.T, ops script, seed uint64) (map[string]string, *Image) {
	t.Helper()
	r := NewReplay(ops)
	dst, im := imageAt(t, r, r.Len()+1, seed)
	return tree(t, dst), im
}

// TestImageRules pins the model's rules, one case each, for a cut that
// loses every pending op and one that keeps them all.
func TestImageRules(t *testing.T) {
	const root = rootIno
	durableFile := func() *script { // /a = "hello", durable
		s := &script{}
		return s.create(root, 2, "a").write(2, 0, "hello").fsync(2).fsync(root)
	}
	durableDirs := func() *script { // /d1/f = "F", /d2, durable
		s := &script{}
		return s.mkdir(root, 3, "d1").mkdir(root, 4, "d2").create(3, 5, "f").write(5, 0, "F").settle()
	}
	for _, tc := range []struct {
		name       string
		ops        *script
		lose, keep map[string]string
	}{
		{"a synced file in a synced directory survives", durableFile(),
			map[string]string{"a": "hello"}, map[string]string{"a": "hello"}},
		{"a write after the fsync is pending", durableFile().write(2, 5, " world"),
			map[string]string{"a": "hello"}, map[string]string{"a": "hello world"}},
		{"a synced file whose directory is not synced has no name",
			(&script{}).create(root, 2, "a").write(2, 0, "x").fsync(2),
			map[string]string{}, map[string]string{"a": "x"}},
		{"an unsynced length change is pending", durableFile().setSize(2, 2),
			map[string]string{"a": "hello"}, map[string]string{"a": "he"}},
		{"a removal needs the directory's fsync", durableFile().unlink(root, 2, "a"),
			map[string]string{"a": "hello"}, map[string]string{}},
		{"a replacing rename needs the directory's fsync",
			durableFile().create(root, 3, "a.tmp").write(3, 0, "v2").fsync(3).rename(3, root, "a.tmp", root, "a"),
			map[string]string{"a": "hello"}, map[string]string{"a": "v2"}},
		{"the directory's fsync makes the rename durable",
			durableFile().create(root, 3, "a.tmp").write(3, 0, "v2").fsync(3).rename(3, root, "a.tmp", root, "a").fsync(root),
			map[string]string{"a": "v2"}, map[string]string{"a": "v2"}},
		{"a rename whose file was not synced keeps the name, not the bytes",
			durableFile().create(root, 3, "a.tmp").write(3, 0, "v2").rename(3, root, "a.tmp", root, "a").fsync(root),
			map[string]string{"a": ""}, map[string]string{"a": "v2"}},
		{"a rename between directories is durable through the target's fsync",
			durableDirs().rename(5, 3, "f", 4, "f").fsync(4),
			map[string]string{"d1": "/", "d2": "/", "d2/f": "F"}, map[string]string{"d1": "/", "d2": "/", "d2/f": "F"}},
		{"a rename between directories is durable through the source's fsync",
			durableDirs().rename(5, 3, "f", 4, "f").fsync(3),
			map[string]string{"d1": "/", "d2": "/", "d2/f": "F"}, map[string]string{"d1": "/", "d2": "/", "d2/f": "F"}},
		{"an earlier op of the other directory comes with the rename",
			durableDirs().create(3, 6, "g").rename(5, 3, "f", 4, "f").fsync(4),
			map[string]string{"d1": "/", "d1/g": "", "d2": "/", "d2/f": "F"},
			map[string]string{"d1": "/", "d1/g": "", "d2": "/", "d2/f": "F"}},
		{"a later op of the other directory does not",
			durableDirs().rename(5, 3, "f", 4, "f").create(3, 6, "g").fsync(4),
			map[string]string{"d1": "/", "d2": "/", "d2/f": "F"},
			map[string]string{"d1": "/", "d1/g": "", "d2": "/", "d2/f": "F"}},
		{"a directory removed durably takes its entries",
			durableDirs().unlink(3, 5, "f").unlink(root, 3, "d1").fsync(root),
			map[string]string{"d2": "/"}, map[string]string{"d2": "/"}},
		{"settle makes everything durable", (&script{}).create(root, 2, "a").write(2, 0, "x").settle(),
			map[string]string{"a": "x"}, map[string]string{"a": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for mode, want := range map[string]map[string]string{"lose": tc.lose, "keep": tc.keep} {
				got, im := imageOf(t, *tc.ops, seedFor(t, mode))
				if !maps.Equal(got, want) {
					t.Errorf("%s: image %q, want %q (%s)", mode, got, want, im)
				}
			}
		})
	}
}

// TestImageTornWrites: in mixed images a pending write is lost, kept or
// kept in part, sector by sector; every sector holds the old or the new
// bytes, never a mix, and some seed tears the write.
func TestImageTornWrites(t *testing.T) {
	s := &script{}
	s.create(rootIno, 2, "f").write(2, 0, strings.Repeat("a", 8*SectorSize)).fsync(2).fsync(rootIno)
	s.write(2, SectorSize/2, strings.Repeat("b", 6*SectorSize)) // not sector-aligned
	torn := false
	for seed := range uint64(200) {
		if ImageMode(seed) != "mixed" {
			continue
		}
		got, im := imageOf(t, *s, seed)
		f := got["f"]
		if len(f) != 8*SectorSize {
			t.Fatalf("seed %d: %d bytes (%s)", seed, len(f), im)
		}
		// The write's pieces: [256, 512), 5 whole sectors, [3072, 3328).
		pieces, bs := 0, 0
		for i := range 8 {
			sec := f[i*SectorSize : (i+1)*SectorSize]
			lo, hi := 0, SectorSize
			if i == 0 {
				lo = SectorSize / 2
			}
			if i == 6 {
				hi = SectorSize / 2
			}
			if i == 7 || strings.Trim(sec[:lo], "a") != "" || strings.Trim(sec[hi:], "a") != "" {
				if strings.Trim(sec, "a") != "" {
					t.Fatalf("seed %d: sector %d outside the write changed: %q", seed, i, sec)
				}
				continue
			}
			part := sec[lo:hi]
			switch {
			case strings.Trim(part, "b") == "":
				bs++
			case strings.Trim(part, "a") != "":
				t.Fatalf("seed %d: sector %d mixes old and new bytes (%s)", seed, i, im)
			}
			pieces++
		}
		if pieces != 7 {
			t.Fatalf("seed %d: %d pieces", seed, pieces)
		}
		if bs > 0 && bs < pieces {
			torn = true
		}
	}
	if !torn {
		t.Error("no seed tore the write")
	}
}

// TestImageDirectoryPrefixes: mixed images keep a prefix of each
// directory's pending entry operations, and a rename between two
// directories in both or neither.
func TestImageDirectoryPrefixes(t *testing.T) {
	s := &script{}
	s.mkdir(rootIno, 3, "d1").mkdir(rootIno, 4, "d2").create(3, 5, "f").settle()
	s.create(3, 6, "p").rename(5, 3, "f", 4, "f").create(4, 7, "q")
	for i := range 5 {
		s.create(rootIno, uint64(10+i), string(rune('a'+i)))
	}
	seen := map[string]bool{}
	for seed := range uint64(300) {
		if ImageMode(seed) != "mixed" {
			continue
		}
		got, im := imageOf(t, *s, seed)
		_, f1 := got["d1/f"]
		_, f2 := got["d2/f"]
		_, p := got["d1/p"]
		_, q := got["d2/q"]
		if f1 == f2 || (q && !f2) || (f2 && !p) {
			t.Fatalf("seed %d: d1/f %v, d2/f %v, d1/p %v, d2/q %v: not a prefix of each directory (%s)", seed, f1, f2, p, q, im)
		}
		k := 0
		for k < 5 && got[string(rune('a'+k))] == "" {
			if _, ok := got[string(rune('a'+k))]; !ok {
				break
			}
			k++
		}
		for j := k; j < 5; j++ {
			if _, ok := got[string(rune('a'+j))]; ok {
				t.Fatalf("seed %d: root kept %c but not %c (%s)", seed, 'a'+j, 'a'+k, im)
			}
		}
		seen[strings.Repeat("f", btoi(f2))+strings.Repeat("p", btoi(p))] = true
	}
	if len(seen) < 3 {
		t.Errorf("mixed seeds produced only %v", seen)
	}
}

// TestImageReplayable: the same cut and seed give the same tree, and a
// replay moves forward only.
func TestImageReplayable(t *testing.T) {
	s := &script{}
	s.create(rootIno, 2, "f").write(2, 0, strings.Repeat("x", 3000)).fsync(rootIno)
	s.write(2, 100, strings.Repeat("y", 2000)).create(rootIno, 3, "g")
	for seed := range uint64(20) {
		a, _ := imageOf(t, *s, seed)
		b, _ := imageOf(t, *s, seed)
		if !maps.Equal(a, b) {
			t.Fatalf("seed %d: two images differ", seed)
		}
	}
	r := NewReplay(*s)
	if err := r.To(3); err != nil {
		t.Fatal(err)
	}
	if err := r.To(2); err == nil {
		t.Error("a replay moved backwards")
	}
	if err := r.To(r.Len() + 2); err == nil {
		t.Error("a replay moved past the end")
	}
}

// TestSparseContent: holes read as zeros, a shrink forgets the bytes
// past the new end, and a materialised copy keeps holes.
func TestSparseContent(t *testing.T) {
	var s sparse
	s.writeAt([]byte("abc"), 10000)
	if s.size != 10003 || len(s.pages) != 1 {
		t.Fatalf("size %d, %d pages", s.size, len(s.pages))
	}
	b := s.bytes()
	if !bytes.Equal(b[10000:], []byte("abc")) || bytes.Count(b[:10000], []byte{0}) != 10000 {
		t.Fatal("content")
	}
	s.truncate(10001)
	s.truncate(20000)
	if b := s.bytes(); b[10000] != 'a' || b[10001] != 0 || b[10002] != 0 {
		t.Fatalf("bytes past a shrink came back: %q", b[10000:10003])
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := writeSparse(p, &s); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Size() != 20000 {
		t.Fatalf("%v %v", st, err)
	}
}
