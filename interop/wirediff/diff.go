package wirediff

import (
	"fmt"
	"reflect"
	"strings"
)

// Difference is one place where two trees differ.
type Difference struct {
	Path string
	A, B any // the values (nil for a missing field)
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: %s vs %s", d.Path, brief(d.A), brief(d.B))
}

func brief(v any) string {
	switch v.(type) {
	case *Obj, []any:
		s := strings.TrimSpace(Render(v))
		if len(s) > 600 {
			s = s[:600] + " …"
		}
		return s
	}
	return show(v)
}

// Diff lists the differences between two trees.
func Diff(a, b any) []Difference {
	var out []Difference
	diff("", a, b, &out)
	return out
}

func diff(path string, a, b any, out *[]Difference) {
	switch x := a.(type) {
	case *Obj:
		y, ok := b.(*Obj)
		if !ok {
			*out = append(*out, Difference{path, a, b})
			return
		}
		for _, k := range x.Keys {
			yv, ok := y.Vals[k]
			if !ok {
				*out = append(*out, Difference{join(path, k), x.Vals[k], "<absent>"})
				continue
			}
			diff(join(path, k), x.Vals[k], yv, out)
		}
		for _, k := range y.Keys {
			if _, ok := x.Vals[k]; !ok {
				*out = append(*out, Difference{join(path, k), "<absent>", y.Vals[k]})
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok {
			*out = append(*out, Difference{path, a, b})
			return
		}
		n := min(len(x), len(y))
		for i := 0; i < n; i++ {
			diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], out)
		}
		for i := n; i < len(x); i++ {
			*out = append(*out, Difference{fmt.Sprintf("%s[%d]", path, i), x[i], "<absent>"})
		}
		for i := n; i < len(y); i++ {
			*out = append(*out, Difference{fmt.Sprintf("%s[%d]", path, i), "<absent>", y[i]})
		}
	default:
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, Difference{path, a, b})
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
