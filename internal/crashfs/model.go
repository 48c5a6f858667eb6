package crashfs

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SectorSize is the unit a torn write keeps or loses: a disk writes a
// sector whole or not at all.
const SectorSize = 512

// Replay rebuilds, from an op log, what a power cut would leave: for each
// file the bytes and length its last fsync made durable plus the writes
// since (pending), and for each directory the entries its last fsync
// made durable plus the entry operations since. It moves forward only
// (To); Image materialises one outcome of a cut at the current point.
//
// The rules (docs/recovery.md, "Durability contract", states what partlog
// relies on; this is the model it is tested against):
//
//   - fsync or fdatasync of a file makes its bytes and length durable,
//     not its name;
//   - fsync of a directory makes its entry operations durable, and with
//     them every earlier entry operation of the other directories those
//     operations touched (a rename between two directories is one
//     journal transaction: it is durable in both or in neither, and so
//     is what came before it in either);
//   - at a cut, each pending write is lost, kept, or kept in part (a
//     subset of its sectors); each pending length change is lost or
//     kept; each directory keeps a prefix of its pending entry
//     operations (a rename kept in one directory is kept in both);
//   - a node with no durable name is gone.
type Replay struct {
	ops     []Op
	next    int
	nodes   map[uint64]*mnode
	pending []*dirOp
}

type mnode struct {
	typ     NodeType
	target  string
	path    string
	durable sparse
	pending []*Op
	entries map[string]uint64 // a directory's durable entries
}

// dirOp is a pending entry operation and the directories it touches.
type dirOp struct {
	op   *Op
	dirs []uint64
}

// NewReplay starts a replay of ops (as ReadLog returns them) before the
// first op.
func NewReplay(ops []Op) *Replay {
	r := &Replay{ops: ops, nodes: map[uint64]*mnode{}}
	r.nodes[rootIno] = &mnode{typ: TypeDir, entries: map[string]uint64{}}
	return r
}

// Len is the number of ops; cuts run from 1 (before the first op) to
// Len()+1 (after the last).
func (r *Replay) Len() int64 { return int64(len(r.ops)) }

// Ops returns the ops (not to be changed).
func (r *Replay) Ops() []Op { return r.ops }

// Cut returns the cut the replay is at: ops numbered below it are
// applied.
func (r *Replay) Cut() int64 { return int64(r.next) + 1 }

// To applies the ops numbered below cut. A cut below the current one is
// an error (a replay moves forward only).
func (r *Replay) To(cut int64) error {
	if cut < r.Cut() || cut > r.Len()+1 {
		return fmt.Errorf("crashfs: cut %d outside [%d, %d]", cut, r.Cut(), r.Len()+1)
	}
	for r.Cut() < cut {
		if err := r.apply(&r.ops[r.next]); err != nil {
			return fmt.Errorf("crashfs: replay %s: %w", r.ops[r.next].String(), err)
		}
		r.next++
	}
	return nil
}

func (r *Replay) node(ino uint64, typ NodeType) (*mnode, error) {
	n := r.nodes[ino]
	if n == nil {
		return nil, fmt.Errorf("unknown node %d", ino)
	}
	if typ != 0 && n.typ != typ {
		return nil, fmt.Errorf("node %d is of type %d, not %d", ino, n.typ, typ)
	}
	return n, nil
}

