package dump

import (
	"strings"
	"unicode/utf8"
)

// javaUTF8 turns bytes into text as Java's new String(bytes, UTF_8) does
// (Kafka's StringDecoder, and every string Kafka's tools print): valid
// UTF-8 as it is, and each ill-formed sequence replaced by U+FFFD where
// Java's decoder replaces it. Java's grouping differs from Unicode's
// "maximal subpart" rule: a three-byte sequence whose bytes are all
// continuation-shaped but encode a surrogate (ED A0 80) is one U+FFFD,
// not three, ED followed by a continuation byte and a non-continuation
// one is one, and a sequence cut by the end of the input is one, with
// the rest of a four-byte lead's tail dropped as Java drops it.
func javaUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b) // Java decodes valid UTF-8 to the same characters
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	repl := func() { sb.WriteRune(utf8.RuneError) }
	notCont := func(c byte) bool { return c&0xc0 != 0x80 }
	sp, sl := 0, len(b)
loop:
	for sp < sl {
		b1 := b[sp]
		sp++
		switch {
		case b1 < 0x80:
			sb.WriteByte(b1)
		case b1 >= 0xc2 && b1 <= 0xdf:
			if sp == sl {
				repl()
				break loop
			}
			if notCont(b[sp]) {
				repl()
				continue
			}
			sb.Write(b[sp-1 : sp+1])
			sp++
		case b1&0xf0 == 0xe0:
			if sp+1 < sl {
				b2, b3 := b[sp], b[sp+1]
				if (b1 == 0xe0 && b2&0xe0 == 0x80) || notCont(b2) || notCont(b3) {
					repl()
					if !((b1 == 0xe0 && b2&0xe0 == 0x80) || notCont(b2)) {
						sp++ // Java skips a valid second byte with the lead
					}
					continue
				}
				sp += 2
				if c := rune(b1&0x0f)<<12 | rune(b2&0x3f)<<6 | rune(b3&0x3f); c >= 0xd800 && c <= 0xdfff {
					repl() // a surrogate: one replacement for the three bytes
					continue
				}
				sb.Write(b[sp-3 : sp])
				continue
			}
			if sp < sl && ((b1 == 0xe0 && b[sp]&0xe0 == 0x80) || notCont(b[sp])) {
				repl()
				continue
			}
			repl()
			break loop
		case b1&0xf8 == 0xf0:
			if sp+2 < sl {
				b2, b3, b4 := b[sp], b[sp+1], b[sp+2]
				uc := rune(b1&0x07)<<18 | rune(b2&0x3f)<<12 | rune(b3&0x3f)<<6 | rune(b4&0x3f)
				if notCont(b2) || notCont(b3) || notCont(b4) || uc < 0x10000 || uc > 0x10ffff {
					repl()
					switch {
					case b1 > 0xf4 || (b1 == 0xf0 && (b2 < 0x90 || b2 > 0xbf)) || (b1 == 0xf4 && b2&0xf0 != 0x80) || notCont(b2):
					case notCont(b3):
						sp++
					default:
						sp += 2
					}
					continue
				}
				sp += 3
				sb.Write(b[sp-4 : sp])
				continue
			}
			if b1 > 0xf4 || (sp < sl && ((b1 == 0xf0 && (b[sp] < 0x90 || b[sp] > 0xbf)) || (b1 == 0xf4 && b[sp]&0xf0 != 0x80) || notCont(b[sp]))) {
				repl()
				continue
			}
			sp++
			repl()
			if sp < sl && notCont(b[sp]) {
				continue
			}
			break loop
		default:
			repl()
		}
	}
	return sb.String()
}
