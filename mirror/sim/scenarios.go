package sim

import (
	"fmt"
	"os"
	"path/filepath"
)

// Topology is one executable scenario of mirror.md §4.
type Topology struct {
	// Name is the command-line name.
	Name string
	// Section is the section of mirror.md the scenario follows.
	Section string
	// Summary says what the scenario does, in one line.
	Summary string
	run     func(s *script)
}

// Topologies lists every scenario, in the order of mirror.md §4.
var Topologies = []Topology{
	{"active-passive", "4.1", "A → B; A is lost; B stops and its own producer 5(B) writes", activePassive},
	{"failback", "4.2", "4.1, then A returns, re-mirrors B (failback), stops, and B mirrors A again", failback},
	{"fan-out", "4.3", "A → B and A → C; B stops, then C stops", fanOut},
	{"fan-in", "4.4", "A → C on t1, B → C on t2 and on the transactional topic tx; C stops each", fanIn},
	{"chain", "4.5, 4.6 hop 1", "A → B → C; A is lost, B stops, 5(B) writes after B's entry for 5(A) expired", chain},
	{"chain-keep-open", "4.5 with KEEP_OPEN (T48)", "A → B → C; 5(A)'s transaction is open when B stops without truncating (comparison strategies only); 5(B) at epoch 1 runs a transaction and commits", chainKeepOpen},
	{"chain-hop2", "4.6 hop 2", "A → B → C; B is lost, C stops and 5(C) writes; B returns, still a mirror of A", chainHop2},
	{"chain-both", "4.6 both", "chain, then C stops too and 5(C) writes", chainBoth},
	{"chain-hop2-lag", "4.6 hop 2 with lag", "B stops and writes, C stops before fetching B's barrier", chainHop2Lag},
	{"chain-rewire", "4.6 re-wire", "B is lost; C stops and is re-pointed to A (truncated to 0)", chainRewire},
	{"reassignment", "4.7", "C mirrors A, then B, then A again, with local writes on C in between", reassignment},
	{"chain4", "4.8", "A → B → C → D (5(A) at producer epoch 2); B, C and D stop in turn, each one's own producer writes after expiry", chain4},
}

// FindTopology returns the topology named name.
func FindTopology(name string) (Topology, error) {
	for _, t := range Topologies {
		if t.Name == name {
			return t, nil
		}
	}
	return Topology{}, fmt.Errorf("unknown topology %q", name)
}

// Run runs topology t with strategy s in a new directory under root and
// returns what it showed. The logs are closed; the directory is kept.
func Run(t Topology, s Strategy, root string) (res *Result, err error) {
	dir := filepath.Join(root, t.Name, s.String())
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	h, err := NewHarness(dir, s)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := h.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	h.res.Topology = t.Name
	sc := &script{h: h}
	t.run(sc)
	if sc.err != nil {
		return nil, fmt.Errorf("%s/%s: %w", t.Name, s, sc.err)
	}
	return h.Finish()
}

// script runs scenario steps, keeping the first harness error (a failure
// of the simulator itself, not a finding) and skipping the rest.
type script struct {
	h   *Harness
	err error
}

func (s *script) step(format string, args ...any) {
	if s.err == nil {
		s.err = s.h.Step(fmt.Sprintf(format, args...))
	}
}

func (s *script) start(src, dst *Partition) {
	if s.err == nil {
		s.err = s.h.StartMirror(src, dst)
	}
}

func (s *script) fetch(dsts ...*Partition) {
	for _, d := range dsts {
		if s.err == nil {
			_, s.err = s.h.Fetch(d)
		}
	}
}

func (s *script) stop(dst *Partition) {
	if s.err == nil {
		s.err = s.h.Stop(dst)
	}
}

func (s *script) expire(p *Partition) {
	if s.err == nil {
		s.h.Expire(p)
	}
}

// readOnly checks that a client cannot produce to a mirroring partition.
func (s *script) readOnly(p *Partition) {
	if s.err == nil && s.h.TryClientProduce(p) != ReadOnly {
		s.err = fmt.Errorf("client produce to %s was not refused while it mirrors", p)
	}
}

// §4.1.
func activePassive(s *script) {
	h := s.h
	A, B := h.Cluster("A"), h.Cluster("B")
	at, bt := A.Part("t"), B.Part("t")
	p5A := A.Producer(false, 0)
	s.step("1 producer 5(A) writes 3 batches (the last one retried after a lost response)")
	p5A.Send("t", 3)
	p5A.Retry()
	s.step("2 start mirror A→B")
	s.start(at, bt)
	s.step("3 fetch loop")
	s.fetch(bt)
	s.step("4 client produce to B")
	s.readOnly(bt)
	s.step("5 A writes s3, then A is lost before B fetches it")
	p5A.Send("t", 1)
	A.Lose()
	s.step("6 stop mirror on B")
	s.stop(bt)
	s.step("7 B's first producer gets PID 5: 5(B) writes 2 batches")
	B.Producer(false, 0).Send("t", 2)
}

