package segment

import "github.com/partlog/partlog/batch"

// appendChecked is Append of src with the headers a validation of src
// decodes, as the log hands them over.
func appendChecked(s *Segment, src []byte, st Stamp, out *Appended) error {
	hdrs, err := batch.CheckAll(src, nil)
	if err != nil {
		return err
	}
	return s.Append(src, hdrs, st, out)
}
