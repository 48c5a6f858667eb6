package server

import (
	"math"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reqGen is the structure-aware request generator: it fills kmsg request
// types by reflection with values a server must be ready for (boundary
// integers, empty and long strings, nil and empty lists, unknown tagged
// fields, valid and invalid record batches, the names of existing
// topics), so that what it sends has the shape of a real request at its
// version and reaches the handlers instead of failing to decode.
type reqGen struct {
	r      *rand.Rand
	topics []string // names worth reusing (existing topics)
	flex   bool     // the version being filled is flexible
}

func newReqGen(seed uint64, topics ...string) *reqGen {
	return &reqGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), topics: topics}
}

// request returns a random request of key at a random version kmsg knows.
func (g *reqGen) request(key int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	return g.requestAt(req, int16(g.r.IntN(int(req.MaxVersion())+1)))
}

// requestAt fills req at version.
func (g *reqGen) requestAt(req kmsg.Request, version int16) kmsg.Request {
	if d, ok := req.(interface{ Default() }); ok {
		d.Default()
	}
	req.SetVersion(version)
	g.flex = req.IsFlexible()
	g.fill(reflect.ValueOf(req).Elem(), 0)
	return req
}

var tagsType = reflect.TypeOf(kmsg.Tags{})

func (g *reqGen) fill(v reflect.Value, depth int) {
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), t.Field(i)
		if !sf.IsExported() || (depth == 0 && sf.Name == "Version") {
			continue
		}
		g.value(f, sf.Name, depth)
	}
}

func (g *reqGen) value(f reflect.Value, name string, depth int) {
	switch {
	case f.Type() == tagsType:
		if g.flex && g.r.IntN(4) == 0 {
			tags := f.Addr().Interface().(*kmsg.Tags)
			for n := g.r.IntN(3); n > 0; n-- {
				tags.Set(uint32(100+g.r.IntN(100)), g.bytes(8))
			}
		}
		return
	}
	switch f.Kind() {
	case reflect.Bool:
		f.SetBool(g.r.IntN(2) == 0)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(g.integer(name, f.Type().Bits()))
	case reflect.String:
		f.SetString(g.str(name))
	case reflect.Pointer:
		if g.r.IntN(3) == 0 {
			return
		}
		p := reflect.New(f.Type().Elem())
		g.value(p.Elem(), name, depth)
		f.Set(p)
	case reflect.Array: // uuids
		if g.r.IntN(2) == 0 {
			for i := 0; i < f.Len(); i++ {
				f.Index(i).SetUint(uint64(g.r.IntN(256)))
			}
		}
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Uint8 {
			f.SetBytes(g.recordsOrBytes(name))
			return
		}
		if depth > 4 {
			return
		}
		n := g.r.IntN(4)
		if n == 0 && g.r.IntN(2) == 0 {
			return // nil: a null array where the version allows it
		}
		s := reflect.MakeSlice(f.Type(), n, n)
		for i := 0; i < n; i++ {
			e := s.Index(i)
			if e.Kind() == reflect.Struct {
				if d := e.Addr().MethodByName("Default"); d.IsValid() {
					d.Call(nil)
				}
				g.fill(e, depth+1)
			} else {
				g.value(e, name, depth+1)
			}
		}
		f.Set(s)
	case reflect.Struct:
		g.fill(f, depth+1)
	}
}

// integer picks a value of the given width: often a plausible one for
// the field's name, otherwise a boundary.
func (g *reqGen) integer(name string, bits int) int64 {
	if g.r.IntN(3) > 0 {
		switch name {
		case "Partition", "Partitions", "Replicas":
			return int64(g.r.IntN(4))
		case "NumPartitions", "Count":
			return int64(g.r.IntN(4)) - 1
		case "ProducerID":
			return int64(g.r.IntN(5)) - 1
		case "ProducerEpoch", "LeaderEpoch", "CurrentLeaderEpoch", "Generation":
			return int64(g.r.IntN(4)) - 1
		case "MaxWaitMillis", "TimeoutMillis", "TransactionTimeoutMillis":
			return int64(g.r.IntN(50))
		case "FetchOffset", "Timestamp", "Offset":
			return int64(g.r.IntN(10)) - 3
		case "Acks":
			return int64(g.r.IntN(3)) - 1
		case "ResourceType":
			return 2 // topic
		}
	}
	maxV := int64(math.MaxInt64) >> (64 - bits)
	minV := -maxV - 1
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return -1
	case 2:
		return maxV
	case 3:
		return minV
	default:
		return g.r.Int64N(1000)
	}
}

func (g *reqGen) str(name string) string {
	switch g.r.IntN(8) {
	case 0:
		return ""
	case 1:
		return "__consumer_offsets"
	case 2:
		b := make([]byte, g.r.IntN(300))
		for i := range b {
			b[i] = byte(32 + g.r.IntN(95))
		}
		return string(b)
	}
	if len(g.topics) > 0 {
		return g.topics[g.r.IntN(len(g.topics))]
	}
	return "t"
}

func (g *reqGen) bytes(most int) []byte {
	b := make([]byte, g.r.IntN(most+1))
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return b
}

// recordsOrBytes returns, for Records, a valid batch (plain, idempotent
// or transactional) or one with a byte flipped, else random bytes.
func (g *reqGen) recordsOrBytes(name string) []byte {
	if name != "Records" || g.r.IntN(4) == 0 {
		if g.r.IntN(5) == 0 {
			return nil
		}
		return g.bytes(64)
	}
	spec := batch.NewBatchSpec(0)
	switch g.r.IntN(3) {
	case 1:
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = int64(g.r.IntN(4)), 0, int32(g.r.IntN(3))
	case 2:
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = int64(g.r.IntN(4)), 0, 0
		spec.Transactional = true
	}
	rs := make([]batch.RecordSpec, 1+g.r.IntN(3))
	for i := range rs {
		rs[i] = batch.RecordSpec{Timestamp: time.Now().UnixMilli(), Value: g.bytes(32)}
	}
	var bld batch.Builder
	out, err := bld.AppendBatch(nil, &spec, rs)
	if err != nil {
		return g.bytes(64)
	}
	if g.r.IntN(5) == 0 {
		out[g.r.IntN(len(out))] ^= 0x20
	}
	return out
}

// sliceEntries counts the entries of every list in v (what kmsg
// allocated for), recursively.
func sliceEntries(v reflect.Value) int {
	n := 0
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			n += sliceEntries(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				n += sliceEntries(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 0
		}
		n += v.Len()
		for i := 0; i < v.Len(); i++ {
			n += sliceEntries(v.Index(i))
		}
	}
	return n
}