// §4.2: 4.1 followed by failback.
func failback(s *script) {
	activePassive(s)
	h := s.h
	A, B := h.Cluster("A"), h.Cluster("B")
	at, bt := A.Part("t"), B.Part("t")
	s.step("8-10 A returns; start mirror B→A: A aligns to B's position for A and fences its epoch")
	A.Recover()
	s.start(bt, at)
	s.step("11 A fetches B")
	s.fetch(at)
	s.step("12 client produce to A")
	s.readOnly(at)
	s.step("13 5(B) writes s2; A fetches it")
	h.producerNamed(B, "5(B)").Send("t", 1)
	s.fetch(at)
	s.step("14 stop mirror on A (failback done)")
	s.stop(at)
	s.step("15 A's next producer (6) writes")
	A.Producer(false, 0).Send("t", 1)
	s.step("16-17 start mirror A→B; B aligns with A's position for B, fences and fetches")
	s.start(at, bt)
	s.fetch(bt)
}

// §4.3.
func fanOut(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	p5A := A.Producer(false, 0)
	s.step("1 5(A) writes 2 batches; B and C mirror A")
	p5A.Send("t", 2)
	s.start(at, bt)
	s.start(at, ct)
	s.fetch(bt, ct)
	s.step("2 stop mirror on B")
	s.stop(bt)
	s.step("3 5(B) writes 1 batch; 5(A) writes 1 batch; C fetches")
	B.Producer(false, 0).Send("t", 1)
	p5A.Send("t", 1)
	s.fetch(ct)
	s.step("4 stop mirror on C")
	s.stop(ct)
	s.step("5 5(C) writes")
	C.Producer(false, 0).Send("t", 1)
}

// §4.4, plus a transactional topic tx mirrored from B (committed, aborted
// and open transactions: mirror.md T53's consequence for the rewriting
// designs).
func fanIn(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	a1, b2, bx := A.Part("t1"), B.Part("t2"), B.Part("tx")
	c1, c2, cx := C.Part("t1"), C.Part("t2"), C.Part("tx")
	s.step("1 5(A) writes to t1, 5(B) writes to t2, 6(B) runs a committed and an aborted transaction on tx and opens a third; C mirrors all three")
	A.Producer(false, 0).Send("t1", 1)
	B.Producer(false, 0).Send("t2", 1)
	tx := B.Producer(true, 0)
	tx.Send("tx", 2)
	tx.Commit()
	tx.Send("tx", 1)
	tx.Abort()
	tx.Send("tx", 1)
	s.start(a1, c1)
	s.start(b2, c2)
	s.start(bx, cx)
	s.fetch(c1, c2, cx)
	s.step("2 stop mirror of t1 only")
	s.stop(c1)
	s.step("3 C's producer 5(C) writes to t1 and t2")
	p5C := C.Producer(false, 0)
	p5C.Send("t1", 1)
	p5C.Send("t2", 1)
	s.step("4 stop mirror of t2 and of tx (tx's open transaction is truncated away)")
	s.stop(c2)
	s.stop(cx)
	s.step("5 5(C) writes to t2; 6(B) commits its third transaction on B")
	p5C.Send("t2", 1)
	tx.Commit()
}

// §4.5 (= §4.6 hop 1), with B's entry for 5(A) expired by time before
// 5(B) writes (mirror.md T46).
func chain(s *script) {
	chainHop1(s)
}

func chainHop1(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	s.step("1 5(A) writes 2; B mirrors A, C mirrors B")
	A.Producer(false, 0).Send("t", 2)
	s.start(at, bt)
	s.start(bt, ct)
	s.fetch(bt, ct)
	s.step("2 A is lost; stop mirror on B")
	A.Lose()
	s.stop(bt)
	s.step("3 C fetches")
	s.fetch(ct)
	s.step("4 B's producer ids expire by time; 5(B) writes 2")
	s.expire(bt)
	B.Producer(false, 0).Send("t", 2)
	s.step("5 C fetches")
	s.fetch(ct)
}

// §4.5 with the comparison-only stop policy KEEP_OPEN (mirror.md T48):
// 5(A)'s transaction is still open when B stops. The barrier strategy
// cannot keep it open (a barrier is refused while a transaction is open)
// and truncates to the last stable offset as always.
func chainKeepOpen(s *script) {
	h := s.h
	h.keepOpen = true
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	s.step("1 transactional 5(A) writes 2 batches, its transaction stays open; B mirrors A, C mirrors B")
	A.Producer(true, 0).Send("t", 2)
	s.start(at, bt)
	s.start(bt, ct)
	s.fetch(bt, ct)
	s.step("2 A is lost; stop mirror on B (KEEP_OPEN unless the strategy writes a barrier)")
	A.Lose()
	s.stop(bt)
	s.step("3 transactional 5(B) at producer epoch 1 writes 2 batches and commits; C fetches")
	p5B := B.Producer(true, 1)
	p5B.Send("t", 2)
	p5B.Commit()
	s.fetch(ct)
}

