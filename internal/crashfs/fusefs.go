package crashfs

import (
	"context"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fsys is the file system the daemon serves: every node in memory, every
// change recorded in the op log in the order it was applied (one lock),
// and a cut that, once reached, refuses every later change with EIO (the
// disk is gone) while reads go on (a mapping the engine still holds must
// not fault).
type fsys struct {
	mu      sync.Mutex
	log     *logWriter
	logErr  error
	nextIno uint64
	root    *node

	ops, writes, syncs int64
	cut                cutSpec
	dead               bool
}

// cutSpec is where a cut is armed: before the n-th op, write or sync.
type cutSpec struct {
	kind string // "op", "write", "sync"; "" for none
	n    int64
}

type node struct {
	fs.Inode
	fsys *fsys
	ino  uint64
	typ  NodeType

	// Under fsys.mu.
	data                sparse // TypeFile
	target              string // TypeSymlink
	mode                uint32
	links               uint32
	atime, mtime, ctime time.Time
}

func newFsys(log *logWriter) *fsys {
	f := &fsys{log: log, nextIno: rootIno + 1}
	f.root = f.newNode(rootIno, TypeDir, 0o755)
	return f
}

func (f *fsys) newNode(ino uint64, typ NodeType, mode uint32) *node {
	now := time.Now()
	return &node{fsys: f, ino: ino, typ: typ, mode: mode & 0o7777, links: 1, atime: now, mtime: now, ctime: now}
}

// begin numbers a change of the given class ("write" or "sync"; "" for
// an entry operation), or refuses it once the cut is reached. Caller
// holds mu.
func (f *fsys) begin(class string) (int64, syscall.Errno) {
	if f.dead || f.logErr != nil {
		return 0, syscall.EIO
	}
	var count int64
	switch f.cut.kind {
	case "op":
		count = f.ops
	case "write":
		count = f.writes
	case "sync":
		count = f.syncs
	}
	if f.cut.kind != "" && (f.cut.kind == "op" || f.cut.kind == class) && count+1 >= f.cut.n {
		f.dead = true
		return 0, syscall.EIO
	}
	f.ops++
	switch class {
	case "write":
		f.writes++
	case "sync":
		f.syncs++
	}
	return f.ops, 0
}

// record appends o to the log. Caller holds mu and got o.Seq from begin.
func (f *fsys) record(o *Op) {
	if err := f.log.add(o); err != nil && f.logErr == nil {
		f.logErr = err
	}
}

// cutNow makes the file system refuse every change from now on and
// returns the number of the first op refused.
func (f *fsys) cutNow() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
	return f.ops + 1
}

func (n *node) path() string {
	return "/" + n.Path(n.fsys.root.EmbeddedInode())
}

func (n *node) childPath(name string) string { return path.Join(n.path(), name) }

func (n *node) fillAttr(a *fuse.Attr) {
	a.Ino = n.ino
	a.Mode = n.mode
	a.Nlink = n.links
	switch n.typ {
	case TypeFile:
		a.Mode |= syscall.S_IFREG
		a.Size = uint64(n.data.size)
		a.Blocks = uint64(len(n.data.pages)) * pageSize / 512
	case TypeDir:
		a.Mode |= syscall.S_IFDIR
		a.Nlink = 2
	case TypeSymlink:
		a.Mode |= syscall.S_IFLNK
		a.Size = uint64(len(n.target))
	}
	a.Blksize = pageSize
	a.SetTimes(&n.atime, &n.mtime, &n.ctime)
}

var (
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeReader     = (*node)(nil)
	_ fs.NodeWriter     = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeFlusher    = (*node)(nil)
	_ fs.NodeAllocater  = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	n.fillAttr(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if size, ok := in.GetSize(); ok {
		if n.typ != TypeFile {
			return syscall.EINVAL
		}
		if errno := n.setSize(int64(size)); errno != 0 {
			return errno
		}
	}
	// Modes and times are not part of the model (a cut keeps the last
	// ones), but stat must see them.
	if m, ok := in.GetMode(); ok {
		n.mode = m & 0o7777
	}
	if t, ok := in.GetMTime(); ok {
		n.mtime = t
	}
	if t, ok := in.GetATime(); ok {
		n.atime = t
	}
	n.ctime = time.Now()
	n.fillAttr(&out.Attr)
	return 0
}

// setSize records and applies a length change. Caller holds fsys.mu.
func (n *node) setSize(size int64) syscall.Errno {
	seq, errno := n.fsys.begin("write")
	if errno != 0 {
		return errno
	}
	n.fsys.record(&Op{Seq: seq, Kind: OpSetSize, Ino: n.ino, Path: n.path(), Size: size})
	n.data.truncate(size)
	n.mtime = time.Now()
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.typ != TypeFile {
		return nil, 0, syscall.EINVAL
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.fsys.mu.Lock()
		defer n.fsys.mu.Unlock()
		if errno := n.setSize(0); errno != 0 {
			return nil, 0, errno
		}
	}
	// The kernel's page cache is the only one; nobody changes the files
	// behind its back.
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	k := n.data.readAt(dest, off)
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	seq, errno := n.fsys.begin("write")
	if errno != 0 {
		return 0, errno
	}
	// The encoder copies data before the kernel's buffer is reused.
	n.fsys.record(&Op{Seq: seq, Kind: OpWrite, Ino: n.ino, Path: n.path(), Off: off, Data: data})
	n.data.writeAt(data, off)
	n.mtime = time.Now()
	return uint32(len(data)), 0
}

func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	seq, errno := n.fsys.begin("sync")
	if errno != 0 {
		return errno
	}
	n.fsys.record(&Op{Seq: seq, Kind: OpFsync, Ino: n.ino, Path: n.path(), Size: n.data.size,
		Datasync: flags&fsyncFdatasync != 0})
	return 0
}

