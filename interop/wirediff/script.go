package wirediff

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Target is a broker a script runs against.
type Target struct {
	Name   string // "kafka", "partlog"
	Addr   string
	NodeID int32
}

// Step is one request of a script, or a pause. Req builds the request
// for a target (its producer ids differ; everything else is the same);
// the answer is normalised and compared with the other target's.
type Step struct {
	Name string
	// Req builds the request (its version set). Nil: a pause of Sleep.
	Req func(e *Env) kmsg.Request
	// Sleep waits before the request.
	Sleep time.Duration
	// Conn names the connection (default ""): a script may use several,
	// as several clients would.
	Conn string
	// Retry resends the request (every 100 ms, up to RetryFor, default
	// 20 s) while its answer carries one of these error codes:
	// Kafka completes transactions and loads coordinators in the
	// background where partlog answers at once, so a script waits where
	// a client would retry. Codes 14 and 15 (coordinator loading, not
	// available) are always retried.
	Retry    []int16
	RetryFor time.Duration
	// Until resends the request (every 100 ms, up to RetryFor) until it
	// holds: a script waits for what Kafka does in the background (the
	// markers of a transaction, a rebalance).
	Until func(e *Env, r kmsg.Response) bool
	// Save reads values the next steps need (a producer id) from the
	// answer.
	Save func(e *Env, r kmsg.Response)
	// Skip lists Rules not applied to this step's answers.
	Skip []string
	// Ignore lists paths (dot-separated, [] for any index) whose values
	// are not compared in this step, each with its reason in the script.
	Ignore []string
	// Post rewrites the normalised answer (keeps only what the script
	// owns of a broker-wide listing, for instance).
	Post func(tree any)
	// NoCompare runs the step on both targets without comparing the
	// answers (a setup step whose answer is not the point).
	NoCompare bool
	// Allowed names the allowed difference (AllowedDifferences; the list
	// of server/doc.go) this step shows: Kafka's answer is not compared,
	// and partlog's must pass Expect.
	Allowed string
	Expect  func(r kmsg.Response) error
}

// Script is a named sequence of steps, run once on each target.
type Script struct {
	Name  string
	Steps []Step
}

// Env is a script's state on one target.
type Env struct {
	Target Target
	Script string
	// T0 is the script's reference time (ms), the same on both targets:
	// record timestamps are built from it.
	T0 int64

	mu       sync.Mutex
	conns    map[string]*Conn
	vars     map[string]int64
	strs     map[string]string
	topicIDs map[string]string // "id:<hex>" -> topic name
	pids     map[int64]string
	members  map[string]string
}

func newEnv(t Target, script string, t0 int64) *Env {
	return &Env{Target: t, Script: script, T0: t0, conns: map[string]*Conn{}, vars: map[string]int64{}, strs: map[string]string{},
		topicIDs: map[string]string{}, pids: map[int64]string{}, members: map[string]string{}}
}

// Set keeps a value for later steps.
func (e *Env) Set(k string, v int64) { e.mu.Lock(); e.vars[k] = v; e.mu.Unlock() }

// SetStr keeps a string for later steps (a member id).
func (e *Env) SetStr(k, v string) { e.mu.Lock(); e.strs[k] = v; e.mu.Unlock() }

// Str returns a kept string ("" if none).
func (e *Env) Str(k string) string { e.mu.Lock(); defer e.mu.Unlock(); return e.strs[k] }

// Get returns a kept value (-1 if none).
func (e *Env) Get(k string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.vars[k]; ok {
		return v
	}
	return -1
}

func (e *Env) topicOfID(id string) string {
	if strings.Trim(strings.TrimPrefix(id, "id:"), "0") == "" {
		return "<zero id>"
	}
	if name, ok := e.topicIDs[id]; ok {
		return "<id of " + name + ">"
	}
	return "<unknown id>"
}

func (e *Env) pidName(pid int64) string {
	if n, ok := e.pids[pid]; ok {
		return n
	}
	n := "<pid " + strconv.Itoa(len(e.pids)) + ">"
	e.pids[pid] = n
	return n
}