// §4.6 hop 2.
func chainHop2(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	p5A := A.Producer(false, 0)
	s.step("1 5(A) writes 2; B mirrors A, C mirrors B")
	p5A.Send("t", 2)
	s.start(at, bt)
	s.start(bt, ct)
	s.fetch(bt, ct)
	s.step("2 B is lost; stop mirror on C")
	B.Lose()
	s.stop(ct)
	s.step("3 5(C) writes")
	C.Producer(false, 0).Send("t", 1)
	s.step("4 5(A) writes 1; B returns, still a mirror of A, and fetches")
	p5A.Send("t", 1)
	B.Recover()
	s.fetch(bt)
}

// §4.6 both: hop 1, then C stops too.
func chainBoth(s *script) {
	chainHop1(s)
	h := s.h
	C := h.Cluster("C")
	s.step("6 stop mirror on C")
	s.stop(C.Part("t"))
	s.step("7 5(C) writes 2")
	C.Producer(false, 0).Send("t", 2)
}

// §4.6 hop 2 with lag.
func chainHop2Lag(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	s.step("1 5(A) writes 2; B mirrors A, C mirrors B")
	A.Producer(false, 0).Send("t", 2)
	s.start(at, bt)
	s.start(bt, ct)
	s.fetch(bt, ct)
	s.step("2 A is lost; stop mirror on B; 5(B) writes 2")
	A.Lose()
	s.stop(bt)
	B.Producer(false, 0).Send("t", 2)
	s.step("3 B is lost before C fetched anything of it; stop mirror on C")
	B.Lose()
	s.stop(ct)
	s.step("4 5(C) writes")
	C.Producer(false, 0).Send("t", 1)
}

// §4.6 re-wire.
func chainRewire(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	p5A := A.Producer(false, 0)
	s.step("1 5(A) writes 2; B mirrors A, C mirrors B")
	p5A.Send("t", 2)
	s.start(at, bt)
	s.start(bt, ct)
	s.fetch(bt, ct)
	s.step("2 B is lost; 5(A) writes 1")
	B.Lose()
	p5A.Send("t", 1)
	s.step("3 C stops and is re-pointed to A (A never mirrored from C: truncate to 0)")
	s.stop(ct)
	s.start(at, ct)
	s.fetch(ct)
}

// §4.7, with one local write on C after each switch.
func reassignment(s *script) {
	h := s.h
	A, B, C := h.Cluster("A"), h.Cluster("B"), h.Cluster("C")
	at, bt, ct := A.Part("t"), B.Part("t"), C.Part("t")
	p5A, p5B := A.Producer(false, 0), B.Producer(false, 0)
	s.step("phase 1: 5(A) writes 3, 5(B) writes 2; A → C")
	p5A.Send("t", 3)
	p5B.Send("t", 2)
	s.start(at, ct)
	s.fetch(ct)
	s.step("switch: stop on C; C's producer 5(C) writes 1")
	s.stop(ct)
	p5C := C.Producer(false, 0)
	p5C.Send("t", 1)
	s.step("phase 2: B → C (B never mirrored from C: truncate to 0)")
	s.start(bt, ct)
	s.fetch(ct)
	s.step("switch: stop on C; 5(C) writes 1")
	s.stop(ct)
	p5C.Send("t", 1)
	s.step("phase 3: 5(A) writes 2 more; A → C again (truncate to 0)")
	p5A.Send("t", 2)
	s.start(at, ct)
	s.fetch(ct)
}

// §4.8, with 5(A) at producer epoch 2 (mirror.md T47) and each stopping
// cluster's producer ids expired by time before its own producer writes.
func chain4(s *script) {
	h := s.h
	A, B, C, D := h.Cluster("A"), h.Cluster("B"), h.Cluster("C"), h.Cluster("D")
	at, bt, ct, dt := A.Part("t"), B.Part("t"), C.Part("t"), D.Part("t")
	s.step("1 5(A) (producer epoch 2) writes 2; B mirrors A, C mirrors B, D mirrors C")
	A.Producer(false, 2).Send("t", 2)
	s.start(at, bt)
	s.start(bt, ct)
	s.start(ct, dt)
	s.fetch(bt, ct, dt)
	for i, x := range []*Cluster{B, C, D} {
		p := x.Part("t")
		s.step("%d stop on %s; %s's producer ids expire by time; 5(%s) writes 2; downstream fetches", i+2, x.Name, x.Name, x.Name)
		if i == 0 {
			A.Lose()
		} else {
			[]*Cluster{B, C, D}[i-1].Lose()
		}
		s.stop(p)
		s.expire(p)
		x.Producer(false, 0).Send("t", 2)
		for _, d := range []*Partition{ct, dt}[min(i, 2):] {
			s.fetch(d)
		}
	}
}

// producerNamed returns c's producer with display name name, creating
// none: scenarios that continue another one look producers up by name.
func (h *Harness) producerNamed(c *Cluster, name string) *Producer {
	for _, pr := range h.producers {
		if pr.c == c && pr.Name == name {
			return pr
		}
	}
	panic("sim: no producer " + name)
}
