package mmapfile

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testutil"
)

func TestRefCount(t *testing.T) {
	f, err := Open(testutil.TempPath(t, "a"), Options{Create: true, Reserve: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Acquire() {
		t.Fatal("Acquire on open file failed")
	}
	view := f.Bytes()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !f.Mapped() {
		t.Fatal("unmapped while a reader holds a reference")
	}
	view[0] = 1 // still mapped: must not fault
	if f.Acquire() {
		t.Fatal("Acquire succeeded after Close")
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Sync(0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	f.Release()
	if f.Mapped() {
		t.Fatal("still mapped after the last Release")
	}
	if err := f.Prefault(0, 4096); !errors.Is(err, ErrClosed) {
		t.Fatalf("Prefault after unmap: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("unbalanced Release did not panic")
		}
	}()
	f.Release()
}

// TestReadersRaceClose has readers take references and read the mapping while
// the owner closes it; run with -race. A reader that got a reference must be
// able to read the whole mapping; the unmap must happen exactly once, after
// the last reader.
func TestReadersRaceClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		f, err := Open(testutil.TempPath(t, "r"), Options{Create: true, Reserve: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.Bytes() {
			f.Bytes()[i] = 1
		}
		var wg sync.WaitGroup
		var reads atomic.Int64
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					if !f.Acquire() {
						return
					}
					sum := 0
					for _, c := range f.Bytes() {
						sum += int(c)
					}
					f.Release()
					if sum != 64<<10 {
						t.Errorf("read %d, want %d", sum, 64<<10)
						return
					}
					reads.Add(1)
				}
			}()
		}
		close(start)
		time.Sleep(time.Millisecond)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if f.Mapped() {
			t.Fatal("mapping survived Close and the last Release")
		}
	}
}

// TestRetire: a retired File refuses Acquire at once; its mapping stays
// while a reader holds a reference and goes after the reader's Release,
// and without readers it goes on its own, off the caller's goroutine.
func TestRetire(t *testing.T) {
	waitMappings := func(path string, want int) {
		t.Helper()
		deadline := time.Now().Add(testutil.SettleTimeout)
		for mappingsOf(t, path) != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := mappingsOf(t, path); n != want {
			t.Fatalf("%d mappings of %s, want %d", n, path, want)
		}
	}
	for _, reader := range []bool{false, true} {
		path := testutil.TempPath(t, fmt.Sprint("retire", reader))
		f, err := Open(path, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		copy(f.Bytes(), "kept")
		if reader && !f.Acquire() {
			t.Fatal("Acquire failed")
		}
		held := f.Bytes()
		f.Retire()
		if f.Acquire() {
			t.Fatal("Acquire after Retire succeeded")
		}
		f.Retire() // a second one does nothing
		if !reader {
			waitMappings(path, 0)
			continue
		}
		time.Sleep(20 * time.Millisecond)
		if n := mappingsOf(t, path); n != 1 || string(held[:4]) != "kept" {
			t.Fatalf("%d mappings while a reader holds the retired File", n)
		}
		f.Release()
		waitMappings(path, 0)
	}
}
