package batch

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
)

// ControlType is the type field of a control record key (formats.md §3.3).
type ControlType int16

// Control record types. Kafka format; do not change.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
	// ControlMirrorPidReset is the cluster-mirroring barrier (KIP-1279
	// prototype, formats.md §3.6): when met, all producer state is removed.
	ControlMirrorPidReset ControlType = 7
)

var controlNames = [...]string{"ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER",
	"SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS", "MIRROR_PID_RESET"}

// String returns Kafka's name of the type, or "UNKNOWN".
func (t ControlType) String() string {
	if t >= 0 && int(t) < len(controlNames) {
		return controlNames[t]
	}
	return "UNKNOWN"
}

// Known reports whether t is one of the types 0..7.
func (t ControlType) Known() bool { return t >= 0 && int(t) < len(controlNames) }

// ControlKeySize is the size of a control record key as written.
const ControlKeySize = 4

// ParseControlKey decodes a control record key (§3.2): at least 4 bytes, a
// non-negative version (a positive one is read as version 0). Unknown
// types are returned as they are, not rejected.
func ParseControlKey(key []byte) (version int16, typ ControlType, err error) {
	if len(key) < ControlKeySize {
		return 0, 0, corruptf(0, "control record key of %d bytes, at least 4 required", len(key))
	}
	version = be16(key)
	if version < 0 {
		return 0, 0, corruptf(0, "invalid version %d found for control record", version)
	}
	return version, ControlType(be16(key[2:])), nil
}

// AppendControlKey appends a version-0 control key of type t.
func AppendControlKey(dst []byte, t ControlType) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(uint16(t)))
}

// EndTxnMarker is the value of an ABORT or COMMIT control record (§3.4).
type EndTxnMarker struct {
	Version          int16
	CoordinatorEpoch int32
}

// EndTxnMarkerSize is the size of a version-0 marker value.
const EndTxnMarkerSize = 6

// ParseEndTxnMarker decodes an end-transaction marker value: at least 6
// bytes, non-negative version; extra bytes of later versions are ignored.
func ParseEndTxnMarker(value []byte) (EndTxnMarker, error) {
	if len(value) < EndTxnMarkerSize {
		return EndTxnMarker{}, corruptf(0, "end transaction marker value of %d bytes, at least 6 required", len(value))
	}
	m := EndTxnMarker{Version: be16(value), CoordinatorEpoch: be32(value[2:])}
	if m.Version < 0 {
		return EndTxnMarker{}, corruptf(0, "invalid end transaction marker version %d", m.Version)
	}
	return m, nil
}

// AppendEndTxnMarker appends the version-0 encoding of a marker value.
func AppendEndTxnMarker(dst []byte, coordinatorEpoch int32) []byte {
	dst = append(dst, 0, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(coordinatorEpoch))
}

// MirrorPidReset is the value of a MIRROR_PID_RESET control record
// (§3.6): the generated MirrorPidResetRecord at version 0.
type MirrorPidReset struct {
	Version         int16  `json:"version"`
	SourceClusterID string `json:"sourceClusterId"`
}

// maxFlexStringLen is the largest length of a non-null flexible string.
const maxFlexStringLen = 32767

// ParseMirrorPidReset decodes a MIRROR_PID_RESET value. Like the fork's
// generated reader it parses the bytes as version 0 whatever the Version
// field says, rejects a null cluster id and lengths above 32767, accepts
// unknown tagged fields and ignores trailing bytes. The returned string is
// a copy.
func ParseMirrorPidReset(value []byte) (MirrorPidReset, error) {
	r := flexReader{b: value}
	m := MirrorPidReset{Version: r.int16()}
	s, isNull := r.compactString()
	if r.err == nil && isNull {
		return MirrorPidReset{}, corruptf(0, "non-nullable field sourceClusterId was serialized as null")
	}
	m.SourceClusterID = string(s)
	r.taggedFields()
	if r.err != nil {
		return MirrorPidReset{}, r.err
	}
	return m, nil
}

// AppendMirrorPidReset appends the version-0 value for sourceClusterID:
// Version int16, compact string, empty tagged-field section.
func AppendMirrorPidReset(dst []byte, sourceClusterID string) []byte {
	dst = append(dst, 0, 0)
	dst = AppendUvarint(dst, uint32(len(sourceClusterID))+1)
	dst = append(dst, sourceClusterID...)
	return append(dst, 0)
}

// JSON returns the compact JSON Kafka's converter prints for the value,
// e.g. {"version":0,"sourceClusterId":"AAAAAAAAAAAAAAAAAAAAAQ"}.
func (m MirrorPidReset) JSON() string { return jsonString(m) }

