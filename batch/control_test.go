package batch

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseControlKey(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		version int16
		typ     ControlType
		known   bool
		corrupt bool
	}{
		{"commit", "00000001", 0, ControlCommit, true, false},
		{"abort", "00000000", 0, ControlAbort, true, false},
		{"mirror pid reset", "00000007", 0, ControlMirrorPidReset, true, false},
		{"kraft voters", "00000006", 0, ControlKRaftVoters, true, false},
		{"positive version, extra bytes ignored", "00050001ffff", 5, ControlCommit, true, false},
		{"unknown type kept", "00000063", 0, ControlType(99), false, false},
		{"negative type kept", "0000ffff", 0, ControlType(-1), false, false},
		{"type 8 unknown", "00000008", 0, ControlType(8), false, false},
		{"empty key", "", 0, 0, false, true},
		{"3-byte key", "000000", 0, 0, false, true},
		{"version -1", "ffff0001", 0, 0, false, true},
		{"version MinInt16", "80000000", 0, 0, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ver, typ, err := ParseControlKey(hexBytes(t, tc.key))
			if tc.corrupt {
				if !IsCorrupt(err) {
					t.Fatalf("ParseControlKey = %d, %d, %v; want ErrCorrupt", ver, typ, err)
				}
				return
			}
			if err != nil || ver != tc.version || typ != tc.typ {
				t.Fatalf("ParseControlKey = %d, %d, %v; want %d, %d, nil", ver, typ, err, tc.version, tc.typ)
			}
			if typ.Known() != tc.known {
				t.Errorf("Known() = %v, want %v", typ.Known(), tc.known)
			}
			if !tc.known && typ.String() != "UNKNOWN" {
				t.Errorf("String() = %q, want UNKNOWN", typ.String())
			}
		})
	}
}

func TestControlTypeNames(t *testing.T) {
	want := []string{"ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER",
		"KRAFT_VERSION", "KRAFT_VOTERS", "MIRROR_PID_RESET"}
	for i, name := range want {
		if got := ControlType(i).String(); got != name {
			t.Errorf("ControlType(%d).String() = %q, want %q", i, got, name)
		}
		if key := AppendControlKey(nil, ControlType(i)); !bytes.Equal(key, []byte{0, 0, 0, byte(i)}) {
			t.Errorf("AppendControlKey(%d) = %x", i, key)
		}
	}
}

func TestParseEndTxnMarker(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    EndTxnMarker
		corrupt bool
	}{
		{"version 0", "000000000007", EndTxnMarker{0, 7}, false},
		{"negative coordinator epoch", "0000ffffffff", EndTxnMarker{0, -1}, false},
		{"later version, extra bytes ignored", "00030000000a0102", EndTxnMarker{3, 10}, false},
		{"5 bytes", "0000000000", EndTxnMarker{}, true},
		{"empty", "", EndTxnMarker{}, true},
		{"negative version", "ffff00000007", EndTxnMarker{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseEndTxnMarker(hexBytes(t, tc.value))
			if tc.corrupt {
				if !IsCorrupt(err) {
					t.Fatalf("ParseEndTxnMarker = %+v, %v; want ErrCorrupt", m, err)
				}
				return
			}
			if err != nil || m != tc.want {
				t.Fatalf("ParseEndTxnMarker = %+v, %v; want %+v", m, err, tc.want)
			}
		})
	}
	if got := AppendEndTxnMarker([]byte{9}, 7); !bytes.Equal(got, hexBytes(t, "09000000000007")) {
		t.Errorf("AppendEndTxnMarker = %x", got)
	}
}

// mprVector is the value of formats.md §3.6's worked example.
const mprVector = "0000174141414141414141414141414141414141414141415100"

