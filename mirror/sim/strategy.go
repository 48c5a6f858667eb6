package sim

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/fsutil"
)

// Strategy is how a destination keeps producer state apart from its
// sources' (mirror.md §1.3, §2, §6 "PIDStrategy").
type Strategy int

// The strategies. Barrier is the design; the others exist for comparison.
const (
	// Barrier copies batches byte for byte and writes a MIRROR_PID_RESET
	// barrier when a destination stops mirroring (mirror.md §2.7, §3).
	Barrier Strategy = iota
	// None copies batches byte for byte and writes no barrier at stop.
	None
	// Negation is design D1: every mirrored batch's producer id becomes
	// -(pid+2) (-1 stays -1), the CRC is recomputed; no barrier.
	Negation
	// IdempotentNegation is design D2: as Negation, but only for pid >= 0
	// (negative ids pass through); no barrier.
	IdempotentNegation
	// BitField is design D3: pid >= 0 from source cluster U becomes
	// 1<<63 | region(U)<<31 | pid, with salted collision resolution and a
	// collision map persisted in the destination partition's directory;
	// no barrier.
	BitField
)

// Strategies lists every strategy, the design first.
var Strategies = []Strategy{Barrier, None, Negation, IdempotentNegation, BitField}

var strategyNames = [...]string{"barrier", "none", "negation", "idempotent-negation", "bitfield"}