func (e *Env) memberName(id string) string {
	if n, ok := e.members[id]; ok {
		return n
	}
	n := "<member " + strconv.Itoa(len(e.members)) + ">"
	e.members[id] = n
	return n
}

// learn records the topic ids a raw answer names (Metadata,
// CreateTopics), so that later answers compare them by name.
func (e *Env) learn(v any) {
	switch x := v.(type) {
	case *Obj:
		name, _ := x.Vals["Topic"].(string)
		if name == "" {
			name, _ = x.Vals["Name"].(string)
		}
		if id, ok := x.Vals["TopicID"].(string); ok && name != "" {
			e.topicIDs[id] = name
		}
		for _, k := range x.Keys {
			e.learn(x.Vals[k])
		}
	case []any:
		for _, el := range x {
			e.learn(el)
		}
	}
}

// LearnTopicID records a topic id learnt otherwise.
func (e *Env) LearnTopicID(name string, id [16]byte) {
	e.learn(Tree(&struct {
		Topic   string
		TopicID [16]byte
	}{name, id}))
}

func (e *Env) conn(ctx context.Context, name string) (*Conn, error) {
	if c := e.conns[name]; c != nil {
		return c, nil
	}
	c, err := Dial(ctx, e.Target.Addr, "wirediff")
	if err != nil {
		return nil, err
	}
	e.conns[name] = c
	return c, nil
}

func (e *Env) close() {
	for _, c := range e.conns {
		c.Close()
	}
}

// Result is one step's normalised answer on one target: a tree, or the
// text of what went wrong ("connection closed").
type Result struct {
	Step string
	Tree any
	Err  string
	Raw  kmsg.Response
}

// Run runs a script on one target and returns one result per step.
func Run(ctx context.Context, t Target, s *Script, t0 int64) []Result {
	e := newEnv(t, s.Name, t0)
	defer e.close()
	out := make([]Result, 0, len(s.Steps))
	for i := range s.Steps {
		st := &s.Steps[i]
		out = append(out, runStep(ctx, e, st))
	}
	return out
}

var alwaysRetry = []int16{14, 15}

func runStep(ctx context.Context, e *Env, st *Step) Result {
	res := Result{Step: st.Name}
	if st.Sleep > 0 {
		select {
		case <-time.After(st.Sleep):
		case <-ctx.Done():
		}
	}
	if st.Req == nil {
		return res
	}
	retryFor := st.RetryFor
	if retryFor == 0 {
		retryFor = 20 * time.Second
	}
	deadline := time.Now().Add(retryFor)
	for {
		resp, err := e.roundTrip(ctx, st)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		again := false
		if resp != nil {
			codes := ErrorCodes(resp)
			for _, c := range append(st.Retry, alwaysRetry...) {
				if codes[c] {
					again = true
				}
			}
			if !again && st.Until != nil && !st.Until(e, resp) {
				again = true
			}
		}
		if again && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		res.Raw = resp
		if resp == nil {
			res.Err = "no response"
			return res
		}
		if st.Save != nil {
			st.Save(e, resp)
		}
		t := Tree(resp)
		e.learn(t)
		res.Tree = e.Normalise(t, st.Skip...)
		for _, p := range st.Ignore {
			ignore(res.Tree, strings.Split(p, "."))
		}
		if st.Post != nil {
			st.Post(res.Tree)
		}
		return res
	}
}

func (e *Env) roundTrip(ctx context.Context, st *Step) (kmsg.Response, error) {
	c, err := e.conn(ctx, st.Conn)
	if err != nil {
		return nil, err
	}
	req := st.Req(e)
	resp, err := c.RoundTrip(ctx, req)
	if err != nil {
		// The broker closed the connection (a request it refused to
		// parse): the next step reconnects.
		c.Close()
		delete(e.conns, st.Conn)
		if errors.Is(err, errTimeout) {
			return nil, err
		}
		return nil, errors.New("connection closed")
	}
	return resp, nil
}

