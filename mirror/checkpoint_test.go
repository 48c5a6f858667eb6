package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/crc32c"
)

// TestCheckpointSpecVector decodes the example of mirror.md §2.4 (exact,
// CRC included) and encodes it back byte for byte.
func TestCheckpointSpecVector(t *testing.T) {
	data, err := os.ReadFile("testdata/spec-example.checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ParseTopicID("ASNFZ4mrze8P7cuph2VDIQ")
	want := Checkpoint{State: StateStopping, Step: StepPositionRecorded, MirrorName: "dr-link",
		SourceClusterID: "ERERESIiIiIzMzMzRERERA", TopicID: id, Partition: 0, Session: 4,
		AlignTargetEpoch: -1, AlignTargetOffset: 0, LastMirrorEpoch: 3, LastMirrorOffset: 3,
		StopPolicy: AbortOpen, StopLeaderEpoch: -1, BarrierOffset: -1, UpdatedMs: 1700000000000}
	if c != want {
		t.Fatalf("decoded %+v\nwant    %+v", c, want)
	}
	out, err := AppendCheckpoint(nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, data) {
		t.Fatalf("encoded\n%s\nwant\n%s", out, data)
	}
}

// withCRC appends the crc32c line to body (the lines before it).
func withCRC(body string) []byte {
	return fmt.Appendf([]byte(body), "crc32c %08x\n", crc32c.Checksum([]byte(body)))
}

func specBody(t testing.TB) string {
	data, err := os.ReadFile("testdata/spec-example.checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	return s[:strings.LastIndex(s, "crc32c ")]
}

// TestCheckpointCorrupt: every kind of damage is a *CheckpointError
// naming the reason (and the line); the CRC is fixed up where the test is
// about the content.
func TestCheckpointCorrupt(t *testing.T) {
	body := specBody(t)
	good := withCRC(body)
	flip := bytes.Clone(good)
	flip[30] ^= 1
	cases := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"bit flip (bad CRC)", flip, "crc32c mismatch"},
		{"empty", nil, "line feed"},
		{"truncated", good[:len(good)-5], "line feed"},
		{"uppercase crc", bytes.Replace(good, []byte("da08566a"), []byte("DA08566A"), 1), "malformed crc32c"},
		{"trailing line", append(bytes.Clone(good), "x\n"...), "lines"},
		{"bad header", withCRC(strings.Replace(body, "mirror-checkpoint 1", "mirror-chekpoint 1", 1)), "bad header"},
		{"future version", withCRC(strings.Replace(body, "mirror-checkpoint 1", "mirror-checkpoint 2", 1)), "unsupported version"},
		{"keys swapped", withCRC(strings.Replace(body, "state STOPPING\nstep POSITION_RECORDED", "step POSITION_RECORDED\nstate STOPPING", 1)), `want key "state"`},
		{"missing key", withCRC(strings.Replace(body, "partition 0\n", "", 1)), "lines"},
		{"unknown state", withCRC(strings.Replace(body, "state STOPPING", "state RUNNING", 1)), "unknown state"},
		{"NONE is not a file state", withCRC(strings.Replace(body, "state STOPPING", "state NONE", 1)), "unknown state"},
		{"step of another state", withCRC(strings.Replace(body, "state STOPPING", "state MIRRORING", 1)), "does not belong"},
		{"leading zero", withCRC(strings.Replace(body, "session 4", "session 04", 1)), "bad value"},
		{"plus sign", withCRC(strings.Replace(body, "session 4", "session +4", 1)), "bad value"},
		{"epoch below -1", withCRC(strings.Replace(body, "stop_leader_epoch -1", "stop_leader_epoch -2", 1)), "bad value"},
		{"epoch overflow", withCRC(strings.Replace(body, "last_mirror_epoch 3", "last_mirror_epoch 2147483648", 1)), "bad value"},
		{"negative partition", withCRC(strings.Replace(body, "partition 0", "partition -1", 1)), "bad value"},
		{"bad topic id", withCRC(strings.Replace(body, "ASNFZ4mrze8P7cuph2VDIQ", "ASNFZ4mrze8P7cuph2VDI", 1)), "bad topic id"},
		{"space in a name", withCRC(strings.Replace(body, "dr-link", "dr link", 1)), "bad value"},
		{"unknown policy", withCRC(strings.Replace(body, "ABORT_OPEN", "KEEP_OPEN", 1)), "unknown stop policy"},
		{"CRLF", withCRC(strings.ReplaceAll(body, "\n", "\r\n")), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCheckpoint(tc.data)
			var ce *CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("err %v, want a *CheckpointError", err)
			}
			if !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("reason %q, want it to mention %q", ce.Reason, tc.reason)
			}
		})
	}
}

