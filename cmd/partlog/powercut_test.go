package main

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/crashfs"
)

// TestPowerCutRecoverApply: `recover --apply` over crashfs on each damage
// of damages(), cut at every step (every op up to a few dozen, then the
// steps around each sync first). A second `recover --apply` on the image
// then finishes the job: it exits 0 or 1, verify afterwards finds nothing,
// the log holds exactly the batches the uncut recover left, and every
// byte the uncut recover quarantined is in a quarantine file of the image
// (nothing it would have kept is lost). Once the first recover has
// returned, its repair is durable: the second finds nothing to do.
func TestPowerCutRecoverApply(t *testing.T) {
	cuts := 24
	if testing.Short() {
		cuts = 8
	}
	sweep := crashfs.NewSweep(t, cuts)
	for i, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			sweep.Loop(1, func(run int) { powerCutRecoverRun(t, sweep, i*100+run, d) })
		})
	}
	t.Logf("%d images checked", sweep.Done)
}

func powerCutRecoverRun(t *testing.T, sweep *crashfs.Sweep, run int, d damage) {
	m := crashfs.New(t)
	dir := makeLog(t, m.Dir(), 20)
	d.apply(t, dir)
	from, err := m.Settle()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "recover", "--apply", dir)
	if code != exitRepaired {
		t.Fatalf("recover --apply: exit %d\n%s%s", code, out, errOut)
	}
	// The history ends where the recover returned: what the test reads
	// next (opening the log syncs it) is not the recover's.
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	want := logBatches(t, dir)
	quarantined := fileContents(t, filepath.Join(dir, quarantineDir))
	if len(quarantined) == 0 && d.name == "garbage-tail" {
		t.Fatal("the uncut recover quarantined nothing")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(m.Dir(), dir)
	if err != nil {
		t.Fatal(err)
	}
	sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
		idir := filepath.Join(img, rel)
		code, out, errOut := runCLI(t, "", "recover", "--apply", idir)
		switch {
		case im.Cut > r.Len() && code != exitOK:
			t.Fatalf("recover --apply after the first one returned: exit %d, want 0 (its repair was not durable)\n%s%s", code, out, errOut)
		case code != exitOK && code != exitRepaired:
			t.Fatalf("second recover --apply: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := runCLI(t, "", "verify", idir); code != exitOK {
			t.Fatalf("verify after the second recover: exit %d\n%s%s", code, out, errOut)
		}
		if got := logBatches(t, idir); got != want {
			t.Fatalf("after the second recover the log holds\n%s\nthe uncut recover left\n%s", got, want)
		}
		have := fileContents(t, filepath.Join(idir, quarantineDir))
		for sum, name := range quarantined {
			if _, ok := have[sum]; !ok {
				t.Fatalf("the uncut recover quarantined %s, which no quarantine file of the image holds (have %v)", name, have)
			}
		}
	})
}

// logBatches lists the batches of the partition directory dir (opened
// read-only through a Log): offsets and CRCs, one per line.
func logBatches(t *testing.T, dir string) string {
	t.Helper()
	l, err := partlog.Open(dir, testLogOpts())
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer l.Close()
	var b strings.Builder
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rv, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		recs := rv.Records
		for len(recs) > 0 {
			v, err := batch.Check(recs)
			if err != nil {
				rv.Release()
				t.Fatalf("batch at %d: %v", off, err)
			}
			b.WriteString(strings.Join([]string{itoa(v.BaseOffset()), itoa(v.LastOffset()), itoa(int64(v.CRC()))}, " ") + "\n")
			off = v.NextOffset()
			recs = recs[len(v):]
		}
		rv.Release()
		if len(rv.Records) == 0 {
			break
		}
	}
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fileContents maps the SHA-256 of every non-empty file under root to
// its path (none when root is missing).
func fileContents(t *testing.T, root string) map[[32]byte]string {
	t.Helper()
	out := map[[32]byte]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipAll
		}
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && len(b) > 0 {
			out[sha256.Sum256(b)] = p
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
