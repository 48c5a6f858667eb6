package server

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// envFullDiskChild names the log directory of TestFullDiskServerChild.
const envFullDiskChild = "PARTLOG_SERVER_FULLDISK_CHILD"

// fullDiskOptions are the partitions' options of the full-disk test:
// small segments and reservation steps, so the disk fills within a few
// MiB and a killed server leaves little reserved space behind.
func fullDiskOptions() *partlog.Options {
	return &partlog.Options{SegmentBytes: 1 << 20, ReserveMaxBytes: 4096, PrefaultBytes: -1}
}

// TestFullDiskServerChild is the server process TestFullDiskServer
// kills; run directly it skips.
func TestFullDiskServerChild(t *testing.T) {
	dir := os.Getenv(envFullDiskChild)
	if dir == "" {
		t.Skip("started by TestFullDiskServer")
	}
	s, err := Open(Config{Dir: dir, Log: fullDiskOptions(), AutoCreate: true,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "serve: "+f+"\n", a...) }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := os.NewFile(3, "addr")
	fmt.Fprintln(addr, ln.Addr())
	_ = addr.Close()
	time.AfterFunc(60*time.Second, func() { os.Exit(3) }) // orphaned: end
	_ = s.Serve(ln)
}

// TestFullDiskServer: a full disk answered KAFKA_STORAGE_ERROR without a
// message or a log line, and after a SIGKILL on the full disk the server
// would not start (it rewrote its state file at open). The produce error
// says why and is logged; after the kill the server starts, read-only
// when it cannot write the checkpoints it must write first, and serves
// reads.
func TestFullDiskServer(t *testing.T) {
	mnt := mountExt4(t, "16M")
	dir := filepath.Join(mnt, "data")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskServerChild$")
	cmd.Env = append(os.Environ(), envFullDiskChild+"="+dir)
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	defer cmd.Process.Kill()
	line := make([]byte, 64)
	n, err := pr.Read(line)
	if err != nil {
		t.Fatalf("child address: %v; stderr:\n%s", err, stderr.String())
	}
	addr := strings.TrimSpace(string(line[:n]))
	rc := dial(t, addr)
	createTopic(t, rc, "full", 1)
	written := int64(0)
	var full *kmsg.ProduceResponseTopicPartition
	for i := 0; i < 2000 && full == nil; i++ {
		r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("full", 0, 1, records(t, 4, -1, 0, 0, false, 16<<10)))
		switch p := r.Topics[0].Partitions[0]; p.ErrorCode {
		case 0:
			written = p.BaseOffset + 4
		default:
			full = &p
		}
	}
	if full == nil || full.ErrorCode != errKafkaStorageError || full.ErrorMessage == nil ||
		!strings.Contains(*full.ErrorMessage, "no space left") {
		t.Fatalf("produce on a full disk: %+v", full)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !strings.Contains(stderr.String(), "storage error") {
		t.Fatalf("no log line for the full disk; stderr:\n%s", stderr.String())
	}
	// What space the killed server left, a filler takes.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	_ = filler.Close()

	var logged []string
	s, err := Open(Config{Dir: dir, Log: fullDiskOptions(), Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatalf("open after a kill on a full disk: %v", err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	rc = dial(t, ln.Addr().String())
	f := roundTrip[*kmsg.FetchResponse](rc, fetchReq("full", 0, 0, 0, 1, 64<<20, 64<<20, 0))
	if p := f.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark < written || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch after the restart: error %d, high watermark %d of %d written, %d bytes; problems %+v", p.ErrorCode, p.HighWatermark, written, len(p.RecordBatches), s.Dir().Problems())
	}
	// Whether the checkpoints could be written depends on what recovery's
	// trims freed: read-only, a produce is refused with a message; else
	// it is written or refused (the disk full), and never faults.
	r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("full", 0, 1, records(t, 1, -1, 0, 0, false, 16)))
	p := r.Topics[0].Partitions[0]
	switch {
	case s.Dir().ReadOnly() != nil:
		if p.ErrorCode != errKafkaStorageError || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "read-only") {
			t.Fatalf("produce to a read-only directory: %+v", p)
		}
	case p.ErrorCode != 0 && (p.ErrorCode != errKafkaStorageError || p.ErrorMessage == nil):
		t.Fatalf("produce after the restart on a full disk: %+v", p)
	}
	t.Logf("read-only: %v; produce: error %d", s.Dir().ReadOnly(), p.ErrorCode)
}

// mountExt4 makes an ext4 file system of size (as truncate(1) reads it)
// in an image file, mounts it on a fresh directory and unmounts it at
// cleanup; it skips the test when that is not allowed (not root, no
// mkfs.ext4 or loop devices). tmpfs would not do: reading a hole of a
// sparse file (a killed server's preallocated segment) faults on a full
// tmpfs, where ext4 reads zeros.
func mountExt4(t *testing.T, size string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	dir := t.TempDir()
	for _, c := range [][]string{{"truncate", "-s", size, img}, {"mkfs.ext4", "-q", "-F", "-m", "0", img}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Skipf("%s: %v: %s", c[0], err, out)
		}
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount an ext4 image (needs root and loop devices): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