// TestCheckpointAliases: PREPARING and LOG_TRUNCATION read as
// LOG_ALIGNMENT (mirror.md §2.2).
func TestCheckpointAliases(t *testing.T) {
	body := specBody(t)
	for _, alias := range []string{"PREPARING", "LOG_TRUNCATION"} {
		b := strings.Replace(body, "state STOPPING\nstep POSITION_RECORDED", "state "+alias+"\nstep INTENT", 1)
		c, err := ParseCheckpoint(withCRC(b))
		if err != nil || c.State != StateLogAlignment || c.Step != StepIntent {
			t.Fatalf("%s: %+v %v", alias, c, err)
		}
	}
}

// TestCheckpointRoundTrip: every state/step combination, empty names, and
// extreme values encode and decode back; invalid values are refused by
// the encoder.
func TestCheckpointRoundTrip(t *testing.T) {
	for s := StateLogAlignment; s <= StateFailed; s++ {
		for st := StepNone; st <= StepBarrierWritten; st++ {
			c := newCheckpoint()
			c.State, c.Step = s, st
			c.Session, c.UpdatedMs, c.BarrierOffset = 1<<62, -5, 1<<40
			data, err := AppendCheckpoint(nil, &c)
			if !validStep(s, st) {
				if !errors.Is(err, ErrInvalidCheckpoint) {
					t.Fatalf("%s/%s encoded: %v", s, st, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseCheckpoint(data)
			if err != nil || got != c {
				t.Fatalf("%s/%s: %+v %v", s, st, got, err)
			}
		}
	}
	bad := newCheckpoint()
	bad.State, bad.SourceClusterID = StateStopped, "a b"
	if _, err := AppendCheckpoint(nil, &bad); !errors.Is(err, ErrInvalidCheckpoint) {
		t.Fatalf("name with a space: %v", err)
	}
}

// FuzzParseCheckpoint: no panic; every error is a *CheckpointError; a
// decoded checkpoint encodes to bytes that decode to the same value, and
// to the input itself unless the input used a state alias.
func FuzzParseCheckpoint(f *testing.F) {
	data, err := os.ReadFile("testdata/spec-example.checkpoint")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(withCRC(strings.Replace(string(data[:bytes.LastIndex(data, []byte("crc32c"))]), "STOPPING\nstep POSITION_RECORDED", "PREPARING\nstep INTENT", 1)))
	c := newCheckpoint()
	c.State = StateMirroring
	seed, _ := AppendCheckpoint(nil, &c)
	f.Add(seed)
	f.Add([]byte("mirror-checkpoint 1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ParseCheckpoint(in)
		if err != nil {
			var ce *CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptCheckpoint) {
				t.Fatalf("untyped error %T %v", err, err)
			}
			return
		}
		out, err := AppendCheckpoint(nil, &c)
		if err != nil {
			t.Fatalf("decoded checkpoint does not encode: %v", err)
		}
		c2, err := ParseCheckpoint(out)
		if err != nil || c2 != c {
			t.Fatalf("re-decode: %+v %v", c2, err)
		}
		if !bytes.Contains(in, []byte("PREPARING")) && !bytes.Contains(in, []byte("LOG_TRUNCATION")) && !bytes.Equal(in, out) {
			t.Fatalf("two encodings of one checkpoint:\n%q\n%q", in, out)
		}
	})
}