func (r *Replay) apply(o *Op) error {
	switch o.Kind {
	case OpWrite, OpSetSize:
		n, err := r.node(o.Ino, TypeFile)
		if err != nil {
			return err
		}
		n.pending = append(n.pending, o)
		n.path = o.Path
	case OpCreate:
		if r.nodes[o.Ino] != nil {
			return fmt.Errorf("node %d created twice", o.Ino)
		}
		n := &mnode{typ: o.Type, target: o.Target, path: o.Path}
		if o.Type == TypeDir {
			n.entries = map[string]uint64{}
		}
		r.nodes[o.Ino] = n
		return r.addDirOp(o, o.Parent)
	case OpLink:
		if _, err := r.node(o.Ino, 0); err != nil {
			return err
		}
		return r.addDirOp(o, o.Parent)
	case OpUnlink:
		n, err := r.node(o.Ino, 0)
		if err != nil {
			return err
		}
		if n.typ == TypeDir {
			// Its entries' removals come before it in any durable state.
			return r.addDirOp(o, o.Parent, o.Ino)
		}
		return r.addDirOp(o, o.Parent)
	case OpRename:
		n, err := r.node(o.Ino, 0)
		if err != nil {
			return err
		}
		n.path = o.NewPath
		return r.addDirOp(o, o.Parent, o.NewParent)
	case OpFsync:
		n, err := r.node(o.Ino, 0)
		if err != nil {
			return err
		}
		if n.typ == TypeDir {
			r.syncDir(o.Ino)
		} else {
			n.syncFile()
		}
	case OpSettle:
		for _, n := range r.nodes {
			n.syncFile()
		}
		for _, d := range r.pending {
			r.applyDirOp(d.op, nil)
		}
		r.pending = nil
	default:
		return fmt.Errorf("unknown op kind %d", o.Kind)
	}
	return nil
}

func (r *Replay) addDirOp(o *Op, dirs ...uint64) error {
	for _, d := range dirs {
		if _, err := r.node(d, TypeDir); err != nil {
			return err
		}
	}
	r.pending = append(r.pending, &dirOp{op: o, dirs: slices.Compact(dirs)})
	return nil
}

// syncFile makes every pending write of n durable.
func (n *mnode) syncFile() {
	for _, o := range n.pending {
		applyFileOp(&n.durable, o, nil)
	}
	n.pending = nil
}

func applyFileOp(s *sparse, o *Op, sectors []bool) {
	if o.Kind == OpSetSize {
		s.truncate(o.Size)
		return
	}
	if sectors == nil {
		s.writeAt(o.Data, o.Off)
		return
	}
	for i, keep := range sectors {
		if keep {
			from, to := sectorPiece(o, i)
			s.writeAt(o.Data[from:to], o.Off+from)
		}
	}
}

// sectorPieces is the number of sector-aligned pieces of a write.
func sectorPieces(o *Op) int {
	if len(o.Data) == 0 {
		return 0
	}
	first := o.Off / SectorSize
	last := (o.Off + int64(len(o.Data)) - 1) / SectorSize
	return int(last - first + 1)
}

// sectorPiece returns piece i of a write as a range of its Data.
func sectorPiece(o *Op, i int) (from, to int64) {
	start := (o.Off/SectorSize + int64(i)) * SectorSize
	from = max(start-o.Off, 0)
	to = min(start+SectorSize-o.Off, int64(len(o.Data)))
	return from, to
}

// syncDir makes d's pending entry operations durable, with every earlier
// pending operation of a directory they touch (see Replay).
func (r *Replay) syncDir(d uint64) {
	touched := map[uint64]bool{d: true}
	durable := make([]bool, len(r.pending))
	for i := len(r.pending) - 1; i >= 0; i-- {
		p := r.pending[i]
		if slices.ContainsFunc(p.dirs, func(x uint64) bool { return touched[x] }) {
			durable[i] = true
			for _, x := range p.dirs {
				touched[x] = true
			}
		}
	}
	var left []*dirOp
	for i, p := range r.pending {
		if durable[i] {
			r.applyDirOp(p.op, nil)
		} else {
			left = append(left, p)
		}
	}
	r.pending = left
}

// applyDirOp applies o to the durable entries, or to entries (a copy
// being built for an image) when not nil.
func (r *Replay) applyDirOp(o *Op, entries map[uint64]map[string]uint64) {
	dir := func(ino uint64) map[string]uint64 {
		if entries != nil {
			return entries[ino]
		}
		return r.nodes[ino].entries
	}
	switch o.Kind {
	case OpCreate, OpLink:
		dir(o.Parent)[o.Name] = o.Ino
	case OpUnlink:
		delete(dir(o.Parent), o.Name)
	case OpRename:
		delete(dir(o.Parent), o.Name)
		dir(o.NewParent)[o.NewName] = o.Ino
	}
}

