package wirediff

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A response is compared as a tree: every struct an Obj (fields in
// declaration order), every slice a []any, every scalar an int64, bool,
// string or nil (a null pointer), byte slices as hex strings, and the
// record batches of a fetch decoded into one Obj per batch. Normalising
// rewrites the tree; diffing walks two of them.

// Obj is a struct's fields in order.
type Obj struct {
	Keys []string
	Vals map[string]any
}

func newObj() *Obj { return &Obj{Vals: map[string]any{}} }

// Set sets (or adds) a field.
func (o *Obj) Set(k string, v any) {
	if _, ok := o.Vals[k]; !ok {
		o.Keys = append(o.Keys, k)
	}
	o.Vals[k] = v
}

// Get returns a field.
func (o *Obj) Get(k string) (any, bool) { v, ok := o.Vals[k]; return v, ok }

// Delete removes a field.
func (o *Obj) Delete(k string) {
	if _, ok := o.Vals[k]; !ok {
		return
	}
	delete(o.Vals, k)
	for i, key := range o.Keys {
		if key == k {
			o.Keys = append(o.Keys[:i], o.Keys[i+1:]...)
			break
		}
	}
}

// Tree converts a kmsg response (or any kmsg struct) into a tree.
func Tree(v any) any { return tree(reflect.ValueOf(v), "") }

func tree(v reflect.Value, name string) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return tree(v.Elem(), name)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(kmsg.Tags{}) {
			return nil
		}
		o := newObj()
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Type == reflect.TypeOf(kmsg.Tags{}) {
				continue
			}
			o.Set(f.Name, tree(v.Field(i), f.Name))
		}
		return o
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Kind() == reflect.Slice && v.IsNil() {
				return nil
			}
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			if name == "RecordBatches" || name == "Records" {
				return decodeBatches(b)
			}
			if v.Kind() == reflect.Array && name == "TopicID" {
				return "id:" + hex.EncodeToString(b)
			}
			return "0x" + hex.EncodeToString(b)
		}
		if v.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = tree(v.Index(i), name)
		}
		return out
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.String:
		return v.String()
	case reflect.Map:
		o := newObj()
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			o.Set(fmt.Sprint(k), tree(v.MapIndex(k), ""))
		}
		return o
	}
	return fmt.Sprintf("<%s>", v.Kind())
}

// decodeBatches turns record batches into one Obj per batch: the
// header's fields, whether its CRC holds, and its records decoded
// (decompressed first). Bytes after the last whole batch are reported
// as a Partial field of their own (Kafka may end a fetch inside a
// batch).
func decodeBatches(b []byte) any {
	out := []any{}
	for len(b) > 0 {
		if len(b) < batch.HeaderSize {
			out = append(out, partial(len(b)))
			break
		}
		size := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if size < batch.HeaderSize || size > len(b) {
			out = append(out, partial(len(b)))
			break
		}
		out = append(out, decodeBatch(batch.View(b[:size])))
		b = b[size:]
	}
	return out
}

func partial(n int) *Obj {
	o := newObj()
	o.Set("PartialBatchBytes", int64(n))
	return o
}

func decodeBatch(v batch.View) *Obj {
	var h batch.BatchHeader
	v.DecodeHeader(&h)
	o := newObj()
	o.Set("BaseOffset", h.BaseOffset)
	o.Set("Length", int64(h.BatchLength))
	o.Set("PartitionLeaderEpoch", int64(h.PartitionLeaderEpoch))
	o.Set("Magic", int64(h.Magic))
	o.Set("CRCValid", h.Magic == 2 && batch.Checksum(v[batch.OffAttributes:]) == h.CRC)
	o.Set("Compression", int64(h.Attributes&7))
	o.Set("LogAppendTime", h.Attributes&8 != 0)
	o.Set("Transactional", h.Attributes&16 != 0)
	o.Set("Control", h.Attributes&32 != 0)
	o.Set("LastOffsetDelta", int64(h.LastOffsetDelta))
	o.Set("BaseTimestamp", h.BaseTimestamp)
	o.Set("MaxTimestamp", h.MaxTimestamp)
	o.Set("ProducerID", h.ProducerID)
	o.Set("ProducerEpoch", int64(h.ProducerEpoch))
	o.Set("BaseSequence", int64(h.BaseSequence))
	o.Set("NumRecords", int64(h.RecordsCount))
	if h.Magic != 2 {
		return o
	}
	data, err := v.RecordData(nil, 64<<20)
	if err != nil {
		o.Set("RecordsError", err.Error())
		return o
	}
	recs := []any{}
	it := v.Records(data)
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		ro := newObj()
		ro.Set("OffsetDelta", int64(r.OffsetDelta))
		ro.Set("TimestampDelta", r.TimestampDelta)
		ro.Set("Key", bytesOrNil(r.Key))
		ro.Set("Value", bytesOrNil(r.Value))
		hs := []any{}
		hi := r.Headers()
		for hd, ok := hi.Next(); ok; hd, ok = hi.Next() {
			ho := newObj()
			ho.Set("Key", string(hd.Key))
			ho.Set("Value", bytesOrNil(hd.Value))
			hs = append(hs, ho)
		}
		ro.Set("Headers", hs)
		recs = append(recs, ro)
	}
	if err := it.Err(); err != nil {
		o.Set("RecordsError", err.Error())
	}
	o.Set("Records", recs)
	return o
}

func bytesOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return printable(b)
}

// printable shows text as text and anything else as hex.
func printable(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "0x" + hex.EncodeToString(b)
		}
	}
	return strconv.Quote(string(b))
}

// Render prints a tree, one field a line, for failure messages.
func Render(v any) string {
	var sb strings.Builder
	render(&sb, v, 0)
	return sb.String()
}

func render(sb *strings.Builder, v any, depth int) {
	ind := strings.Repeat("  ", depth)
	switch x := v.(type) {
	case *Obj:
		sb.WriteString("{\n")
		for _, k := range x.Keys {
			fmt.Fprintf(sb, "%s  %s: ", ind, k)
			render(sb, x.Vals[k], depth+1)
		}
		sb.WriteString(ind + "}\n")
	case []any:
		if len(x) == 0 {
			sb.WriteString("[]\n")
			return
		}
		sb.WriteString("[\n")
		for _, e := range x {
			sb.WriteString(ind + "  ")
			render(sb, e, depth+1)
		}
		sb.WriteString(ind + "]\n")
	default:
		fmt.Fprintf(sb, "%v\n", show(v))
	}
}

func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	}
	return fmt.Sprint(v)
}
