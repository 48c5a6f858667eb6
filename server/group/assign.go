package group

import (
	"cmp"
	"maps"
	"slices"
)

// The server-side assignors of consumer groups (KIP-848): "uniform", the
// default, and "range". Both see the members' subscribed topics (by id,
// with their partition counts) and return each member's target.

// assignee is a member as an assignor sees it.
type assignee struct {
	id       string
	instance *string
	topics   map[[16]byte]int32 // subscribed topic id -> partition count
}

// topicIDs returns the keys of a subscription, in order.
func topicIDs(topics map[[16]byte]int32) [][16]byte {
	return slices.SortedFunc(maps.Keys(topics), func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
}

// assignRange gives each member, per subscribed topic, a contiguous range
// of its partitions: members in order of instance id (static members
// first) then member id, the first ones one partition more when the
// partitions do not divide evenly (Kafka's RangeAssignor).
func assignRange(members []assignee) map[string]map[tpid]bool {
	slices.SortFunc(members, func(a, b assignee) int {
		switch {
		case a.instance != nil && b.instance != nil:
			return cmp.Compare(*a.instance, *b.instance)
		case a.instance != nil:
			return -1
		case b.instance != nil:
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	subscribers := map[[16]byte]int32{}
	for _, m := range members {
		for id := range m.topics {
			subscribers[id]++
		}
	}
	next := map[[16]byte]int32{}
	taken := map[[16]byte]int32{} // members that got their range so far
	out := map[string]map[tpid]bool{}
	for _, m := range members {
		a := map[tpid]bool{}
		for _, id := range topicIDs(m.topics) {
			n, k := m.topics[id], subscribers[id]
			quota := n / k
			if taken[id] < n%k {
				quota++
			}
			taken[id]++
			start := next[id]
			end := min(start+quota, n)
			for p := start; p < end; p++ {
				a[tpid{id, p}] = true
			}
			next[id] = end
		}
		out[m.id] = a
	}
	return out
}

// assignUniform spreads the subscribed partitions evenly over the members
// and keeps a member's partitions where balance allows (Kafka's
// UniformAssignor). When every member subscribes to the same topics this
// is Kafka's homogeneous algorithm, members taken in order of id: each
// keeps up to its quota of its previous target, and the partitions left
// go to the members below their quota. Otherwise each partition goes to
// the least loaded member subscribing to its topic, previous owners kept
// while no member subscribing has two partitions fewer.
func assignUniform(members []assignee, prev map[string]map[tpid]bool) map[string]map[tpid]bool {
	slices.SortFunc(members, func(a, b assignee) int { return cmp.Compare(a.id, b.id) })
	if len(members) == 0 {
		return map[string]map[tpid]bool{}
	}
	homogeneous := true
	for _, m := range members[1:] {
		if !maps.Equal(m.topics, members[0].topics) {
			homogeneous = false
			break
		}
	}
	if homogeneous {
		return uniformHomogeneous(members, prev)
	}
	return uniformHeterogeneous(members, prev)
}

func uniformHomogeneous(members []assignee, prev map[string]map[tpid]bool) map[string]map[tpid]bool {
	topics := members[0].topics
	out := map[string]map[tpid]bool{}
	if len(topics) == 0 {
		for _, m := range members {
			out[m.id] = map[tpid]bool{}
		}
		return out
	}
	held := map[tpid]bool{}
	for _, m := range members {
		for p := range prev[m.id] {
			held[p] = true
		}
	}
	var unassigned []tpid
	total := int32(0)
	for _, id := range topicIDs(topics) {
		for p := range topics[id] {
			if !held[tpid{id, p}] {
				unassigned = append(unassigned, tpid{id, p})
			}
		}
		total += topics[id]
	}
	n := int32(len(members))
	minQuota, extra := total/n, total%n
	type unfilled struct {
		id    string
		quota int32
	}
	var short []unfilled
	for i, m := range members {
		quota := minQuota
		hasExtra := false
		if extra > 0 {
			quota++
			hasExtra = true
		}
		a := map[tpid]bool{}
		for _, p := range sortedParts(prev[m.id]) {
			if _, ok := topics[p.topic]; !ok || p.partition >= topics[p.topic] {
				continue // no longer subscribed, or gone
			}
			if quota > 0 {
				a[p] = true
				quota--
			} else {
				unassigned = append(unassigned, p)
			}
		}
		if quota > 0 && hasExtra && n-int32(i) > extra {
			quota--
			hasExtra = false
		}
		if quota > 0 {
			short = append(short, unfilled{m.id, quota})
		}
		if hasExtra {
			extra--
		}
		out[m.id] = a
	}
	next := 0
	for _, u := range short {
		for q := int32(0); q < u.quota && next < len(unassigned); q++ {
			out[u.id][unassigned[next]] = true
			next++
		}
	}
	return out
}

func uniformHeterogeneous(members []assignee, prev map[string]map[tpid]bool) map[string]map[tpid]bool {
	out := map[string]map[tpid]bool{}
	load := map[string]int{}
	owner := map[tpid]string{}
	for _, m := range members {
		out[m.id] = map[tpid]bool{}
		for _, p := range sortedParts(prev[m.id]) {
			if n, ok := m.topics[p.topic]; ok && p.partition < n {
				owner[p] = m.id
			}
		}
	}
	all := map[[16]byte]int32{}
	for _, m := range members {
		maps.Copy(all, m.topics)
	}
	// Give each partition to its previous owner, then the unowned ones
	// to the least loaded subscriber.
	var free []tpid
	for _, id := range topicIDs(all) {
		for p := range all[id] {
			tp := tpid{id, p}
			if o, ok := owner[tp]; ok {
				out[o][tp] = true
				load[o]++
			} else {
				free = append(free, tp)
			}
		}
	}
	least := func(tp tpid, except string) string {
		best := ""
		for _, m := range members {
			if _, ok := m.topics[tp.topic]; !ok || m.id == except {
				continue
			}
			if best == "" || load[m.id] < load[best] {
				best = m.id
			}
		}
		return best
	}
	for _, tp := range free {
		if m := least(tp, ""); m != "" {
			out[m][tp] = true
			load[m]++
		}
	}
	// Move partitions from a member to a subscriber holding two fewer
	// until none can move.
	for moved := true; moved; {
		moved = false
		for _, m := range members {
			for _, tp := range sortedParts(out[m.id]) {
				to := least(tp, m.id)
				if to != "" && load[to]+1 < load[m.id] {
					delete(out[m.id], tp)
					out[to][tp] = true
					load[m.id]--
					load[to]++
					moved = true
				}
			}
		}
	}
	return out
}

func sortedParts(s map[tpid]bool) []tpid {
	ps := slices.Collect(maps.Keys(s))
	sortTPIDs(ps)
	return ps
}

// sortTPIDs orders partitions by topic id, then partition.
func sortTPIDs(ps []tpid) {
	slices.SortFunc(ps, func(a, b tpid) int {
		if c := slices.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
}
