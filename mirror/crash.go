package mirror

// crashPoint names a point where a test may stop the partition as if the
// process had died (doc.go, "Crash points").
type crashPoint string

const (
	crashAlignIntent              crashPoint = "align:INTENT"
	crashAlignPositionResolved    crashPoint = "align:POSITION_RESOLVED"
	crashAlignTruncatedUnrecorded crashPoint = "align:truncated-unrecorded"
	crashAlignTruncated           crashPoint = "align:TRUNCATED"
	crashFenced                   crashPoint = "fence:EPOCH_FENCING"
	crashStopIntent               crashPoint = "stop:S0-INTENT"
	crashStopTruncatedUnflushed   crashPoint = "stop:S2-truncated-unflushed"
	crashStopTruncated            crashPoint = "stop:S2-TRUNCATED"
	crashStopPositionRecorded     crashPoint = "stop:S3-POSITION_RECORDED"
	crashStopEpochBumped          crashPoint = "stop:S4-EPOCH_BUMPED"
	crashStopAbortAppended        crashPoint = "stop:S5-abort-appended-unsynced"
	crashStopAbortsSynced         crashPoint = "stop:S5-aborts-synced-unrecorded"
	crashStopAbortsWritten        crashPoint = "stop:S5-ABORTS_WRITTEN"
	crashStopBarrierAppended      crashPoint = "stop:S6-barrier-appended-unsynced"
	crashStopBarrierSynced        crashPoint = "stop:S6-barrier-synced-unrecorded"
	crashStopBarrierWritten       crashPoint = "stop:S6-BARRIER_WRITTEN"
	crashStopped                  crashPoint = "stop:S7-STOPPED"
)
