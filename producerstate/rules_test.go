package producerstate

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

type step struct {
	origin Origin
	specs  []bspec
}

func setup(origin Origin, specs ...bspec) step { return step{origin, specs} }

// ruleCase is one row of the decision table (§2.7) or one §7 test id.
type ruleCase struct {
	name    string
	given   []step
	origin  Origin
	when    []bspec
	wantErr error
	check   func(t *testing.T, m *Manager, a *Append, l *logWriter)
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := New(Config{})
			l := newLog(t, m)
			for _, s := range c.given {
				l.must(s.origin, s.specs...)
			}
			before, beforeMEO, beforeFUO := m.Producers(), m.MapEndOffset(), m.OngoingTransactions()
			a, err := l.append(c.origin, c.when...)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				// A rejected batch leaves the state untouched.
				if got := m.Producers(); !reflect.DeepEqual(got, before) {
					t.Fatalf("state changed by a rejected append:\n got %+v\nwant %+v", got, before)
				}
				if m.MapEndOffset() != beforeMEO || !reflect.DeepEqual(m.OngoingTransactions(), beforeFUO) {
					t.Fatal("MEO or transactions changed by a rejected append")
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if c.check != nil {
				c.check(t, m, a, l)
			}
		})
	}
}

func wantSeq(pid int64, epoch int16, lastSeq int32, batches int) func(*testing.T, *Manager, *Append, *logWriter) {
	return func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
		t.Helper()
		e := mustEntry(t, m, pid)
		if e.ProducerEpoch != epoch || e.LastSequence != lastSeq || e.NumBatches != batches {
			t.Fatalf("entry %d = epoch %d lastSeq %d batches %d, want %d %d %d", pid, e.ProducerEpoch, e.LastSequence, e.NumBatches, epoch, lastSeq, batches)
		}
	}
}

func wantNoEntry(pid int64) func(*testing.T, *Manager, *Append, *logWriter) {
	return func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
		t.Helper()
		if _, ok := m.Producer(pid); ok {
			t.Fatalf("entry %d exists", pid)
		}
	}
}

func wantCompleted(want ...CompletedTxn) func(*testing.T, *Manager, *Append, *logWriter) {
	return func(t *testing.T, _ *Manager, a *Append, _ *logWriter) {
		t.Helper()
		got := a.CompletedTxns()
		if len(want) == 0 && len(got) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("completed = %+v, want %+v", got, want)
		}
	}
}

func both(fs ...func(*testing.T, *Manager, *Append, *logWriter)) func(*testing.T, *Manager, *Append, *logWriter) {
	return func(t *testing.T, m *Manager, a *Append, l *logWriter) {
		t.Helper()
		for _, f := range fs {
			f(t, m, a, l)
		}
	}
}

