package dump

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestEncodeBytes(t *testing.T) {
	if s, enc := encodeBytes([]byte("héllo")); *s != "héllo" || enc != "utf8" {
		t.Errorf("utf8: %q %s", *s, enc)
	}
	if s, enc := encodeBytes([]byte{0xff, 0x00, 0xfe}); *s != "/wD+" || enc != "base64" {
		t.Errorf("binary: %q %s", *s, enc)
	}
	if s, enc := encodeBytes(nil); s != nil || enc != "" {
		t.Errorf("null: %v %s", s, enc)
	}
	if s, _ := encodeBytes([]byte{}); s == nil || *s != "" {
		t.Error("empty is not null")
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(Record{}); err != nil || !strings.Contains(buf.String(), `"key":null`) {
		t.Errorf("null key encodes as %s", buf.String())
	}
}
