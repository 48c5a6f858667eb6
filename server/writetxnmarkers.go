package server

import (
	"context"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeTxnMarkers answers WriteTxnMarkers, Kafka's coordinator-to-leader
// request, which the admin client also sends to abort a hanging
// transaction (kafka-transactions abort): each marker is appended to its
// partitions with Log.AppendAsCoordinator, whose producer-state rules
// refuse a stale producer epoch (INVALID_PRODUCER_EPOCH) or coordinator
// epoch (TRANSACTION_COORDINATOR_FENCED). It is answered once the
// markers are durable where the server syncs (Config.Fsync).
func (s *Server) writeTxnMarkers(req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = req.Version
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var buf []byte
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			for _, n := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = n
				p, code := s.partitionFor(mt.Topic, n)
				if code == errNone {
					epoch := p.epoch.Load()
					buf = batch.AppendEndTxnMarkerBatch(buf[:0], batch.ControlSpec{
						PartitionLeaderEpoch: epoch,
						Timestamp:            s.cfg.Now().UnixMilli(),
						ProducerID:           m.ProducerID,
						ProducerEpoch:        m.ProducerEpoch,
					}, m.Committed, m.CoordinatorEpoch)
					info, err := p.mirror.AppendCoordinator(buf, epoch)
					if err == nil {
						err = s.syncTo(ctx, p, info.LastOffset+1)
					}
					code = errorCode(err)
				}
				rp.ErrorCode = code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
