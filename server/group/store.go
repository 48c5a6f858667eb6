package group

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"time"

	"github.com/partlog/partlog/internal/corrupt"
	"github.com/partlog/partlog/internal/crc32c"
	"github.com/partlog/partlog/internal/fsutil"
)

// StateFile is the name of the coordinator's state file in Config.Dir.
const StateFile = "group-coordinator.state"

// stateMagic opens the state file; stateVersion is its format version.
const (
	stateMagic   = "PLGROUPS"
	stateVersion = 2 // 2: each group ends with its consumer-group epoch (0: a classic group)
)

// errCorruptState marks a state file that does not decode.
var errCorruptState = corrupt.Sentinel("partlog/server/group: corrupt state file")

// saveLocked writes the whole state (committed and staged offsets, the
// stored metadata of every group) to the state file, atomically.
func (c *Coordinator) saveLocked() error {
	return fsutil.WriteFileAtomic(c.path, c.encodeLocked())
}

func (c *Coordinator) encodeLocked() []byte {
	ids := make([]string, 0, len(c.groups))
	for id, g := range c.groups {
		if g.stored.generation > 0 || len(g.offsets) > 0 || len(g.txn) > 0 || g.consumer != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	// The last file's size is a good guess of this one's: no regrowth.
	e := encoder{b: append(make([]byte, 0, max(4096, c.lastSize+c.lastSize/8)), stateMagic...)}
	e.u32(stateVersion)
	e.u64(c.seq)
	e.u32(uint32(len(ids)))
	for _, id := range ids {
		g := c.groups[id]
		s := &g.stored
		e.str(id)
		e.str(s.protocolType)
		e.str(s.protocol)
		e.u32(uint32(s.generation))
		e.str(s.leader)
		e.u32(uint32(len(s.members)))
		for _, m := range s.members {
			e.str(m.id)
			e.nullable(m.instanceID)
			e.str(m.clientID)
			e.str(m.clientHost)
			e.u64(uint64(m.rebalanceTimeout.Milliseconds()))
			e.u64(uint64(m.sessionTimeout.Milliseconds()))
			e.bytes(m.metadata)
			e.bytes(m.assignment)
		}
		e.offsets(g.offsets)
		pids := make([]int64, 0, len(g.txn))
		for pid := range g.txn {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		e.u32(uint32(len(pids)))
		for _, pid := range pids {
			st := g.txn[pid]
			e.u64(uint64(pid))
			e.u16(uint16(st.epoch))
			e.offsets(st.offsets)
		}
		var epoch int32
		if g.consumer != nil {
			epoch = g.consumer.epoch
		}
		e.u32(uint32(epoch))
	}
	out := binary.BigEndian.AppendUint32(e.b, crc32c.Checksum(e.b))
	c.lastSize = len(out)
	return out
}

// load reads the state file, if any, into c: groups with stored members
// come back Stable with fresh sessions (members that are gone expire and
// the group rebalances), the others Empty.
func (c *Coordinator) load() error {
	data, err := fsutil.ReadSmall(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("partlog/server/group: read state: %w", err)
	}
	groups, seq, err := decodeState(data)
	if err != nil {
		return fmt.Errorf("%w %s: %v", errCorruptState, c.path, err)
	}
	now := c.now()
	for _, g := range groups {
		s := &g.stored
		g.protocolType, g.protocol, g.generation, g.leader = s.protocolType, s.protocol, s.generation, s.leader
		for _, sm := range s.members {
			m := &member{
				memberInfo: sm.memberInfo, protocolType: s.protocolType, protocols: []protocol{{s.protocol, sm.metadata}},
				assignment: sm.assignment, deadline: now.Add(sm.sessionTimeout),
			}
			g.members = append(g.members, m)
			g.byID[m.id] = m
			if m.instanceID != nil {
				g.static[*m.instanceID] = m.id
			}
		}
		if len(g.members) > 0 {
			g.state = stateStable
			if !g.has(g.leader) {
				g.leader = g.members[0].id
			}
		} else {
			g.state = stateEmpty
			g.leader = ""
		}
		c.groups[g.id] = g
	}
	c.seq = seq
	return nil
}

type encoder struct{ b []byte }

func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(b []byte) {
	if b == nil {
		e.u32(math.MaxUint32)
		return
	}
	e.u32(uint32(len(b)))
	e.b = append(e.b, b...)
}

func (e *encoder) nullable(s *string) {
	if s == nil {
		e.u32(math.MaxUint32)
		return
	}
	e.str(*s)
}

func (e *encoder) offsets(m map[topicPartition]offset) {
	tps := make([]topicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	e.u32(uint32(len(tps)))
	for _, tp := range tps {
		o := m[tp]
		e.str(tp.topic)
		e.u32(uint32(tp.partition))
		e.u64(uint64(o.offset))
		e.u32(uint32(o.leaderEpoch))
		e.str(o.metadata)
		e.u64(uint64(o.commitMs))
		e.u64(o.seq)
	}
}

// decoder reads the state file; the first failure sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or malformed %s", what)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail(what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u16(what string) uint16 {
	if b := d.take(2, what); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if b := d.take(4, what); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if b := d.take(8, what); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) str(what string) string {
	n := d.u32(what)
	if n > uint32(len(d.b)) {
		d.fail(what)
		return ""
	}
	return string(d.take(int(n), what))
}

func (d *decoder) bytes(what string) []byte {
	n := d.u32(what)
	if n == math.MaxUint32 {
		return nil
	}
	if n > uint32(len(d.b)) {
		d.fail(what)
		return nil
	}
	return append([]byte{}, d.take(int(n), what)...)
}

func (d *decoder) nullable(what string) *string {
	if len(d.b) >= 4 && binary.BigEndian.Uint32(d.b) == math.MaxUint32 {
		d.b = d.b[4:]
		return nil
	}
	s := d.str(what)
	return &s
}

// count reads an element count, refusing one that the remaining bytes
// cannot hold (at least minSize bytes per element).
func (d *decoder) count(minSize int, what string) int {
	n := d.u32(what)
	if d.err == nil && uint64(n)*uint64(minSize) > uint64(len(d.b)) {
		d.fail(what + " count")
		return 0
	}
	return int(n)
}

func (d *decoder) duration(what string) time.Duration {
	v := int64(d.u64(what))
	if v < 0 || v > math.MaxInt64/int64(time.Millisecond) {
		d.fail(what)
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

func (d *decoder) offsets() map[topicPartition]offset {
	n := d.count(40, "offsets")
	m := make(map[topicPartition]offset, n)
	for range n {
		tp := topicPartition{topic: d.str("topic")}
		tp.partition = int32(d.u32("partition"))
		var o offset
		o.offset = int64(d.u64("offset"))
		o.leaderEpoch = int32(d.u32("leader epoch"))
		o.metadata = d.str("metadata")
		o.commitMs = int64(d.u64("commit time"))
		o.seq = d.u64("sequence")
		if d.err != nil {
			return nil
		}
		m[tp] = o
	}
	return m
}

// decodeState decodes a state file: magic, version, the commit sequence,
// the groups, and a CRC-32C of all that.
func decodeState(data []byte) ([]*group, uint64, error) {
	if len(data) < len(stateMagic)+4+8+4+4 || string(data[:len(stateMagic)]) != stateMagic {
		return nil, 0, errors.New("not a group coordinator state file")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32c.Checksum(body) != sum {
		return nil, 0, errors.New("checksum mismatch")
	}
	d := &decoder{b: body[len(stateMagic):]}
	version := d.u32("version")
	if version < 1 || version > stateVersion {
		return nil, 0, fmt.Errorf("unsupported version %d, want 1 to %d", version, stateVersion)
	}
	seq := d.u64("sequence")
	n := d.count(29, "groups")
	var groups []*group
	seen := map[string]bool{}
	for range n {
		g := newGroup(d.str("group id"))
		s := &g.stored
		s.protocolType = d.str("protocol type")
		s.protocol = d.str("protocol")
		s.generation = int32(d.u32("generation"))
		s.leader = d.str("leader")
		nm := d.count(40, "members")
		for range nm {
			var m storedMember
			m.id = d.str("member id")
			m.instanceID = d.nullable("instance id")
			m.clientID = d.str("client id")
			m.clientHost = d.str("client host")
			m.rebalanceTimeout = d.duration("rebalance timeout")
			m.sessionTimeout = d.duration("session timeout")
			m.metadata = d.bytes("member metadata")
			m.assignment = d.bytes("member assignment")
			s.members = append(s.members, m)
		}
		g.offsets = d.offsets()
		nt := d.count(14, "transactions")
		for range nt {
			pid := int64(d.u64("producer id"))
			st := &staged{epoch: int16(d.u16("producer epoch"))}
			st.offsets = d.offsets()
			g.txn[pid] = st
		}
		if version >= 2 {
			if epoch := int32(d.u32("consumer group epoch")); epoch < 0 {
				d.fail("consumer group epoch")
			} else if epoch > 0 {
				g.consumer = newCgroup(epoch)
			}
		}
		if d.err != nil {
			return nil, 0, d.err
		}
		if seen[g.id] {
			return nil, 0, fmt.Errorf("group %q twice", g.id)
		}
		seen[g.id] = true
		groups = append(groups, g)
	}
	if d.err != nil {
		return nil, 0, d.err
	}
	if len(d.b) != 0 {
		return nil, 0, fmt.Errorf("%d bytes after the last group", len(d.b))
	}
	return groups, seq, nil
}
