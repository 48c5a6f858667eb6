package server

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequestShapesMatchKmsg encodes random requests of every API with a
// shape, at every version kmsg knows, and checks the walk against kmsg:
// it consumes exactly the bytes kmsg wrote, counts at least the entries
// kmsg decodes, and kmsg decodes what the walk accepts.
func TestRequestShapesMatchKmsg(t *testing.T) {
	g := newReqGen(1, "a", "b")
	keys := make([]int16, 0, len(requestShapes))
	for k := range requestShapes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for _, key := range keys {
		maxV := kmsg.RequestForKey(key).MaxVersion()
		for v := int16(0); v <= maxV; v++ {
			for i := 0; i < rounds; i++ {
				req := g.requestAt(kmsg.RequestForKey(key), v)
				body := req.AppendTo(nil)
				w := shapeWalk{b: body, version: v, flexible: v >= requestShapes[key].flexibleFrom, left: 1 << 30}
				w.structFields(requestShapes[key].fields)
				if w.err != nil || len(w.b) != 0 {
					t.Fatalf("%s v%d: walk: %v, %d of %d bytes left\n%+v", apiName(key), v, w.err, len(w.b), len(body), req)
				}
				dec := kmsg.RequestForKey(key)
				dec.SetVersion(v)
				if err := dec.ReadFrom(body); err != nil {
					t.Fatalf("%s v%d: kmsg cannot decode its own encoding: %v", apiName(key), v, err)
				}
				if n := sliceEntries(reflect.ValueOf(dec)); w.entries < n {
					t.Fatalf("%s v%d: walk counted %d entries, kmsg decoded %d", apiName(key), v, w.entries, n)
				}
			}
		}
	}
}

// TestRequestShapesEveryServedAPI: every API the server or its group
// coordinator answers has a shape, so no request reaches kmsg's decoder
// unchecked.
func TestRequestShapesEveryServedAPI(t *testing.T) {
	for _, m := range []map[int16]versionRange{apis, groupAPIs} {
		for key := range m {
			if _, ok := requestShapes[key]; !ok {
				t.Errorf("%s (key %d) is answered but has no request shape", apiName(key), key)
			}
		}
	}
}

// TestRequestShapeRefusals: counts beyond the bytes present and past the
// entry budget are refused before anything is allocated.
func TestRequestShapeRefusals(t *testing.T) {
	// Produce v8: transactional id null, acks, timeout, then a topic
	// array claiming 50 million topics in a few bytes.
	lying := []byte{0xff, 0xff, 0, 1, 0, 0, 0x27, 0x10, 0x02, 0xfa, 0xf0, 0x80, 0, 1, 'a'}
	if _, _, err := checkRequestShape(0, 8, lying, 1000); !errors.Is(err, errBadRequest) {
		t.Fatalf("array count past the bytes: %v, want errBadRequest", err)
	}
	// A valid request of 3 topics x 2 partitions holds 9 entries.
	req := kmsg.NewPtrProduceRequest()
	req.Version = 8
	for i := 0; i < 3; i++ {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rt.Partitions = make([]kmsg.ProduceRequestTopicPartition, 2)
		req.Topics = append(req.Topics, rt)
	}
	body := req.AppendTo(nil)
	if n, ok, err := checkRequestShape(0, 8, body, 9); !ok || err != nil || n != 9 {
		t.Fatalf("9 entries within a budget of 9: %d %v %v", n, ok, err)
	}
	if _, _, err := checkRequestShape(0, 8, body, 8); !errors.Is(err, errTooManyEntries) {
		t.Fatalf("9 entries within a budget of 8: %v, want errTooManyEntries", err)
	}
	// A flexible request's tagged fields count too.
	req.Version = 9
	for i := 0; i < 5; i++ {
		req.UnknownTags.Set(uint32(200+i), []byte{1})
	}
	body = req.AppendTo(nil)
	if _, _, err := checkRequestShape(0, 9, body, 13); !errors.Is(err, errTooManyEntries) {
		t.Fatalf("9 entries and 5 tags within a budget of 13: %v, want errTooManyEntries", err)
	}
	if _, ok, _ := checkRequestShape(29, 1, nil, 10); ok {
		t.Fatal("DescribeACLs has no shape, but one was walked")
	}
}