// TestDecisionTableClient covers every CLIENT column cell of §2.7 and
// T01–T11, T15, T16, T21.
func TestDecisionTableClient(t *testing.T) {
	five := []bspec{data(7, 0, 0, 5), data(7, 0, 5, 5), data(7, 0, 10, 5), data(7, 0, 15, 5), data(7, 0, 20, 5)}
	runRuleCases(t, []ruleCase{
		{name: "row1/T01_unknown_pid_any_seq", origin: Client, when: []bspec{data(7, 0, 17, 3)}, check: wantSeq(7, 0, 19, 1)},
		{name: "row2/T02_next_seq", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Client,
			when: []bspec{data(7, 0, 10, 5)}, check: wantSeq(7, 0, 14, 2)},
		{name: "row2/T04_wrap_MAX_to_0", given: []step{setup(Replication, data(7, 0, math.MaxInt32-2, 3))}, origin: Client,
			when: []bspec{data(7, 0, 0, 5)}, check: wantSeq(7, 0, 4, 2)},
		{name: "row2/T05_batch_spanning_wrap", given: []step{setup(Replication, data(7, 0, math.MaxInt32-3, 3))}, origin: Client,
			when: []bspec{data(7, 0, math.MaxInt32, 3)}, check: func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
				e := mustEntry(t, m, 7)
				if e.LastSequence != 1 || e.Batches[1].FirstSequence() != math.MaxInt32 {
					t.Fatalf("lastSeq %d firstSeq %d", e.LastSequence, e.Batches[1].FirstSequence())
				}
			}},
		{name: "row3/T03_gap", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Client,
			when: []bspec{data(7, 0, 12, 3)}, wantErr: ErrOutOfOrderSequence},
		{name: "row3/regression", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Client,
			when: []bspec{data(7, 0, 3, 3)}, wantErr: ErrOutOfOrderSequence},
		{name: "row3/wrap_requires_MAX", given: []step{setup(Replication, data(7, 0, 100, 3))}, origin: Client,
			when: []bspec{data(7, 0, 0, 3)}, wantErr: ErrOutOfOrderSequence},
		{name: "row4/T06_duplicate_of_third", given: []step{setup(Client, five...)}, origin: Client,
			when: []bspec{data(7, 0, 10, 5)}, wantErr: ErrDuplicateSequence,
			check: func(t *testing.T, m *Manager, _ *Append, l *logWriter) {
				_, err := l.append(Client, data(7, 0, 10, 5))
				var d *DuplicateSequenceError
				if !errors.As(err, &d) || d.FirstOffset != 10 || d.LastOffset != 14 || d.Timestamp != 1004 {
					t.Fatalf("duplicate = %+v", d)
				}
				if KafkaErrorCode(err) != 0 || l.next != 25 {
					t.Fatal("a duplicate must answer success without writing")
				}
			}},
		{name: "row4/T07_oldest_of_six_evicted", given: []step{setup(Client, append(five, data(7, 0, 25, 5))...)}, origin: Client,
			when: []bspec{data(7, 0, 0, 5)}, wantErr: ErrOutOfOrderSequence},
		{name: "row4/T08_partial_overlap", given: []step{setup(Client, data(7, 0, 0, 10), data(7, 0, 10, 5))}, origin: Client,
			when: []bspec{data(7, 0, 10, 3)}, wantErr: ErrOutOfOrderSequence},
		{name: "row5/T09_higher_epoch_seq0", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Client,
			when: []bspec{data(7, 1, 0, 2)}, check: wantSeq(7, 1, 1, 1)},
		{name: "row6/T10_higher_epoch_seq5", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Client,
			when: []bspec{data(7, 1, 5, 2)}, wantErr: ErrOutOfOrderSequence},
		{name: "row7/T11_lower_epoch", given: []step{setup(Client, data(7, 3, 0, 1))}, origin: Client,
			when: []bspec{data(7, 2, 0, 1)}, wantErr: ErrInvalidProducerEpoch},
		{name: "row10/non_txn_inside_open_txn", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: Client,
			when: []bspec{data(7, 0, 2, 2)}, wantErr: ErrInvalidTxnState},
		{name: "row11/txn_joins_open_txn", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: Client,
			when: []bspec{txnData(7, 0, 2, 2)}, check: func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
				if e := mustEntry(t, m, 7); e.CurrentTxnFirstOffset != 0 {
					t.Fatalf("txn first offset %d", e.CurrentTxnFirstOffset)
				}
			}},
		{name: "row16/T15_commit_marker_from_client", origin: Client, when: []bspec{commit(7, 0, 0)}, wantErr: ErrControlFromClient},
		{name: "row16/T15_barrier_from_client", given: []step{setup(Client, data(7, 0, 0, 1))}, origin: Client,
			when: []bspec{barrier()}, wantErr: ErrControlFromClient},
		{name: "row17/T16_negative_base_sequence", origin: Client, when: []bspec{data(7, 0, -1, 1)}, wantErr: ErrInvalidSequence},
		{name: "row19/no_producer_id", origin: Client, when: []bspec{data(-1, -1, -1, 3)}, check: func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
			if m.Len() != 0 || m.MapEndOffset() != 3 {
				t.Fatalf("len %d MEO %d", m.Len(), m.MapEndOffset())
			}
		}},
		{name: "row19/negative_pid_is_no_producer", origin: Client, when: []bspec{data(-7, 0, 0, 1)}, check: wantNoEntry(-7)},
		{name: "T21_after_abort_bumped_epoch_seq4", given: []step{setup(Client, txnData(7, 2, 0, 4)), setup(Coordinator, abort(7, 3, 0))},
			origin: Client, when: []bspec{data(7, 3, 4, 1)}, wantErr: ErrOutOfOrderSequence},
		{name: "T21_after_abort_bumped_epoch_seq0", given: []step{setup(Client, txnData(7, 2, 0, 4)), setup(Coordinator, abort(7, 3, 0))},
			origin: Client, when: []bspec{data(7, 3, 0, 1)}, check: wantSeq(7, 3, 0, 1)},
		{name: "T20_like_marker_only_entry_needs_seq0", given: []step{setup(Coordinator, commit(7, 0, 0))},
			origin: Client, when: []bspec{data(7, 0, 5, 1)}, wantErr: ErrOutOfOrderSequence},
	})
}

