package cleaner

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/partlog/partlog/internal/testutil"
)

// TestOffsetMap: the latest offset per key, the round's key bound, the
// latest offset covered, and Reset and Release emptying it.
func TestOffsetMap(t *testing.T) {
	m, err := NewOffsetMap(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Bytes() != 1<<20-(1<<20)%slotSize || m.Capacity() != int64(float64((1<<20)/slotSize)*0.9) {
		t.Fatalf("bytes %d capacity %d", m.Bytes(), m.Capacity())
	}
	m.Reset(100)
	if m.Get([]byte("a")) != -1 || m.LatestOffset() != -1 {
		t.Fatal("not empty")
	}
	for i := int64(0); i < 50; i++ {
		m.Put([]byte(fmt.Sprint("k", i%10)), i)
	}
	m.Put([]byte{}, 60) // the empty key is a key
	for i := int64(0); i < 10; i++ {
		if got := m.Get([]byte(fmt.Sprint("k", i))); got != 40+i {
			t.Fatalf("k%d: %d, want %d", i, got, 40+i)
		}
	}
	if m.Get([]byte{}) != 60 || m.Size() != 11 || m.LatestOffset() != 60 {
		t.Fatalf("empty key %d size %d latest %d", m.Get([]byte{}), m.Size(), m.LatestOffset())
	}
	m.UpdateLatestOffset(70)
	m.UpdateLatestOffset(65)
	if m.LatestOffset() != 70 {
		t.Fatal("latest offset went back")
	}
	// A round sized for 100 keys takes minSlots*0.9 of them.
	for i := 0; !m.Full(); i++ {
		if !m.Put([]byte("x"+strconv.Itoa(i)), int64(100+i)) {
			t.Fatal("put refused before full")
		}
	}
	if m.Size() != 921 || m.Put([]byte("new"), 1) {
		t.Fatalf("full at %d keys, or a new key was taken", m.Size())
	}
	if !m.Put([]byte("k3"), 9999) || m.Get([]byte("k3")) != 9999 {
		t.Fatal("a held key must take a new offset when full")
	}
	m.Reset(0)
	if m.Size() != 0 || m.Get([]byte("k3")) != -1 || m.Full() {
		t.Fatal("Reset did not empty")
	}
	for i := 0; i < 5000; i++ {
		m.Put([]byte("y"+strconv.Itoa(i)), int64(i))
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	m.Reset(10)
	if m.Get([]byte("y7")) != -1 {
		t.Fatal("Release did not empty")
	}
}

// TestOffsetMapMemory: a round touches only the slots its dirty offsets
// need, and Release gives them back (the map's own present pages: the
// process's resident size also counts the Go heap and, under -race, its
// shadow, which made the check flaky).
func TestOffsetMapMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the process's resident memory")
	}
	m, err := NewOffsetMap(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before := resident(t, m)
	m.Reset(10_000)
	for i := 0; i < 10_000; i++ {
		m.Put([]byte(strconv.Itoa(i)), int64(i))
	}
	small := resident(t, m) - before
	if small > 4<<20 {
		t.Fatalf("a round of 10 000 keys in a 256 MiB map touched %d bytes", small)
	}
	m.Reset(0)
	for i := 0; i < 1_000_000; i++ {
		m.Put([]byte(strconv.Itoa(i)), int64(i))
	}
	if full := resident(t, m) - before; full < 200<<20 {
		t.Fatalf("a full-size round touched only %d bytes", full)
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	if after := resident(t, m) - before; after > 8<<20 {
		t.Fatalf("%d bytes still resident after Release", after)
	}
}

// resident is how many bytes of m's memory are present in this process.
func resident(t testing.TB, m *OffsetMap) int64 {
	return int64(testutil.PresentPages(t, m.mem)) * int64(unix.Getpagesize())
}

// TestThrottle: the pool's rate bounds the bytes taken per second, and a
// stop request ends a wait.
func TestThrottle(t *testing.T) {
	th := NewThrottle(10 << 20)
	start := time.Now()
	for i := 0; i < 6; i++ {
		th.Wait(1<<20, nil)
	}
	// 6 MiB at 10 MiB/s with a burst of 1 MiB: about half a second.
	if d := time.Since(start); d < 350*time.Millisecond {
		t.Fatalf("6 MiB at 10 MiB/s took %v", d)
	}
	var once sync.Once
	stopped := false
	if th.Wait(100<<20, func() bool { once.Do(func() { stopped = true }); return stopped }) {
		t.Fatal("a stopped wait reported true")
	}
	if !NewThrottle(0).Wait(1<<30, nil) {
		t.Fatal("unbounded throttle")
	}
}
