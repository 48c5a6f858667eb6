package group

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var commitVersions = []int16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
var fetchVersions = []int16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}

// TestCommitFetch: simple commits (generation -1, no members) at every
// OffsetCommit version read back through every OffsetFetch version;
// unknown partitions, topics and groups answer -1.
func TestCommitFetch(t *testing.T) {
	for _, cv := range commitVersions {
		h := newHarness(t, Config{})
		grp := "simple"
		off := map[string]map[int32]int64{"a": {0: 10, 1: 11}, "b": {3: 30}}
		for tp, code := range h.commit(commitReq(cv, grp, "", -1, off)) {
			if code != 0 {
				t.Fatalf("commit v%d %s: %d", cv, tp, code)
			}
		}
		for _, fv := range fetchVersions {
			got, top := h.fetch(fv, grp, map[string][]int32{"a": {0, 1, 2}, "b": {3}, "c": {0}}, false)
			want := map[string]int64{"a/0": 10, "a/1": 11, "a/2": -1, "b/3": 30, "c/0": -1}
			if top != 0 || !maps.Equal(got, want) {
				t.Fatalf("commit v%d fetch v%d: %v (error %d), want %v", cv, fv, got, top, want)
			}
			if fv >= 2 {
				got, _ = h.fetch(fv, grp, nil, false)
				want = map[string]int64{"a/0": 10, "a/1": 11, "b/3": 30}
				if !maps.Equal(got, want) {
					t.Fatalf("commit v%d fetch v%d all: %v, want %v", cv, fv, got, want)
				}
			}
			got, _ = h.fetch(fv, "unknown-group", map[string][]int32{"a": {0}}, false)
			if !maps.Equal(got, map[string]int64{"a/0": -1}) {
				t.Fatalf("fetch v%d of an unknown group: %v", fv, got)
			}
		}
		h.c.Close()
	}
}

// TestFetchFields: leader epoch (commit v6+, fetch v5+) and metadata come
// back; a null metadata is "".
func TestFetchFields(t *testing.T) {
	h := newHarness(t, Config{})
	r := commitReq(9, "g", "", -1, map[string]map[int32]int64{"t": {0: 1, 1: 2}})
	r.Topics[0].Partitions[1].Metadata = nil
	h.commit(r)
	old := commitReq(5, "g", "", -1, map[string]map[int32]int64{"u": {0: 3}})
	h.commit(old)
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 6
	f.Group = "g"
	for _, tp := range []string{"t", "u"} {
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic = tp
		ft.Partitions = []int32{0, 1}
		f.Topics = append(f.Topics, ft)
	}
	resp := h.handle(f).(*kmsg.OffsetFetchResponse)
	type row struct {
		off   int64
		epoch int32
		md    string
	}
	got := map[string]row{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			got[tpKey(tp.Topic, p.Partition)] = row{p.Offset, p.LeaderEpoch, *p.Metadata}
		}
	}
	want := map[string]row{"t/0": {1, 7, "md"}, "t/1": {2, 7, ""}, "u/0": {3, -1, "md"}, "u/1": {-1, -1, ""}}
	if !maps.Equal(got, want) {
		t.Fatalf("fetch: %v, want %v", got, want)
	}
}

// TestFetchManyGroups: OffsetFetch v8 answers several groups at once.
func TestFetchManyGroups(t *testing.T) {
	h := newHarness(t, Config{})
	h.commit(commitReq(9, "g1", "", -1, map[string]map[int32]int64{"t": {0: 1}}))
	h.commit(commitReq(9, "g2", "", -1, map[string]map[int32]int64{"t": {0: 2}}))
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 8
	for _, g := range []string{"g1", "g2", "g3"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic = "t"
		rt.Partitions = []int32{0}
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
		f.Groups = append(f.Groups, rg)
	}
	all := kmsg.NewOffsetFetchRequestGroup()
	all.Group = "g2" // null topics: everything
	f.Groups = append(f.Groups, all)
	resp := h.handle(f).(*kmsg.OffsetFetchResponse)
	var got []int64
	for _, g := range resp.Groups {
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				got = append(got, p.Offset)
			}
		}
	}
	if len(resp.Groups) != 4 || len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != -1 || got[3] != 2 {
		t.Fatalf("v8 fetch: %d groups, offsets %v", len(resp.Groups), got)
	}
}

