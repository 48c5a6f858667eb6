package dump

import (
	"encoding/json"
	"io"
)

// WriteJSON writes f as one line of JSON (JSON Lines: one object a file),
// its fields named by File's tags (see the package documentation for the
// encodings and the problem kinds).
func WriteJSON(w io.Writer, f *File) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(f)
}
