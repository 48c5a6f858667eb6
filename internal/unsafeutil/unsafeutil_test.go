package unsafeutil

import "testing"

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
