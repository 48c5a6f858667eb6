package group

// Kafka error codes the coordinator answers with (the protocol's numbers;
// do not change).
const (
	errNone                      int16 = 0
	errUnknownServerError        int16 = -1
	errOffsetMetadataTooLarge    int16 = 12
	errCoordinatorNotAvailable   int16 = 15
	errIllegalGeneration         int16 = 22
	errInconsistentGroupProtocol int16 = 23
	errInvalidGroupID            int16 = 24
	errUnknownMemberID           int16 = 25
	errInvalidSessionTimeout     int16 = 26
	errRebalanceInProgress       int16 = 27
	errUnsupportedVersion        int16 = 35
	errInvalidProducerEpoch      int16 = 47
	errNonEmptyGroup             int16 = 68
	errGroupIDNotFound           int16 = 69
	errGroupSubscribedToTopic    int16 = 86
	errMemberIDRequired          int16 = 79
	errFencedInstanceID          int16 = 82
	errUnstableOffsetCommit      int16 = 88
	errInvalidRequest            int16 = 42
	errFencedMemberEpoch         int16 = 110
	errUnreleasedInstanceID      int16 = 111
	errUnsupportedAssignor       int16 = 112
	errStaleMemberEpoch          int16 = 113
	errInvalidRegularExpression  int16 = 128
)