// LeaderChange is a LEADER_CHANGE value (LeaderChangeMessage v0, §3.5).
type LeaderChange struct {
	Version        int16   `json:"version"`
	LeaderID       int32   `json:"leaderId"`
	Voters         []Voter `json:"voters"`
	GrantingVoters []Voter `json:"grantingVoters"`
}

// Voter is an element of LeaderChange's voter arrays.
type Voter struct {
	VoterID int32 `json:"voterId"`
}

// SnapshotHeader is a SNAPSHOT_HEADER value.
type SnapshotHeader struct {
	Version                   int16 `json:"version"`
	LastContainedLogTimestamp int64 `json:"lastContainedLogTimestamp"`
}

// SnapshotFooter is a SNAPSHOT_FOOTER value.
type SnapshotFooter struct {
	Version int16 `json:"version"`
}

// KRaftVersion is a KRAFT_VERSION value.
type KRaftVersion struct {
	Version      int16 `json:"version"`
	KRaftVersion int16 `json:"kRaftVersion"`
}

// KRaftVoters is a KRAFT_VOTERS value (VotersRecord v0).
type KRaftVoters struct {
	Version int16        `json:"version"`
	Voters  []KRaftVoter `json:"voters"`
}

// KRaftVoter is one voter of a VotersRecord.
type KRaftVoter struct {
	VoterID             int32           `json:"voterId"`
	VoterDirectoryID    string          `json:"voterDirectoryId"`
	Endpoints           []VoterEndpoint `json:"endpoints"`
	KRaftVersionFeature VersionRange    `json:"kRaftVersionFeature"`
}

// VoterEndpoint is one listener of a voter.
type VoterEndpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port uint16 `json:"port"`
}

// VersionRange is the supported kraft.version range of a voter.
type VersionRange struct {
	MinSupportedVersion int16 `json:"minSupportedVersion"`
	MaxSupportedVersion int16 `json:"maxSupportedVersion"`
}

// DecodeControlValue decodes the value of a control record of type t into
// one of EndTxnMarker, LeaderChange, SnapshotHeader, SnapshotFooter,
// KRaftVersion, KRaftVoters or MirrorPidReset. Unknown types give
// (nil, nil): they are to be ignored. It allocates and is meant for
// tooling, not for the append path.
func DecodeControlValue(t ControlType, value []byte) (any, error) {
	r := flexReader{b: value}
	var out any
	switch t {
	case ControlAbort, ControlCommit:
		m, err := ParseEndTxnMarker(value)
		if err != nil {
			return nil, err
		}
		return m, nil
	case ControlMirrorPidReset:
		m, err := ParseMirrorPidReset(value)
		if err != nil {
			return nil, err
		}
		return m, nil
	case ControlLeaderChange:
		m := LeaderChange{Version: r.int16(), LeaderID: r.int32()}
		m.Voters = r.voterArray()
		m.GrantingVoters = r.voterArray()
		r.taggedFields()
		out = m
	case ControlSnapshotHeader:
		m := SnapshotHeader{Version: r.int16(), LastContainedLogTimestamp: r.int64()}
		r.taggedFields()
		out = m
	case ControlSnapshotFooter:
		m := SnapshotFooter{Version: r.int16()}
		r.taggedFields()
		out = m
	case ControlKRaftVersion:
		m := KRaftVersion{Version: r.int16(), KRaftVersion: r.int16()}
		r.taggedFields()
		out = m
	case ControlKRaftVoters:
		m := KRaftVoters{Version: r.int16()}
		n := r.arrayLen()
		for i := 0; i < n && r.err == nil; i++ {
			var v KRaftVoter
			v.VoterID = r.int32()
			v.VoterDirectoryID = r.uuid()
			en := r.arrayLen()
			for j := 0; j < en && r.err == nil; j++ {
				var e VoterEndpoint
				e.Name = r.string()
				e.Host = r.string()
				e.Port = uint16(r.int16())
				r.taggedFields()
				v.Endpoints = append(v.Endpoints, e)
			}
			v.KRaftVersionFeature.MinSupportedVersion = r.int16()
			v.KRaftVersionFeature.MaxSupportedVersion = r.int16()
			r.taggedFields()
			r.taggedFields()
			m.Voters = append(m.Voters, v)
		}
		r.taggedFields()
		out = m
	default:
		return nil, nil
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// ControlValueJSON returns the compact JSON of a decoded control value.
func ControlValueJSON(v any) string { return jsonString(v) }

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// flexReader reads Kafka "flexible version" fields with a sticky error.
type flexReader struct {
	b   []byte
	p   int
	err *CorruptionError
}

func (r *flexReader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > len(r.b)-r.p {
		r.err = corruptf(int64(r.p), "control value: %s runs past the end (%d bytes left)", what, len(r.b)-r.p)
		return false
	}
	return true
}

func (r *flexReader) int16() int16 {
	if !r.need(2, "int16") {
		return 0
	}
	v := be16(r.b[r.p:])
	r.p += 2
	return v
}

func (r *flexReader) int32() int32 {
	if !r.need(4, "int32") {
		return 0
	}
	v := be32(r.b[r.p:])
	r.p += 4
	return v
}

func (r *flexReader) int64() int64 {
	if !r.need(8, "int64") {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b[r.p:]))
	r.p += 8
	return v
}

func (r *flexReader) uvarint() uint32 {
	if r.err != nil {
		return 0
	}
	u, n := ReadUvarint(r.b[r.p:])
	if n <= 0 {
		r.err = corruptf(int64(r.p), "control value: unsigned varint: %s", varintProblem(n))
		return 0
	}
	r.p += n
	return u
}

// compactString returns the bytes of a compact string (aliasing) and
// whether it was null.
func (r *flexReader) compactString() ([]byte, bool) {
	u := r.uvarint()
	if r.err != nil {
		return nil, false
	}
	if u == 0 {
		return nil, true
	}
	l := int(u - 1)
	if l > maxFlexStringLen {
		r.err = corruptf(int64(r.p), "control value: string of length %d exceeds %d", l, maxFlexStringLen)
		return nil, false
	}
	if !r.need(l, "string") {
		return nil, false
	}
	s := r.b[r.p : r.p+l]
	r.p += l
	return s, false
}

func (r *flexReader) string() string {
	s, isNull := r.compactString()
	if r.err == nil && isNull {
		r.err = corruptf(int64(r.p), "control value: non-nullable string was null")
	}
	return string(s)
}

func (r *flexReader) arrayLen() int {
	u := r.uvarint()
	if r.err != nil || u == 0 {
		return 0
	}
	n := int(u - 1)
	if n > len(r.b)-r.p {
		r.err = corruptf(int64(r.p), "control value: array of %d elements exceeds the %d bytes left", n, len(r.b)-r.p)
		return 0
	}
	return n
}

func (r *flexReader) voterArray() []Voter {
	n := r.arrayLen()
	out := make([]Voter, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, Voter{VoterID: r.int32()})
		r.taggedFields()
	}
	return out
}