// TestRestartKeepsOffsets: offsets committed by simple and group
// commits, and the stored group, survive Close and Open: after the
// restart OffsetFetch answers at once and the Stable group's members go
// on heartbeating in their generation; a member that does not come
// back expires.
func TestRestartKeepsOffsets(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := h.stableGroup("g", 2)
	if got := h.commit(commitReq(9, "g", ids[0], gen, map[string]map[int32]int64{"t": {0: 100, 1: 101}})); got["t/0"] != 0 {
		t.Fatalf("commit: %v", got)
	}
	h.commit(commitReq(3, "simple", "", -1, map[string]map[int32]int64{"t": {0: 7}}))
	h.reopen(Config{})
	got, _ := h.fetch(7, "g", nil, false)
	if !maps.Equal(got, map[string]int64{"t/0": 100, "t/1": 101}) {
		t.Fatalf("after restart: %v", got)
	}
	got, _ = h.fetch(1, "simple", map[string][]int32{"t": {0}}, false)
	if !maps.Equal(got, map[string]int64{"t/0": 7}) {
		t.Fatalf("simple group after restart: %v", got)
	}
	d := h.describe(5, "g")
	if d.State != "Stable" || len(d.Members) != 2 || string(d.Members[1].MemberAssignment) != "for-"+ids[1] {
		t.Fatalf("group after restart: %+v", d)
	}
	h.advance(5 * time.Second)
	if code := h.heartbeat(4, "g", ids[0], gen); code != 0 {
		t.Fatalf("heartbeat after restart: %d", code)
	}
	if r := recv(t, h.syncAsync(syncReq(5, "g", ids[0], gen, nil))); string(r.MemberAssignment) != "for-"+ids[0] {
		t.Fatalf("sync after restart: %+v", r)
	}
	h.advance(6 * time.Second) // ids[1] never came back
	if code := h.heartbeat(4, "g", ids[0], gen); code != errRebalanceInProgress {
		t.Fatalf("heartbeat once the other member expired: %d", code)
	}
	// Generations go on from the stored one.
	r := recv(t, h.joinAsync(joinReq(9, "g", ids[0])))
	if r.Generation != gen+1 {
		t.Fatalf("generation after restart: %d, want %d", r.Generation, gen+1)
	}
	// An Empty group's generation survives too: a commit with an old
	// generation is refused after the restart.
	lv := leaveReq(4, "g", ids[0])
	h.handle(lv)
	h.reopen(Config{})
	if got := h.commit(commitReq(9, "g", ids[0], gen, one)); got["t/0"] != errUnknownMemberID {
		t.Fatalf("old member's commit after restart: %v", got)
	}
	got, _ = h.fetch(9, "g", map[string][]int32{"t": {0}}, false)
	if got["t/0"] != 100 {
		t.Fatalf("offsets after the second restart: %v", got)
	}
}

// TestStateFileErrors: a damaged state file fails Open with a clear
// error; a stale temporary file is ignored.
func TestStateFileErrors(t *testing.T) {
	h := newHarness(t, Config{})
	h.commit(commitReq(9, "g", "", -1, one))
	h.c.Close()
	path := filepath.Join(h.dir, StateFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Config{Dir: h.dir})
	if err != nil {
		t.Fatalf("stale .tmp: %v", err)
	}
	c.Close()
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)-5],
		"flipped":   append(append([]byte{}, good[:20]...), append([]byte{good[20] ^ 1}, good[21:]...)...),
		"foreign":   []byte("{\"groups\":[]}"),
		"empty":     {},
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Config{Dir: h.dir})
		if err == nil || !strings.Contains(err.Error(), "corrupt state file") || !strings.Contains(err.Error(), StateFile) {
			t.Fatalf("%s: Open error %v", name, err)
		}
	}
	if _, err := Open(Config{}); err == nil {
		t.Fatal("Open without a directory")
	}
	if _, err := Open(Config{Dir: t.TempDir(), MinSessionTimeout: time.Minute, MaxSessionTimeout: time.Second}); err == nil {
		t.Fatal("Open with min above max")
	}
}

