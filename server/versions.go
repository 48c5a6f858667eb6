package server

import (
	"errors"
	"reflect"
	"sort"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one API the server implements.
type versionRange struct{ min, max int16 }

// apis are the APIs and versions the server implements and its tests
// cover (package doc). ApiVersions advertises exactly these.
var apis = map[int16]versionRange{
	0:  {3, 13}, // Produce (v3: record batches v2; v9 flexible; v12 transaction version 2; v13 topic ids)
	1:  {4, 18}, // Fetch (v4: isolation levels; v12 flexible; v13 topic ids)
	2:  {1, 11}, // ListOffsets (v7: max timestamp; v8-v11 the tiered-storage lookups)
	3:  {0, 13}, // Metadata
	10: {0, 4},  // FindCoordinator (v4: batched keys)
	18: {0, 3},  // ApiVersions
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	22: {0, 5},  // InitProducerId (v3: epoch bump of a known producer)
	23: {0, 4},  // OffsetForLeaderEpoch
	24: {0, 3},  // AddPartitionsToTxn (v4 is the broker-to-broker batch form)
	25: {0, 4},  // AddOffsetsToTxn
	26: {0, 5},  // EndTxn (v5: transaction version 2)
	27: {1, 2},  // WriteTxnMarkers (the admin client's abort of a hanging transaction)
	28: {0, 5},  // TxnOffsetCommit (v5: transaction version 2)
	32: {0, 4},  // DescribeConfigs (topics)
	21: {0, 2},  // DeleteRecords
	33: {0, 2},  // AlterConfigs (topics)
	35: {1, 5},  // DescribeLogDirs
	37: {0, 3},  // CreatePartitions
	44: {0, 1},  // IncrementalAlterConfigs (topics)
	60: {0, 2},  // DescribeCluster
	61: {0, 0},  // DescribeProducers
	65: {0, 0},  // DescribeTransactions
	66: {0, 2},  // ListTransactions
	75: {0, 0},  // DescribeTopicPartitions
}

// transactionVersion is the KIP-890 transaction version the server
// implements and advertises as finalized: 2, every transaction's end
// bumps the producer epoch when the client asks for it (EndTxn v5), and
// a produce adds its partition to the transaction (Produce v12).
const transactionVersion = 2

// groupAPIs are advertised when Config.Groups is set: the classic group
// protocol and KIP-848's consumer groups, at the versions the group
// coordinator answers.
var groupAPIs = map[int16]versionRange{
	8:  {0, 9}, // OffsetCommit
	9:  {0, 9}, // OffsetFetch
	11: {0, 9}, // JoinGroup
	12: {0, 4}, // Heartbeat
	13: {0, 5}, // LeaveGroup
	14: {0, 5}, // SyncGroup
	15: {0, 6}, // DescribeGroups
	16: {0, 5}, // ListGroups
	42: {0, 3}, // DeleteGroups
	47: {0, 0}, // OffsetDelete
	68: {0, 1}, // ConsumerGroupHeartbeat (KIP-848)
	69: {0, 1}, // ConsumerGroupDescribe
}

func isGroupKey(key int16) bool { _, ok := groupAPIs[key]; return ok }

// versionsFor returns the implemented range of key, if any.
func (s *Server) versionsFor(key int16) (versionRange, bool) {
	if r, ok := apis[key]; ok {
		return r, true
	}
	if s.cfg.Groups != nil {
		if r, ok := groupAPIs[key]; ok {
			return r, true
		}
	}
	return versionRange{}, false
}

func (s *Server) supported(key, version int16) bool {
	r, ok := s.versionsFor(key)
	return ok && version >= r.min && version <= r.max
}

func (s *Server) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	add := func(m map[int16]versionRange) {
		for k, r := range m {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r.min, MaxVersion: r.max})
		}
	}
	add(apis)
	if s.cfg.Groups != nil {
		add(groupAPIs)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

func (s *Server) apiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = req.Version
	resp.ApiKeys = s.apiKeys()
	if req.Version >= 3 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, transactionVersion
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", transactionVersion, transactionVersion
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{sf}
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{ff}
		if s.cfg.Groups != nil {
			// group.version 1: the consumer group protocol (KIP-848).
			sf.Name, sf.MaxVersion = "group.version", 1
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "group.version", 1, 1
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
		resp.FinalizedFeaturesEpoch = 0
	}
	return resp
}