func TestParseMirrorPidReset(t *testing.T) {
	long := strings.Repeat("a", 32767)
	tooLong := strings.Repeat("b", 32768)
	tests := []struct {
		name    string
		value   []byte
		want    MirrorPidReset
		corrupt bool
	}{
		{"spec vector", hexBytes(t, mprVector), MirrorPidReset{0, "AAAAAAAAAAAAAAAAAAAAAQ"}, false},
		{"empty cluster id", hexBytes(t, "00000100"), MirrorPidReset{0, ""}, false},
		{"version 1 parsed as version 0", hexBytes(t, "0001024100"), MirrorPidReset{1, "A"}, false},
		{"negative version parsed as version 0", hexBytes(t, "ffff024100"), MirrorPidReset{-1, "A"}, false},
		{"unknown tagged fields", hexBytes(t, "000002410205"+"01ff"+"07"+"00"), MirrorPidReset{0, "A"}, false},
		{"trailing bytes ignored", append(hexBytes(t, mprVector), 0xde, 0xad), MirrorPidReset{0, "AAAAAAAAAAAAAAAAAAAAAQ"}, false},
		{"length 32767", joinBytes([]byte{0, 0}, AppendUvarint(nil, 32768), []byte(long), []byte{0}), MirrorPidReset{0, long}, false},
		{"length 32768", joinBytes([]byte{0, 0}, AppendUvarint(nil, 32769), []byte(tooLong), []byte{0}), MirrorPidReset{}, true},
		{"length MaxUint32-1", hexBytes(t, "0000ffffffff0f"), MirrorPidReset{}, true},
		{"null cluster id", hexBytes(t, "00000000"), MirrorPidReset{}, true},
		{"empty", nil, MirrorPidReset{}, true},
		{"version only", hexBytes(t, "0000"), MirrorPidReset{}, true},
		{"string past the end", hexBytes(t, "0000054141"), MirrorPidReset{}, true},
		{"tagged-field section missing", hexBytes(t, "00000241"), MirrorPidReset{}, true},
		{"tagged field past the end", hexBytes(t, "000002410100"+"05ff"), MirrorPidReset{}, true},
		{"length varint too long", hexBytes(t, "0000ffffffffff01"), MirrorPidReset{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMirrorPidReset(tc.value)
			if tc.corrupt {
				if !IsCorrupt(err) {
					t.Fatalf("ParseMirrorPidReset = %+v, %v; want ErrCorrupt", m, err)
				}
				return
			}
			if err != nil || m != tc.want {
				t.Fatalf("ParseMirrorPidReset = %+v, %v; want %+v", m, err, tc.want)
			}
		})
	}
}