// TestDecisionTableCoordinator covers the COORDINATOR column of §2.7 and
// T14, T26, T27 (first half), T28.
func TestDecisionTableCoordinator(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "row1/unknown_pid", origin: Coordinator, when: []bspec{data(7, 0, 40, 2)}, check: wantSeq(7, 0, 41, 1)},
		{name: "row2/next_seq", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Coordinator,
			when: []bspec{data(7, 0, 10, 1)}, check: wantSeq(7, 0, 10, 2)},
		{name: "row3/T14_gap_accepted", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Coordinator,
			when: []bspec{data(7, 0, 50, 1)}, check: wantSeq(7, 0, 50, 2)},
		{name: "row4/duplicate_appended_again", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Coordinator,
			when: []bspec{data(7, 0, 0, 10)}, check: wantSeq(7, 0, 9, 2)},
		{name: "row5/higher_epoch_seq0", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Coordinator,
			when: []bspec{data(7, 1, 0, 1)}, check: wantSeq(7, 1, 0, 1)},
		{name: "row6/higher_epoch_seq5", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: Coordinator,
			when: []bspec{data(7, 1, 5, 1)}, check: wantSeq(7, 1, 5, 1)},
		{name: "row7/lower_epoch", given: []step{setup(Client, data(7, 3, 0, 1))}, origin: Coordinator,
			when: []bspec{data(7, 2, 1, 1)}, wantErr: ErrInvalidProducerEpoch},
		{name: "row10/non_txn_inside_open_txn", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: Coordinator,
			when: []bspec{data(7, 0, 2, 1)}, wantErr: ErrInvalidTxnState},
		{name: "row11/txn_joins", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: Coordinator,
			when: []bspec{txnData(7, 0, 2, 1)}},
		{name: "row12/T28_marker_lower_producer_epoch", given: []step{setup(Client, txnData(7, 3, 0, 1))}, origin: Coordinator,
			when: []bspec{commit(7, 2, 0)}, wantErr: ErrInvalidProducerEpoch},
		{name: "row13/T27_marker_lower_coordinator_epoch", given: []step{setup(Coordinator, commit(7, 0, 5)), setup(Client, txnData(7, 0, 0, 1))},
			origin: Coordinator, when: []bspec{commit(7, 0, 4)}, wantErr: ErrTransactionCoordinatorFenced},
		{name: "row14/marker_closes_open_txn", given: []step{setup(Client, txnData(7, 0, 0, 5))}, origin: Coordinator,
			when: []bspec{abort(7, 0, 1)}, check: both(wantCompleted(CompletedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 5, LastStableOffset: 6, Aborted: true}),
				func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
					e := mustEntry(t, m, 7)
					if e.CurrentTxnFirstOffset != -1 || e.CoordinatorEpoch != 1 || e.LastTimestamp != 2000 || e.NumBatches != 1 {
						t.Fatalf("entry %+v", e)
					}
				})},
		{name: "row15/T26_marker_without_txn", given: []step{setup(Client, data(7, 0, 0, 1))}, origin: Coordinator,
			when: []bspec{commit(7, 0, 9)}, check: both(wantCompleted(), func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
				if e := mustEntry(t, m, 7); e.CoordinatorEpoch != 9 {
					t.Fatalf("coordinator epoch %d", e.CoordinatorEpoch)
				}
				if _, ok := m.FirstUnstableOffset(); ok {
					t.Fatal("FUO set by an empty transaction")
				}
			})},
		{name: "row15/marker_unknown_pid_creates_entry", origin: Coordinator, when: []bspec{commit(8, 2, 1)}, check: wantSeq(8, 2, -1, 0)},
		{name: "row18/other_control_type_with_pid", origin: Coordinator, when: []bspec{{pid: 7, epoch: 0, seq: -1, control: 4}},
			wantErr: ErrUnknownControlType},
		{name: "row19/barrier_creates_no_entry", given: []step{setup(Client, data(5, 0, 0, 1), data(9, 0, 0, 1))}, origin: Coordinator,
			when: []bspec{barrier()}, check: func(t *testing.T, m *Manager, a *Append, _ *logWriter) {
				if m.Len() != 0 || m.MapEndOffset() != 3 || !reflect.DeepEqual(a.Barriers(), []int64{2}) {
					t.Fatalf("len %d MEO %d barriers %v", m.Len(), m.MapEndOffset(), a.Barriers())
				}
			}},
	})
}

