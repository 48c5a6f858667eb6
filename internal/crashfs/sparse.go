package crashfs

import "slices"

// pageSize is the unit in which file contents are kept: holes (never
// written, or cut away) cost nothing, so a 1 GiB preallocated segment
// with 10 KiB of data holds three pages.
const pageSize = 4096

type page [pageSize]byte

// sparse is a file's bytes: its size and the pages that were written
// (a missing page reads as zeros).
type sparse struct {
	size  int64
	pages map[int64]*page
}

func (s *sparse) clone() *sparse {
	c := &sparse{size: s.size, pages: make(map[int64]*page, len(s.pages))}
	for i, p := range s.pages {
		cp := *p
		c.pages[i] = &cp
	}
	return c
}

// writeAt stores b at off, extending the file if it ends past size.
func (s *sparse) writeAt(b []byte, off int64) {
	if s.pages == nil {
		s.pages = map[int64]*page{}
	}
	for len(b) > 0 {
		i, in := off/pageSize, off%pageSize
		p := s.pages[i]
		if p == nil {
			p = new(page)
			s.pages[i] = p
		}
		n := copy(p[in:], b)
		b, off = b[n:], off+int64(n)
	}
	s.size = max(s.size, off)
}

// readAt fills b from off and returns how many bytes lie before the end
// of the file.
func (s *sparse) readAt(b []byte, off int64) int {
	if off >= s.size {
		return 0
	}
	b = b[:min(int64(len(b)), s.size-off)]
	n := len(b)
	for len(b) > 0 {
		i, in := off/pageSize, off%pageSize
		var c int
		if p := s.pages[i]; p != nil {
			c = copy(b, p[in:])
		} else {
			c = min(len(b), int(pageSize-in))
			clear(b[:c])
		}
		b, off = b[c:], off+int64(c)
	}
	return n
}

// truncate sets the size; bytes past a shrunk end are gone, so growing
// again reads zeros there.
func (s *sparse) truncate(n int64) {
	if n < s.size {
		for i := range s.pages {
			if i*pageSize >= n {
				delete(s.pages, i)
			}
		}
		if p := s.pages[n/pageSize]; p != nil {
			clear(p[n%pageSize:])
		}
	}
	s.size = n
}

// dataPages returns the indexes of the pages holding a non-zero byte
// below size, in order (what a materialised copy writes).
func (s *sparse) dataPages() []int64 {
	var out []int64
	for i, p := range s.pages {
		if i*pageSize < s.size && *p != (page{}) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// bytes returns the whole content (tests and small files).
func (s *sparse) bytes() []byte {
	b := make([]byte, s.size)
	s.readAt(b, 0)
	return b
}