// TestMirrorPidResetSpecBytes checks the byte vectors of formats.md §3.6.
func TestMirrorPidResetSpecBytes(t *testing.T) {
	const id = "AAAAAAAAAAAAAAAAAAAAAQ"
	value := AppendMirrorPidReset(nil, id)
	if !bytes.Equal(value, hexBytes(t, mprVector)) {
		t.Errorf("AppendMirrorPidReset(%q) = %x, want %s", id, value, mprVector)
	}
	if got := AppendMirrorPidReset(nil, ""); !bytes.Equal(got, hexBytes(t, "00000100")) {
		t.Errorf("AppendMirrorPidReset(\"\") = %x, want 00000100", got)
	}
	m, err := ParseMirrorPidReset(value)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.JSON(), `{"version":0,"sourceClusterId":"AAAAAAAAAAAAAAAAAAAAAQ"}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}

	b := AppendMirrorPidResetBatch(nil, ControlSpec{BaseOffset: 13, PartitionLeaderEpoch: 2, Timestamp: 1700000000070}, id)
	if len(b) != 98 || View(b).BatchLength() != 86 {
		t.Errorf("batch of %d bytes, batchLength %d; want 98 and 86", len(b), View(b).BatchLength())
	}
	wantRecord := joinBytes(hexBytes(t, "4800000008000000073"+"4"), hexBytes(t, mprVector), []byte{0})
	if len(wantRecord) != 37 {
		t.Fatalf("test vector has %d bytes", len(wantRecord))
	}
	if got := View(b).RecordsSection(); !bytes.Equal(got, wantRecord) {
		t.Errorf("record = %x, want %x", got, wantRecord)
	}
}

// TestControlBatchesMatchVectors rebuilds the control vectors from their
// fields with the control batch constructors.
func TestControlBatchesMatchVectors(t *testing.T) {
	tests := []struct {
		file  string
		build func(dst []byte) []byte
	}{
		{"v2_commit_marker.bin", func(dst []byte) []byte {
			return AppendEndTxnMarkerBatch(dst, ControlSpec{BaseOffset: 8, PartitionLeaderEpoch: 1,
				Timestamp: 1700000000040, ProducerID: 1000, ProducerEpoch: 5}, true, 7)
		}},
		{"v2_abort_marker.bin", func(dst []byte) []byte {
			return AppendEndTxnMarkerBatch(dst, ControlSpec{BaseOffset: 9, PartitionLeaderEpoch: 1,
				Timestamp: 1700000000050, ProducerID: 2000, ProducerEpoch: 0}, false, 3)
		}},
		{"v2_mirror_pid_reset.bin", func(dst []byte) []byte {
			// The producer fields are forced to -1 whatever the spec says.
			return AppendMirrorPidResetBatch(dst, ControlSpec{BaseOffset: 13, PartitionLeaderEpoch: 2,
				Timestamp: 1700000000070, ProducerID: 42, ProducerEpoch: 9}, "AAAAAAAAAAAAAAAAAAAAAQ")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile("testdata/vectors/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.build(nil); !bytes.Equal(got, want) {
				t.Errorf("built batch differs:\n got %x\nwant %x", got, want)
			}
			prefix := []byte("prefix")
			got := tc.build(bytes.Clone(prefix))
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Errorf("appending after a prefix gave %x", got)
			}
		})
	}
}

// TestAppendControlBatch builds a KRaft control batch and reads it back.
func TestAppendControlBatch(t *testing.T) {
	value := hexBytes(t, "0000000100")
	b := AppendControlBatch(nil, ControlSpec{BaseOffset: 3, PartitionLeaderEpoch: 1, Timestamp: 99,
		ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch}, ControlKRaftVersion, false, value)
	v, err := Check(b)
	if err != nil {
		t.Fatal(err)
	}
	if v.Attributes() != 0x20 || !v.IsControl() || v.IsTransactional() || v.RecordsCount() != 1 || v.BaseSequence() != -1 {
		t.Errorf("header: attributes %#x count %d base sequence %d", v.Attributes(), v.RecordsCount(), v.BaseSequence())
	}
	it := v.Records(v.RecordsSection())
	r, ok := it.Next()
	if !ok {
		t.Fatalf("no record: %v", it.Err())
	}
	if _, typ, err := ParseControlKey(r.Key); err != nil || typ != ControlKRaftVersion {
		t.Errorf("key %x: %v %v", r.Key, typ, err)
	}
	got, err := DecodeControlValue(ControlKRaftVersion, r.Value)
	if err != nil || got != (KRaftVersion{0, 1}) {
		t.Errorf("value = %+v, %v", got, err)
	}
	if r.Timestamp != 99 || r.OffsetDelta != 0 || r.TimestampDelta != 0 || r.HeaderCount != 0 {
		t.Errorf("record %+v", r)
	}
}

// kraftVotersValue is a VotersRecord with one voter and one endpoint.
const kraftVotersValue = "0000" + // version
	"02" + // one voter
	"00000001" + // voter id
	"00000000000000000000000000000001" + // directory id
	"02" + // one endpoint
	"0b" + "434f4e54524f4c4c4552" + // name CONTROLLER
	"0a" + "6c6f63616c686f7374" + // host localhost
	"ffff" + // port 65535 (unsigned)
	"00" + // endpoint tagged fields
	"0000" + "0001" + // kraft.version range
	"00" + // feature tagged fields
	"00" + // voter tagged fields
	"00" // top-level tagged fields

func TestDecodeControlValue(t *testing.T) {
	tests := []struct {
		name  string
		typ   ControlType
		value string
		want  any
		json  string
	}{
		{
			name: "end txn marker", typ: ControlCommit, value: "000000000007",
			want: EndTxnMarker{0, 7},
		},
		{
			name: "mirror pid reset", typ: ControlMirrorPidReset, value: mprVector,
			want: MirrorPidReset{0, "AAAAAAAAAAAAAAAAAAAAAQ"},
			json: `{"version":0,"sourceClusterId":"AAAAAAAAAAAAAAAAAAAAAQ"}`,
		},
		{
			name: "leader change", typ: ControlLeaderChange,
			value: "0000" + "00000002" + "03" + "0000000100" + "0000000200" + "02" + "0000000200" + "00",
			want:  LeaderChange{0, 2, []Voter{{1}, {2}}, []Voter{{2}}},
			json:  `{"version":0,"leaderId":2,"voters":[{"voterId":1},{"voterId":2}],"grantingVoters":[{"voterId":2}]}`,
		},
		{
			name: "leader change with empty arrays", typ: ControlLeaderChange,
			value: "0000" + "ffffffff" + "01" + "01" + "00",
			want:  LeaderChange{0, -1, []Voter{}, []Voter{}},
			json:  `{"version":0,"leaderId":-1,"voters":[],"grantingVoters":[]}`,
		},
		{
			name: "snapshot header", typ: ControlSnapshotHeader, value: "0000" + "0000018bcfe56800" + "00",
			want: SnapshotHeader{0, 1700000000000},
			json: `{"version":0,"lastContainedLogTimestamp":1700000000000}`,
		},
		{
			name: "snapshot footer", typ: ControlSnapshotFooter, value: "000000",
			want: SnapshotFooter{0}, json: `{"version":0}`,
		},
		{
			name: "kraft version", typ: ControlKRaftVersion, value: "0000000100",
			want: KRaftVersion{0, 1}, json: `{"version":0,"kRaftVersion":1}`,
		},
		{
			name: "kraft version with a tagged field and trailing bytes", typ: ControlKRaftVersion,
			value: "0000000101" + "0002abcd" + "ffff",
			want:  KRaftVersion{0, 1}, json: `{"version":0,"kRaftVersion":1}`,
		},
		{
			name: "kraft voters", typ: ControlKRaftVoters, value: kraftVotersValue,
			want: KRaftVoters{0, []KRaftVoter{{
				VoterID:             1,
				VoterDirectoryID:    "AAAAAAAAAAAAAAAAAAAAAQ",
				Endpoints:           []VoterEndpoint{{"CONTROLLER", "localhost", 65535}},
				KRaftVersionFeature: VersionRange{0, 1},
			}}},
			json: `{"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAQ",` +
				`"endpoints":[{"name":"CONTROLLER","host":"localhost","port":65535}],` +
				`"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}`,
		},
		{name: "type 8 is ignored", typ: 8, value: "0000", want: nil, json: "null"},
		{name: "type -1 is ignored", typ: -1, value: "", want: nil, json: "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			value := hexBytes(t, tc.value)
			got, err := DecodeControlValue(tc.typ, value)
			if err != nil {
				t.Fatalf("DecodeControlValue: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeControlValue = %#v, want %#v", got, tc.want)
			}
			if tc.json != "" {
				if j := ControlValueJSON(got); j != tc.json {
					t.Errorf("ControlValueJSON = %s, want %s", j, tc.json)
				}
			}
			if tc.want == nil {
				return
			}
			if !json.Valid([]byte(ControlValueJSON(got))) {
				t.Errorf("ControlValueJSON is not valid JSON: %s", ControlValueJSON(got))
			}
			// Every value cut short is corrupt.
			end := len(value)
			if tc.name == "kraft version with a tagged field and trailing bytes" {
				end -= 2 // the trailing bytes are not needed
			}
			for n := 0; n < end; n++ {
				if _, err := DecodeControlValue(tc.typ, value[:n]); !IsCorrupt(err) {
					t.Errorf("value cut to %d of %d bytes: err = %v, want ErrCorrupt", n, len(value), err)
				}
			}
		})
	}
}

