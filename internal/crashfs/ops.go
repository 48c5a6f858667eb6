package crashfs

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
)

// OpKind is what one recorded operation did.
type OpKind uint8

const (
	// OpWrite stored Data at Off in file Ino (a write(2), pwritev(2), or
	// the kernel's writeback of pages stored through a shared mapping).
	OpWrite OpKind = iota + 1
	// OpSetSize set file Ino's length to Size (ftruncate(2), O_TRUNC, a
	// fallocate(2) past the end without FALLOC_FL_KEEP_SIZE).
	OpSetSize
	// OpCreate made node Ino of Type, named Name in directory Parent
	// (creat, mkdir, symlink with Target, mknod).
	OpCreate
	// OpLink named existing node Ino Name in Parent.
	OpLink
	// OpUnlink removed the name Name (of node Ino) from Parent (unlink,
	// rmdir).
	OpUnlink
	// OpRename moved node Ino from Name in Parent to NewName in
	// NewParent, replacing node Replaced there (0: none).
	OpRename
	// OpFsync made node Ino durable: a file's data and length
	// (fsync, fdatasync, msync), a directory's entries (fsync of the
	// directory).
	OpFsync
	// OpSettle marks everything durable (Mount.Settle): what came before
	// is the starting image of a test, not part of what it cuts.
	OpSettle
)

var opNames = [...]string{OpWrite: "write", OpSetSize: "setsize", OpCreate: "create", OpLink: "link",
	OpUnlink: "unlink", OpRename: "rename", OpFsync: "fsync", OpSettle: "settle"}

func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", k)
}

// NodeType is the kind of a node.
type NodeType uint8

const (
	TypeFile NodeType = iota + 1
	TypeDir
	TypeSymlink
)

// rootIno is the root directory's node number.
const rootIno = 1

// Op is one operation of the log, numbered from 1 in the order the file
// system applied them (each under its one lock).
type Op struct {
	Seq  int64
	Kind OpKind
	Ino  uint64
	// Path is the node's path (relative to the mount) when the op ran,
	// for reports; for an OpCreate, OpLink or OpUnlink the name's path.
	Path string

	Off  int64  // OpWrite
	Data []byte // OpWrite
	Size int64  // OpSetSize; OpFsync: the file's length when synced

	Type      NodeType // OpCreate
	Target    string   // OpCreate of a symlink
	Parent    uint64   // OpCreate, OpLink, OpUnlink, OpRename
	Name      string
	NewParent uint64 // OpRename
	NewName   string
	NewPath   string
	Replaced  uint64 // OpRename
	Datasync  bool   // OpFsync: fdatasync (the same durability here)
}

// IsSync reports whether the op makes something durable.
func (o *Op) IsSync() bool { return o.Kind == OpFsync || o.Kind == OpSettle }

// IsWrite reports whether the op changes a file's bytes or length.
func (o *Op) IsWrite() bool { return o.Kind == OpWrite || o.Kind == OpSetSize }

func (o *Op) String() string {
	switch o.Kind {
	case OpWrite:
		return fmt.Sprintf("#%d write %s [%d, %d)", o.Seq, o.Path, o.Off, o.Off+int64(len(o.Data)))
	case OpSetSize:
		return fmt.Sprintf("#%d setsize %s %d", o.Seq, o.Path, o.Size)
	case OpRename:
		return fmt.Sprintf("#%d rename %s -> %s", o.Seq, o.Path, o.NewPath)
	case OpFsync:
		if o.Datasync {
			return fmt.Sprintf("#%d fdatasync %s (%d bytes)", o.Seq, o.Path, o.Size)
		}
		return fmt.Sprintf("#%d fsync %s", o.Seq, o.Path)
	case OpSettle:
		return fmt.Sprintf("#%d settle", o.Seq)
	default:
		return fmt.Sprintf("#%d %s %s", o.Seq, o.Kind, o.Path)
	}
}

// logWriter appends ops to the log file the daemon keeps for the test
// process (gob records, flushed on request).
type logWriter struct {
	f   *os.File
	w   *bufio.Writer
	enc *gob.Encoder
}

func newLogWriter(path string) (*logWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	return &logWriter{f: f, w: w, enc: gob.NewEncoder(w)}, nil
}

func (l *logWriter) add(o *Op) error { return l.enc.Encode(o) }

func (l *logWriter) flush() error { return l.w.Flush() }

func (l *logWriter) close() error { return errors.Join(l.w.Flush(), l.f.Close()) }

// ReadLog decodes a log written by the daemon. A record cut short at the
// end (a daemon that died while writing it) ends the log.
func ReadLog(r io.Reader) ([]Op, error) {
	dec := gob.NewDecoder(bufio.NewReader(r))
	var ops []Op
	for {
		var o Op
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return ops, nil
		}
		if err != nil {
			return ops, fmt.Errorf("crashfs: op log record %d: %w", len(ops)+1, err)
		}
		if o.Seq != int64(len(ops)+1) {
			return ops, fmt.Errorf("crashfs: op log record %d has number %d", len(ops)+1, o.Seq)
		}
		ops = append(ops, o)
	}
}
