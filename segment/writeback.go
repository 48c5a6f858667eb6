package segment

// StartWriteback starts the writeout of the .log's whole pages in
// [off, end) without waiting for it (mmapfile.File.StartWriteback): a
// later Flush has less left to write. It makes nothing durable and
// reports no writeback error (the next Flush does). It is a hint: it does
// nothing for a sealed or closed segment, nor while a Flush, a seal or a
// close holds the segment (that Flush writes the pages anyway), so it
// never waits for one. Safe beside the owner.
func (s *Segment) StartWriteback(off, end int64) error {
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	if s.closed || !s.active || s.log == nil {
		return nil
	}
	return s.log.StartWriteback(off, end)
}