// TestDecodeControlValueRejects covers malformed KRaft values beyond
// truncation.
func TestDecodeControlValueRejects(t *testing.T) {
	tests := []struct {
		name  string
		typ   ControlType
		value string
	}{
		{"voters array longer than the value", ControlLeaderChange, "0000" + "00000001" + "7f" + "00"},
		{"granting voters array longer than the value", ControlLeaderChange, "0000" + "00000001" + "01" + "10" + "00"},
		{"endpoint name null", ControlKRaftVoters, "0000" + "02" + "00000001" + "00000000000000000000000000000001" + "02" + "00" + "0a" + "6c6f63616c686f7374" + "0000" + "00" + "00000001" + "00" + "00" + "00"},
		{"tagged field size past the end", ControlSnapshotFooter, "0000" + "01" + "00" + "7f" + "00"},
		{"tagged count varint too long", ControlSnapshotFooter, "0000" + "ffffffffff01"},
		{"string longer than 32767", ControlKRaftVoters, "0000" + "02" + "00000001" + "00000000000000000000000000000001" + "02" + "818002"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeControlValue(tc.typ, hexBytes(t, tc.value))
			if !IsCorrupt(err) {
				t.Fatalf("DecodeControlValue = %#v, %v; want ErrCorrupt", got, err)
			}
		})
	}
}
