package corrupt

import (
	"errors"
	"io"
	"testing"
)

// TestMarkerThroughSentinels: an *Error answers its package's sentinel and
// the one marker, a sentinel of another package does not match it, and
// the cause stays reachable.
func TestMarkerThroughSentinels(t *testing.T) {
	a, b := Sentinel("partlog/a: corrupt thing"), Sentinel("partlog/b: corrupt other")
	err := error(&Error{Kind: a, Path: "/x/f", Pos: 16, Reason: "bad", Err: io.ErrUnexpectedEOF})
	wrapped := errors.Join(errors.New("context"), err)
	for _, e := range []error{err, wrapped} {
		if !errors.Is(e, a) || !errors.Is(e, ErrCorrupt) || !Is(e) || errors.Is(e, b) || !errors.Is(e, io.ErrUnexpectedEOF) {
			t.Errorf("%v: Is(a) %v, Is(ErrCorrupt) %v, Is(b) %v, Is(cause) %v", e, errors.Is(e, a), errors.Is(e, ErrCorrupt),
				errors.Is(e, b), errors.Is(e, io.ErrUnexpectedEOF))
		}
	}
	if !errors.Is(a, ErrCorrupt) || Is(errors.New("partlog: corrupt data")) {
		t.Error("the sentinels and the marker do not relate as documented")
	}
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Kind: a, Path: "/x/f", Pos: 16, Reason: "bad", Err: io.ErrUnexpectedEOF}, "partlog/a: corrupt thing /x/f at byte 16: bad: unexpected EOF"},
		{Error{Kind: a, Pos: 0, Reason: "bad"}, "partlog/a: corrupt thing at byte 0: bad"},
		{Error{Kind: a, Pos: -1, Reason: "bad"}, "partlog/a: corrupt thing: bad"},
		{Error{Kind: b, Path: "p", Pos: -1, Line: 3, Reason: "bad"}, "partlog/b: corrupt other p, line 3: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