// Synced returns the sync ops applied so far (what a cut here keeps for
// sure), oldest first.
func (r *Replay) Synced() []*Op {
	var out []*Op
	for i := range r.ops[:r.next] {
		if r.ops[i].IsSync() {
			out = append(out, &r.ops[i])
		}
	}
	return out
}

// Pending returns the ops applied so far that are not durable yet (what
// a cut here may lose), oldest first.
func (r *Replay) Pending() []*Op {
	var out []*Op
	for _, n := range r.nodes {
		out = append(out, n.pending...)
	}
	for _, d := range r.pending {
		out = append(out, d.op)
	}
	slices.SortFunc(out, func(a, b *Op) int { return int(a.Seq - b.Seq) })
	return out
}

// Image is one outcome of a cut: what was kept of each pending op.
type Image struct {
	Cut  int64
	Seed uint64
	// Mode is how the seed chose: "lose" (every pending op lost), "keep"
	// (every one kept), "mixed" (each write lost, kept or torn, each
	// directory a prefix of its entry operations).
	Mode string
	// Kept, Torn and Lost list the pending ops by fate (a torn write
	// kept some of its sectors).
	Kept, Torn, Lost []*Op
}

func (im *Image) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cut before op %d, seed %d (%s): %d pending ops kept, %d torn, %d lost",
		im.Cut, im.Seed, im.Mode, len(im.Kept), len(im.Torn), len(im.Lost))
	for _, l := range []struct {
		name string
		ops  []*Op
	}{{"torn", im.Torn}, {"lost", im.Lost}} {
		for i, o := range l.ops {
			if i == 8 {
				fmt.Fprintf(&b, "\n  %s: ... %d more", l.name, len(l.ops)-i)
				break
			}
			fmt.Fprintf(&b, "\n  %s: %s", l.name, o)
		}
	}
	return b.String()
}

// imageModes weighs the ways a seed chooses: most cuts lose everything
// not synced (what an fsync bug shows first), some keep it all, the rest
// mix kept, torn and lost ops.
var imageModes = []string{"lose", "lose", "lose", "keep", "mixed", "mixed", "mixed", "mixed"}

func imageRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// ImageMode returns the mode (Image.Mode) seed chooses.
func ImageMode(seed uint64) string { return imageModes[imageRand(seed).IntN(len(imageModes))] }

// Image writes into dst (which must not exist) the directory tree a
// power cut at the current point leaves, with the pending ops' fates
// chosen by seed: the same seed at the same cut gives the same tree.
func (r *Replay) Image(seed uint64, dst string) (*Image, error) {
	rng := imageRand(seed)
	im := &Image{Cut: r.Cut(), Seed: seed, Mode: imageModes[rng.IntN(len(imageModes))]}

	// Files: each pending op lost, kept or torn, in node order.
	contents := map[uint64]*sparse{}
	for _, ino := range slices.Sorted(maps.Keys(r.nodes)) {
		n := r.nodes[ino]
		if n.typ != TypeFile {
			continue
		}
		s := &n.durable
		for _, o := range n.pending {
			keep, sectors := r.fate(rng, im.Mode, o)
			switch {
			case !keep:
				im.Lost = append(im.Lost, o)
				continue
			case sectors != nil:
				im.Torn = append(im.Torn, o)
			default:
				im.Kept = append(im.Kept, o)
			}
			if s == &n.durable {
				s = n.durable.clone()
			}
			applyFileOp(s, o, sectors)
		}
		contents[ino] = s
	}

	// Directories: a prefix of each one's pending ops, shrunk until every
	// op kept is kept in each directory it touches.
	keepDir := r.dirPrefixes(rng, im.Mode)
	entries := make(map[uint64]map[string]uint64, len(r.nodes))
	for ino, n := range r.nodes {
		if n.typ == TypeDir {
			entries[ino] = maps.Clone(n.entries)
		}
	}
	for i, p := range r.pending {
		if keepDir[i] {
			r.applyDirOp(p.op, entries)
			im.Kept = append(im.Kept, p.op)
		} else {
			im.Lost = append(im.Lost, p.op)
		}
	}
	for _, l := range []*[]*Op{&im.Kept, &im.Lost} {
		slices.SortFunc(*l, func(a, b *Op) int { return int(a.Seq - b.Seq) })
	}

	if err := os.Mkdir(dst, 0o755); err != nil {
		return im, err
	}
	made := map[uint64]string{}
	return im, r.materialise(dst, rootIno, entries, contents, made, 0)
}