// ignore replaces the value at path with "<ignored>".
func ignore(v any, path []string) {
	if len(path) == 0 {
		return
	}
	k := path[0]
	switch x := v.(type) {
	case *Obj:
		if len(path) == 1 {
			if _, ok := x.Vals[k]; ok {
				x.Set(k, "<ignored>")
			}
			return
		}
		ignore(x.Vals[k], path[1:])
	case []any:
		if k == "[]" {
			for _, el := range x {
				ignore(el, path[1:])
			}
		}
	}
}

// KeepPrefixed keeps, in the list field of the answer's top-level
// object, only the entries whose field key starts with prefix: a script
// compares its own groups or transactions in a broker-wide listing.
func KeepPrefixed(list, key, prefix string) func(any) {
	return func(v any) {
		o, ok := v.(*Obj)
		if !ok {
			return
		}
		l, ok := o.Vals[list].([]any)
		if !ok {
			return
		}
		keep := []any{}
		for _, el := range l {
			if eo, ok := el.(*Obj); ok {
				if s, ok := eo.Vals[key].(string); ok && !strings.HasPrefix(s, prefix) {
					continue
				}
			}
			keep = append(keep, el)
		}
		o.Set(list, keep)
	}
}

// ErrorCodes returns every ErrorCode in a response.
func ErrorCodes(resp kmsg.Response) map[int16]bool {
	codes := map[int16]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
					codes[int16(v.Field(i).Int())] = true
				}
				if f.IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Uint8 {
				for i := 0; i < v.Len(); i++ {
					walk(v.Index(i))
				}
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return codes
}

// Compare runs a script on both targets at once and returns, step by
// step, the differences of their normalised answers.
func Compare(ctx context.Context, a, b Target, s *Script) (ra, rb []Result, diffs map[int][]Difference) {
	t0 := time.Now().UnixMilli()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ra = Run(ctx, a, s, t0) }()
	go func() { defer wg.Done(); rb = Run(ctx, b, s, t0) }()
	wg.Wait()
	diffs = map[int][]Difference{}
	for i := range s.Steps {
		if s.Steps[i].NoCompare {
			continue
		}
		var d []Difference
		if st := &s.Steps[i]; st.Allowed != "" {
			why, listed := AllowedDifferences[st.Allowed]
			switch {
			case !listed || st.Expect == nil:
				d = append(d, Difference{Path: "(allowed)", A: st.Allowed, B: "not in AllowedDifferences, or no Expect"})
			case rb[i].Err != "":
				d = append(d, Difference{Path: "(allowed " + st.Allowed + ")", A: why, B: rb[i].Err})
			default:
				if err := st.Expect(rb[i].Raw); err != nil {
					d = append(d, Difference{Path: "(allowed " + st.Allowed + ")", A: why, B: err.Error()})
				}
			}
		} else if ra[i].Err != "" || rb[i].Err != "" {
			if ra[i].Err != rb[i].Err {
				d = append(d, Difference{Path: "(answer)", A: orTree(ra[i]), B: orTree(rb[i])})
			}
		} else {
			d = Diff(ra[i].Tree, rb[i].Tree)
		}
		if len(d) > 0 {
			diffs[i] = d
		}
	}
	return ra, rb, diffs
}

func orTree(r Result) any {
	if r.Err != "" {
		return r.Err
	}
	return r.Tree
}

// Report renders the differences of a compared script.
func Report(s *Script, a, b Target, ra, rb []Result, diffs map[int][]Difference) string {
	var sb strings.Builder
	for i, st := range s.Steps {
		d, ok := diffs[i]
		if !ok {
			continue
		}
		fmt.Fprintf(&sb, "step %d %q: %d difference(s) (%s vs %s)\n", i, st.Name, len(d), a.Name, b.Name)
		for _, x := range d {
			fmt.Fprintf(&sb, "    %s\n", x)
		}
	}
	return sb.String()
}
