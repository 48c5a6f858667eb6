package crashfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The daemon is the test binary itself, started again by Mount with
// envMount set: the file system must be served by another process than
// the one whose mappings fault on it (a goroutine stuck in a page fault
// on the mount holds its thread and P without being in a system call, so
// a garbage collection in a process serving itself would wait forever).
const (
	envMount = "PARTLOG_CRASHFS_MOUNT"
	envLog   = "PARTLOG_CRASHFS_LOG"
)

func init() {
	if mnt := os.Getenv(envMount); mnt != "" {
		os.Exit(daemon(mnt, os.Getenv(envLog)))
	}
}

// daemon mounts the file system on mnt, recording ops to logPath, and
// answers the commands Mount sends on stdin, one line each:
//
//	count            -> "ok <ops> <writes> <syncs> <cut 0|1>"
//	cut <kind> <n>   -> "ok": refuse the n-th op, write or sync and all later changes
//	cutnow           -> "ok <op>": refuse every change from now on, the first being <op>
//	settle           -> "ok <op>": record OpSettle (everything so far is durable)
//	flush            -> "ok": the log file holds every op so far
//	quit (or EOF)    -> unmount and exit
func daemon(mnt, logPath string) int {
	lw, err := newLogWriter(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashfs:", err)
		return 2
	}
	f := newFsys(lw)
	// Entries change only through the kernel, which keeps its cache in
	// step; attributes are asked for each time (stat sees mtime).
	entry, attr := time.Hour, time.Duration(0)
	srv, err := fs.Mount(mnt, f.root, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // no fusermount here: mount(2) as root
			FsName:            "crashfs",
			Name:              "crashfs",
			DisableXAttrs:     true,
			MaxWrite:          1 << 20,
		},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &attr,
		RootStableAttr:  &fs.StableAttr{Ino: rootIno},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashfs: mount:", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	reply := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	reply("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		args := strings.Fields(in.Text())
		if len(args) == 0 {
			continue
		}
		switch args[0] {
		case "count":
			f.mu.Lock()
			reply("ok %d %d %d %d", f.ops, f.writes, f.syncs, btoi(f.dead))
			f.mu.Unlock()
		case "cut":
			n, err := strconv.ParseInt(args[len(args)-1], 10, 64)
			if len(args) != 3 || err != nil || n < 1 || (args[1] != "op" && args[1] != "write" && args[1] != "sync") {
				reply("err usage: cut op|write|sync N")
				continue
			}
			f.mu.Lock()
			f.cut = cutSpec{kind: args[1], n: n}
			f.mu.Unlock()
			reply("ok")
		case "cutnow":
			reply("ok %d", f.cutNow())
		case "settle":
			f.mu.Lock()
			seq, errno := f.begin("sync")
			if errno == 0 {
				f.record(&Op{Seq: seq, Kind: OpSettle})
			}
			f.mu.Unlock()
			if errno != 0 {
				reply("err the file system is cut")
				continue
			}
			reply("ok %d", seq)
		case "flush":
			f.mu.Lock()
			err := errors.Join(f.logErr, f.log.flush())
			f.mu.Unlock()
			if err != nil {
				reply("err %v", err)
				continue
			}
			reply("ok")
		case "quit":
			return unmount(srv, mnt, f)
		default:
			reply("err unknown command %q", args[0])
		}
	}
	return unmount(srv, mnt, f)
}

// unmount detaches the mount (lazily if files are still open: their
// owner closes them soon) and waits a while for the kernel to let go.
func unmount(srv *fuse.Server, mnt string, f *fsys) int {
	if err := srv.Unmount(); err != nil {
		_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "crashfs: the kernel still holds the mount after 30 s")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.log.close(); err != nil {
		fmt.Fprintln(os.Stderr, "crashfs: log:", err)
		return 1
	}
	return 0
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
