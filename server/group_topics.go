package server

import "slices"

// TopicByName, TopicByID and TopicNames tell the group coordinator the
// server's topics (group.Topics): KIP-848 consumer groups subscribe to
// topics by name and are assigned partitions by topic id.

// TopicByName returns a topic's id and partition count.
func (s *Server) TopicByName(name string) (id [16]byte, partitions int32, ok bool) {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	t := s.topics[name]
	if t == nil {
		return id, 0, false
	}
	return t.id, int32(len(t.parts)), true
}

// TopicByID returns a topic's name and partition count.
func (s *Server) TopicByID(id [16]byte) (name string, partitions int32, ok bool) {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	for name, t := range s.topics {
		if t.id == id && !t.id.IsZero() {
			return name, int32(len(t.parts)), true
		}
	}
	return "", 0, false
}

// TopicNames returns the names of every topic, sorted.
func (s *Server) TopicNames() []string {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	names := make([]string, 0, len(s.topics))
	for name := range s.topics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