// unsupported answers a request the server does not implement at its
// version. ApiVersions is answered at v0 with UNSUPPORTED_VERSION and
// the supported list, as Kafka does, so that the client retries at a
// version both know. Any other request gets its response type at the
// request's version with UNSUPPORTED_VERSION in its top-level error code
// and, where the request names topics and partitions, in an entry for
// each of them (mirrorErrors), as Kafka's error responses do. The body
// of such a request is decoded only for that, best effort.
func (s *Server) unsupported(req kmsg.Request, key, version int16) kmsg.Response {
	if key == 18 {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		resp.ErrorCode = errUnsupportedVersion
		resp.ApiKeys = s.apiKeys()
		return resp
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	rv := reflect.ValueOf(resp).Elem()
	if f := rv.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(errUnsupportedVersion))
	}
	mirrorErrors(reflect.ValueOf(req).Elem(), rv, 0)
	return resp
}

// mirrorErrors fills resp's Topics (and their Partitions) with one entry
// per topic (partition) of req, named as in req, with
// UNSUPPORTED_VERSION. Partitions may be a list of structs with a
// Partition field or of int32s.
func mirrorErrors(req, resp reflect.Value, depth int) {
	for _, name := range []string{"Topics", "Partitions"} {
		rf, sf := req.FieldByName(name), resp.FieldByName(name)
		if !rf.IsValid() || !sf.IsValid() || rf.Kind() != reflect.Slice || sf.Kind() != reflect.Slice ||
			sf.Type().Elem().Kind() != reflect.Struct || depth > 1 {
			continue
		}
		out := reflect.MakeSlice(sf.Type(), rf.Len(), rf.Len())
		for i := 0; i < rf.Len(); i++ {
			src, dst := rf.Index(i), out.Index(i)
			if d := dst.Addr().MethodByName("Default"); d.IsValid() && d.Type().NumIn() == 0 {
				d.Call(nil)
			}
			if f := dst.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
				f.SetInt(int64(errUnsupportedVersion))
			}
			if src.Kind() == reflect.Int32 {
				if f := dst.FieldByName("Partition"); f.IsValid() && f.Kind() == reflect.Int32 {
					f.SetInt(src.Int())
				}
				continue
			}
			if src.Kind() != reflect.Struct {
				continue
			}
			for _, k := range []string{"Topic", "TopicID", "Partition"} {
				if a, b := src.FieldByName(k), dst.FieldByName(k); a.IsValid() && b.IsValid() && a.Type() == b.Type() {
					b.Set(a)
				}
			}
			mirrorErrors(src, dst, depth+1)
		}
		sf.Set(out)
	}
}

// errorCode maps an append's error to a Kafka error code: a partition
// that mirrors is read-only (POLICY_VIOLATION, not retriable, with the
// state in the message); one whose mirror is stopping answers
// NOT_LEADER_OR_FOLLOWER, which clients retry, since it is writable
// moments later; the rest is partlog.KafkaErrorCode.
func errorCode(err error) int16 {
	var ro *mirror.ReadOnlyError
	if errors.As(err, &ro) {
		if ro.State == mirror.StateStopping {
			return errNotLeaderOrFollower
		}
		return errPolicyViolation
	}
	return partlog.KafkaErrorCode(err)
}

// Kafka error codes the server answers itself (the library's are mapped
// with partlog.KafkaErrorCode).
const (
	errNone                      int16 = 0
	errOffsetOutOfRange          int16 = 1
	errCorruptMessage            int16 = 2
	errUnknownTopicOrPartition   int16 = 3
	errNotLeaderOrFollower       int16 = 6
	errRequestTimedOut           int16 = 7
	errCoordinatorNotAvailable   int16 = 15
	errInvalidTopic              int16 = 17
	errUnsupportedVersion        int16 = 35
	errTopicAlreadyExists        int16 = 36
	errInvalidPartitions         int16 = 37
	errInvalidReplicationFactor  int16 = 38
	errInvalidReplicaAssignment  int16 = 39
	errInvalidConfig             int16 = 40
	errInvalidRequest            int16 = 42
	errPolicyViolation           int16 = 44
	errInvalidProducerEpoch      int16 = 47
	errInvalidTxnState           int16 = 48
	errInvalidProducerIDMapping  int16 = 49
	errInvalidTransactionTimeout int16 = 50
	errConcurrentTransactions    int16 = 51
	errOperationNotAttempted     int16 = 55
	errKafkaStorageError         int16 = 56
	errUnknownLeaderEpoch        int16 = 75
	errFencedLeaderEpoch         int16 = 74
	errProducerFenced            int16 = 90
	errUnknownTopicID            int16 = 100
	errInvalidRecord             int16 = 87
	errNotEnoughReplicas         int16 = 19
	errInvalidRequiredAcks       int16 = 21
	errTxnIDAuthorizationFailed  int16 = 53
	errUnsupportedCompression    int16 = 76
	errTransactionAbortable      int16 = 120
	errMessageTooLarge           int16 = 10
	errRecordListTooLarge        int16 = 18
	errFetchSessionIDNotFound    int16 = 70
	errTransactionalIDNotFound   int16 = 105
	errInvalidRegularExpression  int16 = 116
	errUnsupportedEndpointType   int16 = 114
)