func (r *flexReader) uuid() string {
	if !r.need(16, "uuid") {
		return ""
	}
	s := base64.RawURLEncoding.EncodeToString(r.b[r.p : r.p+16])
	r.p += 16
	return s
}

// taggedFields skips a tagged-field section (unknown tags are accepted).
func (r *flexReader) taggedFields() {
	n := r.uvarint()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.uvarint()
		size := r.uvarint()
		if r.need(int(size), "tagged field") {
			r.p += int(size)
		}
	}
}

// ControlRecord reads the first record of control batch v into r (its
// records decompressed into scratch when the batch is compressed, at most
// 1 MiB) and returns the type of its key: the one reader of a control
// batch's type, for the producer state, the barrier tests and the tools.
// data is the records section as read (scratch, grown, when the batch is
// compressed); r aliases it. A batch that is not a control batch, has no
// record, or whose first record or key cannot be read gives an error.
func (v View) ControlRecord(scratch []byte, r *Record) (t ControlType, data []byte, err error) {
	if !v.IsControl() {
		return 0, scratch, corruptf(0, "not a control batch")
	}
	if v.RecordsCount() <= 0 {
		return 0, scratch, corruptf(0, "control batch without records")
	}
	data, err = v.RecordData(scratch, 1<<20)
	if err != nil {
		return 0, scratch, err
	}
	it := v.Records(data)
	first, ok := it.Next()
	if !ok {
		err := it.Err()
		if err == nil {
			err = corruptf(HeaderSize, "no record")
		}
		return 0, data, err
	}
	*r = *first
	_, t, err = ParseControlKey(r.Key)
	return t, data, err
}

// IsBarrier reports whether v is a MIRROR_PID_RESET barrier: a control
// batch whose first record's key has type 7, whatever its producer fields
// or value version (producer-state.md §6.8 R1).
func (v View) IsBarrier() bool {
	if !v.IsControl() || v.RecordsCount() <= 0 {
		return false
	}
	var r Record
	t, _, err := v.ControlRecord(nil, &r)
	return err == nil && t == ControlMirrorPidReset
}