func (n *node) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode&^unix.FALLOC_FL_KEEP_SIZE != 0 {
		return syscall.EOPNOTSUPP
	}
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.fsys.dead {
		return syscall.EIO
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 || int64(off+size) <= n.data.size {
		return 0 // blocks only: nothing a cut could show
	}
	return n.setSize(int64(off + size))
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize, out.NameLen = pageSize, pageSize, 255
	out.Blocks, out.Bfree, out.Bavail = 1<<28, 1<<28, 1<<28
	out.Files, out.Ffree = 1<<24, 1<<24
	return 0
}

// newChild records the creation of a node named name here and returns
// its Inode. Caller holds fsys.mu.
func (n *node) newChild(ctx context.Context, name string, typ NodeType, mode uint32, target string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.GetChild(name) != nil {
		return nil, syscall.EEXIST
	}
	seq, errno := n.fsys.begin("")
	if errno != 0 {
		return nil, errno
	}
	ino := n.fsys.nextIno
	n.fsys.nextIno++
	c := n.fsys.newNode(ino, typ, mode)
	c.target = target
	n.fsys.record(&Op{Seq: seq, Kind: OpCreate, Ino: ino, Path: n.childPath(name), Type: typ, Target: target,
		Parent: n.ino, Name: name})
	n.mtime, n.ctime = c.mtime, c.mtime
	c.fillAttr(&out.Attr)
	var st uint32 = syscall.S_IFREG
	switch typ {
	case TypeDir:
		st = syscall.S_IFDIR
	case TypeSymlink:
		st = syscall.S_IFLNK
	}
	return n.NewPersistentInode(ctx, c, fs.StableAttr{Mode: st, Ino: ino}), 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	ch, errno := n.newChild(ctx, name, TypeFile, mode, "", out)
	return ch, nil, fuse.FOPEN_KEEP_CACHE, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, syscall.EPERM // devices, FIFOs and sockets are not modelled
	}
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	return n.newChild(ctx, name, TypeFile, mode, "", out)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	return n.newChild(ctx, name, TypeDir, mode, "", out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	return n.newChild(ctx, name, TypeSymlink, 0o777, target, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.typ != TypeSymlink {
		return nil, syscall.EINVAL
	}
	return []byte(n.target), 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok || t.typ == TypeDir {
		return nil, syscall.EPERM
	}
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if n.GetChild(name) != nil {
		return nil, syscall.EEXIST
	}
	seq, errno := n.fsys.begin("")
	if errno != 0 {
		return nil, errno
	}
	n.fsys.record(&Op{Seq: seq, Kind: OpLink, Ino: t.ino, Path: n.childPath(name), Parent: n.ino, Name: name})
	t.links++
	t.fillAttr(&out.Attr)
	return t.EmbeddedInode(), 0
}

// remove records the removal of name (a directory when dir). Caller
// holds fsys.mu.
func (n *node) remove(name string, dir bool) syscall.Errno {
	ch := n.GetChild(name)
	if ch == nil {
		return syscall.ENOENT
	}
	c := ch.Operations().(*node)
	switch {
	case dir && c.typ != TypeDir:
		return syscall.ENOTDIR
	case !dir && c.typ == TypeDir:
		return syscall.EISDIR
	case dir && len(ch.Children()) > 0:
		return syscall.ENOTEMPTY
	}
	seq, errno := n.fsys.begin("")
	if errno != 0 {
		return errno
	}
	n.fsys.record(&Op{Seq: seq, Kind: OpUnlink, Ino: c.ino, Path: n.childPath(name), Parent: n.ino, Name: name})
	c.links--
	n.mtime, n.ctime = time.Now(), time.Now()
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	return n.remove(name, false)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	return n.remove(name, true)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^unix.RENAME_NOREPLACE != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE and RENAME_WHITEOUT are not modelled
	}
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	ch := n.GetChild(name)
	if ch == nil {
		return syscall.ENOENT
	}
	c := ch.Operations().(*node)
	var replaced *node
	if old := np.GetChild(newName); old != nil {
		o := old.Operations().(*node)
		switch {
		case o == c:
			return 0 // rename(2) to the same node does nothing
		case flags&unix.RENAME_NOREPLACE != 0:
			return syscall.EEXIST
		case o.typ == TypeDir && c.typ != TypeDir:
			return syscall.EISDIR
		case o.typ != TypeDir && c.typ == TypeDir:
			return syscall.ENOTDIR
		case o.typ == TypeDir && len(old.Children()) > 0:
			return syscall.ENOTEMPTY
		}
		replaced = o
	}
	seq, errno := n.fsys.begin("")
	if errno != 0 {
		return errno
	}
	op := &Op{Seq: seq, Kind: OpRename, Ino: c.ino, Path: n.childPath(name), Parent: n.ino, Name: name,
		NewParent: np.ino, NewName: newName, NewPath: np.childPath(newName)}
	if replaced != nil {
		op.Replaced = replaced.ino
		replaced.links--
	}
	n.fsys.record(op)
	now := time.Now()
	n.mtime, n.ctime, np.mtime, np.ctime, c.ctime = now, now, now, now, now
	return 0
}

// fsyncFdatasync is FUSE_FSYNC_FDATASYNC, the flag of an FSYNC request
// made by fdatasync(2) (include/uapi/linux/fuse.h).
const fsyncFdatasync = 1
