package dump

import (
	"strings"
	"unicode/utf8"
)

// javaUTF8 turns bytes into text as Java's UTF-8 decoder does (Kafka's
// StringDecoder, and every string Kafka's tools print): valid UTF-8 as it
// is, and each maximal ill-formed subsequence (a lead byte and the
// continuation bytes that could still have completed it, or a lone invalid
// byte) replaced by one U+FFFD.
func javaUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			sb.WriteByte(b[i])
			i++
			continue
		}
		if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError || n > 1 {
			sb.Write(b[i : i+n])
			i += n
			continue
		}
		i += illFormedLen(b[i:])
		sb.WriteRune(utf8.RuneError)
	}
	return sb.String()
}

// illFormedLen is the length of the maximal ill-formed subsequence at the
// start of b, which does not start with a valid encoded character.
func illFormedLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf) // range of the second byte
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c == 0xed:
		need, hi = 2, 0x9f
	case c >= 0xe1 && c <= 0xef:
		need = 2
	case c == 0xf0:
		need, lo = 3, 0x90
	case c == 0xf4:
		need, hi = 3, 0x8f
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k == 0 && (x < lo || x > hi) {
			break
		}
		if k > 0 && (x < 0x80 || x > 0xbf) {
			break
		}
		n++
	}
	return n
}
