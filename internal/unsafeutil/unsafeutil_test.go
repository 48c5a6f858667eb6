package unsafeutil

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStringSharesMemory(t *testing.T) {
	b := []byte("hello")
	s := String(b)
	if s != "hello" {
		t.Fatalf("String = %q", s)
	}
	b[0] = 'j'
	if s != "jello" {
		t.Fatalf("String does not alias its input: %q", s)
	}
	if String(nil) != "" || String([]byte{}) != "" {
		t.Fatal("empty input must give the empty string")
	}
	if n := testing.AllocsPerRun(100, func() { _ = String(b) }); n != 0 {
		t.Fatalf("String allocates %v times", n)
	}
}

func TestBytes(t *testing.T) {
	s := "partlog"
	b := Bytes(s)
	if string(b) != s || len(b) != len(s) {
		t.Fatalf("Bytes = %q", b)
	}
	if Bytes("") != nil {
		t.Fatal("Bytes of empty string must be nil")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Bytes(s) }); n != 0 {
		t.Fatalf("Bytes allocates %v times", n)
	}
}

func TestWithin(t *testing.T) {
	buf := make([]byte, 100)
	other := make([]byte, 10)
	cases := []struct {
		name       string
		sub, outer []byte
		want       bool
	}{
		{"whole", buf, buf, true},
		{"middle", buf[10:20], buf, true},
		{"tail", buf[90:], buf, true},
		{"empty sub", nil, buf, true},
		{"other buffer", other, buf, false},
		{"past the end", buf[50:100], buf[:60], false},
		{"empty outer", buf[:1], nil, false},
	}
	for _, c := range cases {
		if got := Within(c.sub, c.outer); got != c.want {
			t.Errorf("%s: Within = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMincore(t *testing.T) {
	page := os.Getpagesize()
	b, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(b) }()
	b[0] = 1 // the first page is resident, the second never touched
	var vec [2]byte
	if err := Mincore(b, vec[:]); err != nil {
		t.Fatal(err)
	}
	if vec[0]&1 != 1 || vec[1]&1 != 0 {
		t.Fatalf("vec %v, want the first page resident and the second not", vec)
	}
	if err := Mincore(b[1:], vec[:]); err == nil {
		t.Fatal("Mincore of memory off a page boundary: no error")
	}
	if err := Mincore(b, vec[:1]); err == nil {
		t.Fatal("Mincore with a vector shorter than the pages: no error")
	}
	if err := Mincore(nil, nil); err != nil {
		t.Fatalf("Mincore of nothing: %v", err)
	}
}