// TestCommitWriteFailure: when the state file cannot be written the
// commit is refused (COORDINATOR_NOT_AVAILABLE) and not applied.
func TestCommitWriteFailure(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: a directory where the file should be makes the write fail")
	}
	h := newHarness(t, Config{})
	h.commit(commitReq(9, "g", "", -1, map[string]map[int32]int64{"t": {0: 1}}))
	// Put a directory where the temporary file goes: the write fails
	// for every user, root included.
	if err := os.Mkdir(filepath.Join(h.dir, StateFile+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := h.commit(commitReq(9, "g", "", -1, map[string]map[int32]int64{"t": {0: 2}})); got["t/0"] != errCoordinatorNotAvailable {
		t.Fatalf("commit with a failing write: %v", got)
	}
	if got, _ := h.fetch(9, "g", map[string][]int32{"t": {0}}, false); got["t/0"] != 1 {
		t.Fatalf("offset after the failed commit: %v", got)
	}
	tr := txnReq(3, "g", 5, 0, map[int32]int64{0: 9})
	if code := errorCode(t, h.handle(tr)); code != errCoordinatorNotAvailable {
		t.Fatalf("txn commit with a failing write: %d", code)
	}
	if err := os.Remove(filepath.Join(h.dir, StateFile+".tmp")); err != nil {
		t.Fatal(err)
	}
	h.handle(tr)
	if err := os.Mkdir(filepath.Join(h.dir, StateFile+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CompleteTxn(5, 0, true); err == nil {
		t.Fatal("CompleteTxn with a failing write succeeded")
	}
	if got, _ := h.fetch(9, "g", map[string][]int32{"t": {0}}, true); got["t/0"] != -1000-int64(errUnstableOffsetCommit) {
		t.Fatalf("after a failed CompleteTxn the offset must stay staged: %v", got)
	}
	os.Remove(filepath.Join(h.dir, StateFile+".tmp"))
	if err := h.c.CompleteTxn(5, 0, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.fetch(9, "g", map[string][]int32{"t": {0}}, true); got["t/0"] != 9 {
		t.Fatalf("after the retried CompleteTxn: %v", got)
	}
}

func txnReq(v int16, group string, pid int64, epoch int16, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = v
	r.TransactionalID = "tx"
	r.Group = group
	r.ProducerID = pid
	r.ProducerEpoch = epoch
	r.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for _, p := range sortedKeys(offsets) {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = offsets[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
	return r
}

// TestTxnOffsets: staged transactional offsets are invisible (unstable
// with RequireStable) until CompleteTxn commits them; abort drops them;
// staged and committed ones survive a restart; a plain commit made after
// staging wins; an older epoch is refused.
func TestTxnOffsets(t *testing.T) {
	h := newHarness(t, Config{})
	h.commit(commitReq(9, "g", "", -1, map[string]map[int32]int64{"t": {0: 1, 1: 1}}))
	for _, v := range []int16{0, 2, 3, 5} {
		if code := errorCode(t, h.c.CommitTxnOffsets(txnReq(v, "g", 10, 1, map[int32]int64{0: 5}))); code != 0 {
			t.Fatalf("txn commit v%d: %d", v, code)
		}
	}
	tps := map[string][]int32{"t": {0, 1}}
	if got, _ := h.fetch(6, "g", tps, false); !maps.Equal(got, map[string]int64{"t/0": 1, "t/1": 1}) {
		t.Fatalf("staged offsets visible: %v", got)
	}
	unstable := -1000 - int64(errUnstableOffsetCommit)
	for _, v := range []int16{7, 8, 9} {
		if got, _ := h.fetch(v, "g", tps, true); !maps.Equal(got, map[string]int64{"t/0": unstable, "t/1": 1}) {
			t.Fatalf("require stable v%d: %v", v, got)
		}
	}
	h.reopen(Config{})
	if got, _ := h.fetch(7, "g", tps, true); got["t/0"] != unstable {
		t.Fatalf("staged offsets lost in a restart: %v", got)
	}
	if code := errorCode(t, h.c.CommitTxnOffsets(txnReq(3, "g", 10, 0, map[int32]int64{1: 9}))); code != errInvalidProducerEpoch {
		t.Fatalf("older epoch: %d", code)
	}
	if err := h.c.CompleteTxn(10, 1, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.fetch(7, "g", tps, true); !maps.Equal(got, map[string]int64{"t/0": 5, "t/1": 1}) {
		t.Fatalf("after commit: %v", got)
	}
	h.reopen(Config{})
	if got, _ := h.fetch(7, "g", tps, true); !maps.Equal(got, map[string]int64{"t/0": 5, "t/1": 1}) {
		t.Fatalf("committed txn offsets lost in a restart: %v", got)
	}

	// Abort drops; through Handle too.
	resp, ok := h.c.Handle(h.ctx(), txnReq(3, "g", 11, 0, map[int32]int64{0: 50, 1: 51}))
	if !ok || errorCode(t, resp) != 0 {
		t.Fatalf("txn commit through Handle: %+v", resp)
	}
	if err := h.c.CompleteTxn(11, 0, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.fetch(7, "g", tps, true); !maps.Equal(got, map[string]int64{"t/0": 5, "t/1": 1}) {
		t.Fatalf("after abort: %v", got)
	}

	// A plain commit after staging wins over the transaction's offset.
	h.c.CommitTxnOffsets(txnReq(3, "g", 12, 0, map[int32]int64{0: 60, 1: 61}))
	h.commit(commitReq(9, "g", "", -1, map[string]map[int32]int64{"t": {1: 70}}))
	if err := h.c.CompleteTxn(12, 0, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.fetch(7, "g", tps, true); !maps.Equal(got, map[string]int64{"t/0": 60, "t/1": 70}) {
		t.Fatalf("plain commit after staging: %v", got)
	}

	// Completing with an older epoch leaves a newer transaction alone;
	// nothing staged is no error.
	h.c.CommitTxnOffsets(txnReq(3, "g", 13, 4, map[int32]int64{0: 80}))
	if err := h.c.CompleteTxn(13, 3, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.fetch(7, "g", tps, true); got["t/0"] != unstable {
		t.Fatalf("older epoch's abort dropped a newer transaction: %v", got)
	}
	if err := h.c.CompleteTxn(999, 0, true); err != nil {
		t.Fatal(err)
	}

	// Members of a live group commit transactionally with their
	// generation (v3+); a wrong one is refused.
	ids, gen := h.stableGroup("live", 1)
	tr := txnReq(3, "live", 20, 0, map[int32]int64{0: 1})
	tr.Generation, tr.MemberID = gen, ids[0]
	if code := errorCode(t, h.c.CommitTxnOffsets(tr)); code != 0 {
		t.Fatalf("member's txn commit: %d", code)
	}
	tr.Generation = gen + 5
	if code := errorCode(t, h.c.CommitTxnOffsets(tr)); code != errIllegalGeneration {
		t.Fatalf("txn commit with a wrong generation: %d", code)
	}
	tr = txnReq(2, "live", 21, 0, map[int32]int64{0: 1}) // v2: no member fields
	if code := errorCode(t, h.c.CommitTxnOffsets(tr)); code != 0 {
		t.Fatalf("v2 txn commit to a live group: %d", code)
	}
	tr.Group = ""
	if code := errorCode(t, h.c.CommitTxnOffsets(tr)); code != errInvalidGroupID {
		t.Fatalf("txn commit without a group: %d", code)
	}
}