// String returns the strategy's command-line name.
func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy returns the strategy named s.
func ParseStrategy(s string) (Strategy, error) {
	for i, n := range strategyNames {
		if n == s {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown strategy %q (want one of barrier, none, negation, idempotent-negation, bitfield)", s)
}

// WritesBarrier reports whether the stop procedure appends a barrier.
func (s Strategy) WritesBarrier() bool { return s == Barrier }

// Rewrites reports whether mirrored batches get a new producer id (and
// therefore a recomputed CRC).
func (s Strategy) Rewrites() bool { return s >= Negation }

// Negate is D1's mapping -(pid+2): 0 → -2, 5 → -7, -1 → -1, and applied
// twice it gives the original id back.
func Negate(pid int64) int64 { return -(pid + 2) }

// NegateIdempotent is D2's mapping: Negate for pid >= 0, identity for
// negative ids (so a second hop changes nothing).
func NegateIdempotent(pid int64) int64 {
	if pid < 0 {
		return pid
	}
	return Negate(pid)
}

// Region folds a 128-bit cluster UUID into D3's 32-bit region:
// (msb XOR lsb) AND 0xFFFFFFFF.
func Region(msb, lsb uint64) uint32 { return uint32((msb ^ lsb) & 0xFFFFFFFF) }

// BitFieldPID is D3's mapping of a source pid in region:
// 1<<63 | region<<31 | (pid AND 0x7FFFFFFF), as an int64.
func BitFieldPID(region uint32, pid int64) int64 {
	return int64(1<<63 | uint64(region)<<31 | uint64(pid)&0x7FFFFFFF)
}

// Errors of the bit-field mapping. mirror.md Q9 leaves both cases to the
// implementation; the simulator refuses them (the mirrored append fails)
// rather than storing an id that means something else.
var (
	// ErrPIDTooLarge: a source pid >= 2^31 does not fit the 31-bit field.
	ErrPIDTooLarge = errors.New("sim: producer id does not fit the bit-field design's 31 bits")
	// ErrMapsToNoProducer: the mapping gives -1 (NO_PRODUCER_ID).
	ErrMapsToNoProducer = errors.New("sim: bit-field mapping gives -1 (NO_PRODUCER_ID)")
)

// CollisionFile is the name of the bit-field design's persisted collision
// map in a destination partition's directory (the local stand-in for the
// MirrorPidCollision records of __mirror_state, mirror.md §1.3 D3).
const CollisionFile = "mirror-pid-collisions.json"

// Collision is one persisted resolution: OriginalPID of SourceClusterID
// was moved to region+Salt because CollidingClusterID already held the
// slot.
type Collision struct {
	SourceClusterID    string `json:"sourceClusterId"`
	OriginalPID        int64  `json:"originalPid"`
	Salt               int64  `json:"salt"`
	CollidingClusterID string `json:"collidingClusterId"`
	TimestampMs        int64  `json:"timestampMs"`
}

type originKey struct {
	cluster string
	pid     int64
}

// PIDMap is one destination partition's bit-field mapping state: which
// (source cluster, pid) owns which mapped id, and the salts that resolved
// collisions. Only the salts are persisted; the owners are rebuilt from
// use (a salt-free mapping is a pure function of its inputs).
type PIDMap struct {
	dir    string
	owners map[int64]originKey // mapped id → who holds it
	salts  map[originKey]Collision
}

// LoadPIDMap loads (or starts) the collision map of the partition
// directory dir.
func LoadPIDMap(dir string) (*PIDMap, error) {
	m := &PIDMap{dir: dir, owners: map[int64]originKey{}, salts: map[originKey]Collision{}}
	data, err := fsutil.ReadSmall(filepath.Join(dir, CollisionFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	var list []Collision
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", CollisionFile, err)
	}
	for _, c := range list {
		m.salts[originKey{c.SourceClusterID, c.OriginalPID}] = c
	}
	return m, nil
}

// Collisions returns the persisted resolutions, sorted.
func (m *PIDMap) Collisions() []Collision {
	out := make([]Collision, 0, len(m.salts))
	for _, c := range m.salts {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SourceClusterID != out[j].SourceClusterID {
			return out[i].SourceClusterID < out[j].SourceClusterID
		}
		return out[i].OriginalPID < out[j].OriginalPID
	})
	return out
}

// save writes the collision map atomically (fsutil.WriteFileAtomic:
// temporary file, fsync, rename, directory fsync; never through a link).
func (m *PIDMap) save() error {
	data, err := json.Marshal(m.Collisions())
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(m.dir, CollisionFile), data)
}

// Map returns the mapped id of pid from the source cluster clusterID
// (UUID halves msb, lsb). Negative ids pass through. A slot held by
// another (cluster, pid) is resolved by adding a salt to the region
// (mod 2^32) until a free slot is found; the salt is persisted before the
// mapped id is used.
func (m *PIDMap) Map(clusterID string, msb, lsb uint64, pid int64, nowMs int64) (int64, error) {
	if pid < 0 {
		return pid, nil
	}
	if pid > 0x7FFFFFFF {
		return 0, fmt.Errorf("%w: %d", ErrPIDTooLarge, pid)
	}
	key := originKey{clusterID, pid}
	region := Region(msb, lsb)
	if c, ok := m.salts[key]; ok {
		region += uint32(c.Salt)
	}
	mapped := BitFieldPID(region, pid)
	owner, taken := m.owners[mapped]
	if taken && owner != key {
		var salt int64
		for salt = 1; ; salt++ {
			mapped = BitFieldPID(region+uint32(salt), pid)
			if o, t := m.owners[mapped]; !t || o == key {
				break
			}
		}
		prev := m.salts[key].Salt
		m.salts[key] = Collision{SourceClusterID: clusterID, OriginalPID: pid, Salt: prev + salt,
			CollidingClusterID: owner.cluster, TimestampMs: nowMs}
		if err := m.save(); err != nil {
			return 0, err
		}
	}
	if mapped == -1 {
		return 0, fmt.Errorf("%w: cluster %s pid %d", ErrMapsToNoProducer, clusterID, pid)
	}
	m.owners[mapped] = key
	return mapped, nil
}

// Reset forgets the owners (the destination log was truncated to 0, so no
// mapped id is in use any more); persisted salts stay, so a producer keeps
// its mapped id across sessions.
func (m *PIDMap) Reset() { clear(m.owners) }

// RewritePIDs rewrites, in place, the producer id of every batch of
// records with f, and recomputes each rewritten batch's CRC (byte 17, over
// [21, end)). Batches whose id f leaves unchanged keep their bytes.
func RewritePIDs(records []byte, f func(pid int64) (int64, error)) error {
	w := batch.NewWalker(records)
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		pid := v.ProducerID()
		np, err := f(pid)
		if err != nil {
			return err
		}
		if np != pid {
			binary.BigEndian.PutUint64(v[batch.OffProducerID:], uint64(np))
			binary.BigEndian.PutUint32(v[batch.OffCRC:], v.ComputeCRC())
		}
	}
	if w.Offset() != len(records) {
		return fmt.Errorf("sim: short batch at %d", w.Offset())
	}
	return nil
}
