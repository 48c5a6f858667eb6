package partlog

import "github.com/partlog/partlog/batch"

// TimestampType is a topic's message.timestamp.type.
type TimestampType = batch.TimestampType

// Timestamp types of Options.MessageTimestampType.
const (
	// CreateTime keeps the producer's timestamps (the default).
	CreateTime = batch.CreateTime
	// LogAppendTime makes the leader stamp every batch with its clock.
	LogAppendTime = batch.LogAppendTime
)