// TestDecisionTableReplicated covers the REPLICATION / recovery column of
// §2.7 for Replication, Mirror and Replay, and T12, T13, T17, T22, T27
// (second half).
func TestDecisionTableReplicated(t *testing.T) {
	for _, origin := range []Origin{Replication, Mirror, Replay} {
		t.Run(origin.String(), func(t *testing.T) {
			runRuleCases(t, []ruleCase{
				{name: "row1/unknown_pid", origin: origin, when: []bspec{data(7, 4, 99, 2)}, check: wantSeq(7, 4, 100, 1)},
				{name: "row2/next_seq", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: origin,
					when: []bspec{data(7, 0, 10, 1)}, check: wantSeq(7, 0, 10, 2)},
				{name: "row3/T13_gap_accepted", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: origin,
					when: []bspec{data(7, 0, 50, 1)}, check: wantSeq(7, 0, 50, 2)},
				{name: "row4/duplicate_appended_again", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: origin,
					when: []bspec{data(7, 0, 0, 10)}, check: wantSeq(7, 0, 9, 2)},
				{name: "row5/higher_epoch_seq0", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: origin,
					when: []bspec{data(7, 1, 0, 1)}, check: wantSeq(7, 1, 0, 1)},
				{name: "row6/higher_epoch_seq5", given: []step{setup(Client, data(7, 0, 0, 10))}, origin: origin,
					when: []bspec{data(7, 1, 5, 1)}, check: wantSeq(7, 1, 5, 1)},
				{name: "row7/T12_lower_epoch_accepted_and_lowered", given: []step{setup(Client, data(7, 3, 0, 3))}, origin: origin,
					when: []bspec{data(7, 2, 8, 1)}, check: wantSeq(7, 2, 8, 1)},
				{name: "row10/T17_non_txn_inside_open_txn", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: origin,
					when: []bspec{data(7, 0, 2, 1)}, wantErr: ErrInvalidTxnState},
				{name: "row11/txn_joins", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: origin,
					when: []bspec{txnData(7, 0, 2, 1)}},
				{name: "row12/marker_lower_epoch_accepted", given: []step{setup(Client, txnData(7, 3, 0, 1))}, origin: origin,
					when: []bspec{commit(7, 2, 0)}, check: wantSeq(7, 2, -1, 0)},
				{name: "row13/T27_lower_coordinator_epoch_accepted", given: []step{setup(Coordinator, commit(7, 0, 5))}, origin: origin,
					when: []bspec{commit(7, 0, 4)}, check: func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
						if e := mustEntry(t, m, 7); e.CoordinatorEpoch != 4 {
							t.Fatalf("coordinator epoch %d", e.CoordinatorEpoch)
						}
					}},
				{name: "row14/marker_closes_txn", given: []step{setup(Client, txnData(7, 0, 0, 2))}, origin: origin,
					when: []bspec{commit(7, 0, 0)}, check: wantCompleted(CompletedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3})},
				{name: "row15/marker_without_txn", origin: origin, when: []bspec{abort(7, 0, 0)}, check: both(wantCompleted(), wantSeq(7, 0, -1, 0))},
				{name: "row18/other_control_type_with_pid", origin: origin, when: []bspec{{pid: 7, epoch: 0, seq: -1, control: 4}},
					wantErr: ErrUnknownControlType},
				{name: "row19/no_pid_control_ignored", origin: origin, when: []bspec{{pid: -1, epoch: -1, seq: -1, control: 4}}, check: wantNoEntry(-1)},
				{name: "T22/empty_control_batch_creates_blank_entry", origin: origin, when: []bspec{{pid: 12, epoch: 3, seq: -1, control: 5}},
					check: func(t *testing.T, m *Manager, _ *Append, _ *logWriter) {
						e := mustEntry(t, m, 12)
						if e.ProducerEpoch != -1 || e.LastTimestamp != -1 || e.NumBatches != 0 || e.CoordinatorEpoch != -1 {
							t.Fatalf("entry %+v", e)
						}
						if m.RemoveExpired(m.ExpirationMs()-1) != 1 {
							t.Fatal("the blank entry must go at the next expiration pass")
						}
					}},
			})
		})
	}
}