// fate decides what a cut keeps of pending file op o: nothing, all of it
// (sectors nil), or the sectors marked (a torn write).
func (r *Replay) fate(rng *rand.Rand, mode string, o *Op) (keep bool, sectors []bool) {
	switch mode {
	case "lose":
		return false, nil
	case "keep":
		return true, nil
	}
	switch rng.IntN(3) {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	n := sectorPieces(o)
	if o.Kind != OpWrite || n < 2 {
		return rng.IntN(2) == 0, nil
	}
	sectors = make([]bool, n)
	if rng.IntN(2) == 0 {
		// A prefix: the write reached the disk in order and stopped.
		for i := range rng.IntN(n) {
			sectors[i] = true
		}
	} else {
		for i := range sectors {
			sectors[i] = rng.IntN(2) == 0
		}
	}
	return true, sectors
}

// dirPrefixes marks the pending directory ops a cut keeps.
func (r *Replay) dirPrefixes(rng *rand.Rand, mode string) []bool {
	keep := make([]bool, len(r.pending))
	if mode == "lose" {
		return keep
	}
	count := map[uint64]int{}
	for _, p := range r.pending {
		for _, d := range p.dirs {
			count[d]++
		}
	}
	limit := map[uint64]int{}
	for _, d := range slices.Sorted(maps.Keys(count)) {
		limit[d] = count[d]
		if mode == "mixed" {
			limit[d] = rng.IntN(count[d] + 1)
		}
	}
	for changed := true; changed; {
		changed = false
		seen := map[uint64]int{}
		for _, p := range r.pending {
			in := true
			for _, d := range p.dirs {
				if seen[d] >= limit[d] {
					in = false
				}
			}
			for _, d := range p.dirs {
				if !in && seen[d] < limit[d] {
					// Kept here but not in the other directory: this
					// directory's prefix ends before it.
					limit[d] = seen[d]
					changed = true
				}
				seen[d]++
			}
		}
	}
	seen := map[uint64]int{}
	for i, p := range r.pending {
		keep[i] = true
		for _, d := range p.dirs {
			if seen[d] >= limit[d] {
				keep[i] = false
			}
			seen[d]++
		}
	}
	return keep
}

// materialise writes directory ino's durable entries under path.
func (r *Replay) materialise(path string, ino uint64, entries map[uint64]map[string]uint64, contents map[uint64]*sparse, made map[uint64]string, depth int) error {
	if depth > 64 {
		return errors.New("crashfs: directory tree too deep (a cycle?)")
	}
	for _, name := range slices.Sorted(maps.Keys(entries[ino])) {
		child := entries[ino][name]
		p := filepath.Join(path, name)
		n := r.nodes[child]
		if prev, ok := made[child]; ok && n.typ != TypeDir {
			if err := os.Link(prev, p); err != nil {
				return err
			}
			continue
		}
		made[child] = p
		var err error
		switch n.typ {
		case TypeDir:
			if err = os.Mkdir(p, 0o755); err == nil {
				err = r.materialise(p, child, entries, contents, made, depth+1)
			}
		case TypeSymlink:
			err = os.Symlink(n.target, p)
		case TypeFile:
			err = writeSparse(p, contents[child])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeSparse creates path holding s, with holes where s has no page.
func writeSparse(path string, s *sparse) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	for _, i := range s.dataPages() {
		p := s.pages[i][:min(pageSize, s.size-i*pageSize)]
		if _, err = f.WriteAt(p, i*pageSize); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Truncate(s.size)
	}
	return errors.Join(err, f.Close())
}
