package crashfs

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
)

// progTree is the tree a generated program builds, kept as the file
// system would: the reference an image is compared with.
type progTree struct {
	dirs    map[uint64]map[string]uint64 // directory -> entries
	files   map[uint64][]byte
	nextIno uint64
}

// program turns fuzz bytes into a valid op log over a few names in two
// directories (creates, writes, length changes, fsyncs, unlinks, renames
// within and between the directories), and returns the tree it leaves.
func program(prog []byte) ([]Op, *progTree) {
	tr := &progTree{dirs: map[uint64]map[string]uint64{rootIno: {}}, files: map[uint64][]byte{}, nextIno: 3}
	var s script
	s.mkdir(rootIno, 2, "d")
	tr.dirs[rootIno]["d"] = 2
	tr.dirs[2] = map[string]uint64{}
	names := []string{"a", "b", "c"}
	dirOf := func(b byte) uint64 { return uint64(1 + b%2) }
	next := func() byte {
		if len(prog) == 0 {
			return 0
		}
		b := prog[0]
		prog = prog[1:]
		return b
	}
	for len(prog) > 0 {
		op, x, y := next(), next(), next()
		d, name := dirOf(x), names[int(x/2)%len(names)]
		ino, exists := tr.dirs[d][name]
		switch op % 7 {
		case 0: // create
			if !exists {
				ino = tr.nextIno
				tr.nextIno++
				s.create(d, ino, name)
				tr.dirs[d][name] = ino
				tr.files[ino] = nil
			}
		case 1, 2: // write y bytes at a page-crossing offset
			if exists {
				off := int64(x%8)*1000 + int64(y)
				data := bytes.Repeat([]byte{'A' + y%26}, 1+int(y)*7)
				s.write(ino, off, string(data))
				f := tr.files[ino]
				if end := off + int64(len(data)); end > int64(len(f)) {
					f = append(f, make([]byte, end-int64(len(f)))...)
				}
				copy(f[off:], data)
				tr.files[ino] = f
			}
		case 3: // length change
			if exists {
				n := int64(y) * 37
				s.setSize(ino, n)
				f := tr.files[ino]
				if n <= int64(len(f)) {
					f = f[:n]
				} else {
					f = append(f, make([]byte, n-int64(len(f)))...)
				}
				tr.files[ino] = f
			}
		case 4: // fsync of the file, or of the directory
			if exists && y%2 == 0 {
				s.fsync(ino)
			} else {
				s.fsync(d)
			}
		case 5: // unlink
			if exists {
				s.unlink(d, ino, name)
				delete(tr.dirs[d], name)
			}
		case 6: // rename, over a file or not
			to, toName := dirOf(y), names[int(y/2)%len(names)]
			if exists && (to != d || toName != name) {
				s.rename(ino, d, name, to, toName)
				delete(tr.dirs[d], name)
				tr.dirs[to][toName] = ino
			}
		}
	}
	return s, tr
}

// want returns the tree as tree() reads a materialised image.
func (tr *progTree) want() map[string]string {
	out := map[string]string{"d": "/"}
	for _, d := range []uint64{rootIno, 2} {
		for name, ino := range tr.dirs[d] {
			if _, isDir := tr.dirs[ino]; isDir {
				continue
			}
			p := name
			if d == 2 {
				p = filepath.Join("d", name)
			}
			out[p] = string(tr.files[ino])
		}
	}
	return out
}

// FuzzReplay: any valid op log replays without error, an image that
// keeps every pending op is the tree the ops built, and after a settle
// every image is, whatever its seed.
func FuzzReplay(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 200, 4, 0, 0, 6, 0, 3}, uint64(1), false)
	f.Add([]byte{0, 1, 0, 2, 1, 255, 3, 1, 9, 6, 1, 0, 5, 0, 0, 4, 1, 1}, uint64(7), true)
	f.Add(bytes.Repeat([]byte{0, 3, 1, 2, 3, 90, 6, 3, 4, 4, 4, 4}, 6), uint64(3), false)
	f.Fuzz(func(t *testing.T, prog []byte, seed uint64, settle bool) {
		if len(prog) > 600 {
			return
		}
		ops, tr := program(prog)
		if settle {
			(*script)(&ops).settle()
		}
		r := NewReplay(ops)
		if err := r.To(r.Len() + 1); err != nil {
			t.Fatal(err)
		}
		want := tr.want()
		for _, s := range []uint64{seed, seedFor(t, "keep")} {
			if !settle && ImageMode(s) != "keep" {
				// Lost or torn ops: the image only has to be made.
				dst := filepath.Join(t.TempDir(), "image")
				if _, err := r.Image(s, dst); err != nil {
					t.Fatal(err)
				}
				continue
			}
			dst := filepath.Join(t.TempDir(), "image")
			im, err := r.Image(s, dst)
			if err != nil {
				t.Fatal(err)
			}
			if got := tree(t, dst); !maps.Equal(got, want) {
				var list string
				for i := range ops {
					list += "\n  " + ops[i].String()
				}
				t.Fatalf("image (%s) %s\nwant %s\nops:%s", im, show(got), show(want), list)
			}
		}
	})
}

func show(m map[string]string) string {
	var out string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if len(v) > 12 {
			v = fmt.Sprintf("%q... (%d bytes)", v[:12], len(v))
		}
		out += fmt.Sprintf(" %s=%q", k, v)
	}
	return out
}