// TestStaging covers the staging rules: a rejected batch inside a
// multi-batch append rejects the whole append; later batches see the
// staged effect of earlier ones.
func TestStaging(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "consecutive_sequences_in_one_append", origin: Client,
			when:  []bspec{data(7, 0, 0, 5), data(7, 0, 5, 5), data(7, 0, 10, 1)},
			check: wantSeq(7, 0, 10, 3)},
		{name: "second_batch_sees_first", given: []step{setup(Client, data(7, 0, 0, 5))}, origin: Client,
			when: []bspec{data(7, 0, 5, 5), data(7, 0, 5, 5)}, wantErr: ErrOutOfOrderSequence},
		{name: "rejected_third_batch_commits_nothing", given: []step{setup(Client, data(8, 0, 0, 1))}, origin: Replication,
			when: []bspec{data(9, 0, 0, 1), txnData(8, 0, 1, 1), data(8, 0, 2, 1)}, wantErr: ErrInvalidTxnState},
		{name: "txn_then_marker_then_data_in_one_append", origin: Replication,
			when:  []bspec{txnData(7, 0, 0, 2), commit(7, 0, 0), data(7, 0, 2, 1)},
			check: both(wantSeq(7, 0, 2, 2), wantCompleted(CompletedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}))},
	})
	t.Run("commit_after_rejection_is_a_noop", func(t *testing.T) {
		m := New(Config{})
		var a Append
		m.Begin(&a, Client, 0)
		if err := m.Validate(&a, build(t, data(7, 0, 0, 1)), 0); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(&a, build(t, commit(7, 0, 0)), 1); !errors.Is(err, ErrControlFromClient) {
			t.Fatal(err)
		}
		m.Commit(&a)
		if m.Len() != 0 || m.MapEndOffset() != 0 {
			t.Fatal("a failed append was committed")
		}
	})
}
