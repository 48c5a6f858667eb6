package dump

// The field tables below are Kafka's message schemas (field names, types,
// versions, nullable and tagged versions, tags and defaults), transcribed
// from the schema files of Apache Kafka 4.4 (the JSON files its jars
// carry: kafka-metadata, kafka-group-coordinator,
// kafka-transaction-coordinator, kafka-share-coordinator, kafka-clients)
// for the records partlog's dump decoders print. See schema.go for how they
// are read and printed, and decoders.go for the decoders.

// metadataRecordTypes maps a KRaft metadata record's type (its apiKey) to
// Kafka's MetadataRecordType name and schema.
var metadataRecordTypes = map[uint32]struct {
	name   string
	schema *kSchema
}{
	0:  {"REGISTER_BROKER_RECORD", &schemaRegisterBrokerRecord},
	1:  {"UNREGISTER_BROKER_RECORD", &schemaUnregisterBrokerRecord},
	2:  {"TOPIC_RECORD", &schemaTopicRecord},
	3:  {"PARTITION_RECORD", &schemaPartitionRecord},
	4:  {"CONFIG_RECORD", &schemaConfigRecord},
	5:  {"PARTITION_CHANGE_RECORD", &schemaPartitionChangeRecord},
	7:  {"FENCE_BROKER_RECORD", &schemaFenceBrokerRecord},
	8:  {"UNFENCE_BROKER_RECORD", &schemaUnfenceBrokerRecord},
	9:  {"REMOVE_TOPIC_RECORD", &schemaRemoveTopicRecord},
	10: {"DELEGATION_TOKEN_RECORD", &schemaDelegationTokenRecord},
	11: {"USER_SCRAM_CREDENTIAL_RECORD", &schemaUserScramCredentialRecord},
	12: {"FEATURE_LEVEL_RECORD", &schemaFeatureLevelRecord},
	14: {"CLIENT_QUOTA_RECORD", &schemaClientQuotaRecord},
	15: {"PRODUCER_IDS_RECORD", &schemaProducerIdsRecord},
	17: {"BROKER_REGISTRATION_CHANGE_RECORD", &schemaBrokerRegistrationChangeRecord},
	18: {"ACCESS_CONTROL_ENTRY_RECORD", &schemaAccessControlEntryRecord},
	19: {"REMOVE_ACCESS_CONTROL_ENTRY_RECORD", &schemaRemoveAccessControlEntryRecord},
	20: {"NO_OP_RECORD", &schemaNoOpRecord},
	21: {"ZK_MIGRATION_STATE_RECORD", &schemaZkMigrationStateRecord},
	22: {"REMOVE_USER_SCRAM_CREDENTIAL_RECORD", &schemaRemoveUserScramCredentialRecord},
	23: {"BEGIN_TRANSACTION_RECORD", &schemaBeginTransactionRecord},
	24: {"END_TRANSACTION_RECORD", &schemaEndTransactionRecord},
	25: {"ABORT_TRANSACTION_RECORD", &schemaAbortTransactionRecord},
	26: {"REMOVE_DELEGATION_TOKEN_RECORD", &schemaRemoveDelegationTokenRecord},
	27: {"REGISTER_CONTROLLER_RECORD", &schemaRegisterControllerRecord},
	28: {"CLEAR_ELR_RECORD", &schemaClearElrRecord},
	29: {"UNREGISTER_CONTROLLER_RECORD", &schemaUnregisterControllerRecord},
}

// groupRecordTypes are the record types of __consumer_offsets (Kafka's
// group coordinator CoordinatorRecordType): key and value schemas by type.
var groupRecordTypes = map[int16]coordinatorRecordType{
	0:  {&schemaLegacyOffsetCommitKey, &schemaLegacyOffsetCommitValue},
	1:  {&schemaOffsetCommitKey, &schemaOffsetCommitValue},
	2:  {&schemaGroupMetadataKey, &schemaGroupMetadataValue},
	3:  {&schemaConsumerGroupMetadataKey, &schemaConsumerGroupMetadataValue},
	4:  {&schemaConsumerGroupPartitionMetadataKey, &schemaConsumerGroupPartitionMetadataValue},
	5:  {&schemaConsumerGroupMemberMetadataKey, &schemaConsumerGroupMemberMetadataValue},
	6:  {&schemaConsumerGroupTargetAssignmentMetadataKey, &schemaConsumerGroupTargetAssignmentMetadataValue},
	7:  {&schemaConsumerGroupTargetAssignmentMemberKey, &schemaConsumerGroupTargetAssignmentMemberValue},
	8:  {&schemaConsumerGroupCurrentMemberAssignmentKey, &schemaConsumerGroupCurrentMemberAssignmentValue},
	10: {&schemaShareGroupMemberMetadataKey, &schemaShareGroupMemberMetadataValue},
	11: {&schemaShareGroupMetadataKey, &schemaShareGroupMetadataValue},
	12: {&schemaShareGroupTargetAssignmentMetadataKey, &schemaShareGroupTargetAssignmentMetadataValue},
	13: {&schemaShareGroupTargetAssignmentMemberKey, &schemaShareGroupTargetAssignmentMemberValue},
	14: {&schemaShareGroupCurrentMemberAssignmentKey, &schemaShareGroupCurrentMemberAssignmentValue},
	15: {&schemaShareGroupStatePartitionMetadataKey, &schemaShareGroupStatePartitionMetadataValue},
	16: {&schemaConsumerGroupRegularExpressionKey, &schemaConsumerGroupRegularExpressionValue},
	17: {&schemaStreamsGroupMetadataKey, &schemaStreamsGroupMetadataValue},
	19: {&schemaStreamsGroupMemberMetadataKey, &schemaStreamsGroupMemberMetadataValue},
	20: {&schemaStreamsGroupTargetAssignmentMetadataKey, &schemaStreamsGroupTargetAssignmentMetadataValue},
	21: {&schemaStreamsGroupTargetAssignmentMemberKey, &schemaStreamsGroupTargetAssignmentMemberValue},
	22: {&schemaStreamsGroupCurrentMemberAssignmentKey, &schemaStreamsGroupCurrentMemberAssignmentValue},
	23: {&schemaStreamsGroupTopologyKey, &schemaStreamsGroupTopologyValue},
}

// transactionRecordTypes are the record types of __transaction_state.
var transactionRecordTypes = map[int16]coordinatorRecordType{
	0: {&schemaTransactionLogKey, &schemaTransactionLogValue},
}

// shareRecordTypes are the record types of __share_group_state.
var shareRecordTypes = map[int16]coordinatorRecordType{
	0: {&schemaShareSnapshotKey, &schemaShareSnapshotValue},
	1: {&schemaShareUpdateKey, &schemaShareUpdateValue},
}

var schemaAbortTransactionRecord = kSchema{name: "AbortTransactionRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "reason", typ: kString, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
}}

var schemaAccessControlEntryRecord = kSchema{name: "AccessControlEntryRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "id", typ: kUUID, ver: since(0)},
	{name: "resourceType", typ: kInt8, ver: since(0)},
	{name: "resourceName", typ: kString, ver: since(0)},
	{name: "patternType", typ: kInt8, ver: since(0)},
	{name: "principal", typ: kString, ver: since(0)},
	{name: "host", typ: kString, ver: since(0)},
	{name: "operation", typ: kInt8, ver: since(0)},
	{name: "permissionType", typ: kInt8, ver: since(0)},
}}

var schemaBeginTransactionRecord = kSchema{name: "BeginTransactionRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "name", typ: kString, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
}}

var schemaBrokerRegistrationChangeRecord = kSchema{name: "BrokerRegistrationChangeRecord", valid: between(0, 3), flexible: since(0), fields: []kField{
	{name: "brokerId", typ: kInt32, ver: since(0)},
	{name: "brokerEpoch", typ: kInt64, ver: since(0)},
	{name: "fenced", typ: kInt8, ver: since(0), tagged: since(0), tag: 0},
	{name: "inControlledShutdown", typ: kInt8, ver: since(1), tagged: since(1), tag: 1},
	{name: "logDirs", typ: kArray, elem: kUUID, ver: since(2), tagged: since(2), tag: 2},
	{name: "cordonedLogDirs", typ: kArray, elem: kUUID, ver: since(3), nullable: since(3), tagged: since(3), tag: 3},
}}

var schemaClearElrRecord = kSchema{name: "ClearElrRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "topicName", typ: kString, ver: since(0)},
}}

var schemaClientQuotaRecord = kSchema{name: "ClientQuotaRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "entity", typ: kArray, ver: since(0), fields: []kField{
		{name: "entityType", typ: kString, ver: since(0)},
		{name: "entityName", typ: kString, ver: since(0), nullable: since(0)},
	}},
	{name: "key", typ: kString, ver: since(0)},
	{name: "value", typ: kFloat64, ver: since(0)},
	{name: "remove", typ: kBool, ver: since(0)},
}}

var schemaConfigRecord = kSchema{name: "ConfigRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "resourceType", typ: kInt8, ver: since(0)},
	{name: "resourceName", typ: kString, ver: since(0)},
	{name: "name", typ: kString, ver: since(0)},
	{name: "value", typ: kString, ver: since(0), nullable: since(0)},
}}

var schemaConsumerGroupCurrentMemberAssignmentKey = kSchema{name: "ConsumerGroupCurrentMemberAssignmentKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupCurrentMemberAssignmentValue = kSchema{name: "ConsumerGroupCurrentMemberAssignmentValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "memberEpoch", typ: kInt32, ver: since(0)},
	{name: "previousMemberEpoch", typ: kInt32, ver: since(0)},
	{name: "state", typ: kInt8, ver: since(0)},
	{name: "assignedPartitions", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
	{name: "partitionsPendingRevocation", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
}}

var schemaConsumerGroupMemberMetadataKey = kSchema{name: "ConsumerGroupMemberMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupMemberMetadataValue = kSchema{name: "ConsumerGroupMemberMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "instanceId", typ: kString, ver: since(0), nullable: since(0)},
	{name: "rackId", typ: kString, ver: since(0), nullable: since(0)},
	{name: "clientId", typ: kString, ver: since(0)},
	{name: "clientHost", typ: kString, ver: since(0)},
	{name: "subscribedTopicNames", typ: kArray, elem: kString, ver: since(0)},
	{name: "subscribedTopicRegex", typ: kString, ver: since(0), nullable: since(0)},
	{name: "rebalanceTimeoutMs", typ: kInt32, ver: since(0)},
	{name: "serverAssignor", typ: kString, ver: since(0), nullable: since(0)},
	{name: "classicMemberMetadata", typ: kStruct, ver: since(0), nullable: since(0), tagged: since(0), tag: 0, fields: []kField{
		{name: "sessionTimeoutMs", typ: kInt32, ver: since(0)},
		{name: "supportedProtocols", typ: kArray, ver: since(0), fields: []kField{
			{name: "name", typ: kString, ver: since(0)},
			{name: "metadata", typ: kBytes, ver: since(0)},
		}},
	}},
}}

var schemaConsumerGroupMetadataKey = kSchema{name: "ConsumerGroupMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupMetadataValue = kSchema{name: "ConsumerGroupMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "epoch", typ: kInt32, ver: since(0)},
	{name: "metadataHash", typ: kInt64, ver: since(0), tagged: since(0), tag: 0},
}}

var schemaConsumerGroupPartitionMetadataKey = kSchema{name: "ConsumerGroupPartitionMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupPartitionMetadataValue = kSchema{name: "ConsumerGroupPartitionMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "topics", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "topicName", typ: kString, ver: since(0)},
		{name: "numPartitions", typ: kInt32, ver: since(0)},
		{name: "partitionMetadata", typ: kArray, ver: since(0), fields: []kField{
			{name: "partition", typ: kInt32, ver: since(0)},
			{name: "racks", typ: kArray, elem: kString, ver: since(0)},
		}},
	}},
}}

var schemaConsumerGroupRegularExpressionKey = kSchema{name: "ConsumerGroupRegularExpressionKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "regularExpression", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupRegularExpressionValue = kSchema{name: "ConsumerGroupRegularExpressionValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "topics", typ: kArray, elem: kString, ver: since(0)},
	{name: "version", typ: kInt64, ver: since(0)},
	{name: "timestamp", typ: kInt64, ver: since(0)},
}}

var schemaConsumerGroupTargetAssignmentMemberKey = kSchema{name: "ConsumerGroupTargetAssignmentMemberKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupTargetAssignmentMemberValue = kSchema{name: "ConsumerGroupTargetAssignmentMemberValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "topicPartitions", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
}}

var schemaConsumerGroupTargetAssignmentMetadataKey = kSchema{name: "ConsumerGroupTargetAssignmentMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaConsumerGroupTargetAssignmentMetadataValue = kSchema{name: "ConsumerGroupTargetAssignmentMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "assignmentEpoch", typ: kInt32, ver: since(0)},
	{name: "assignmentTimestamp", typ: kInt64, ver: since(0), tagged: since(0), tag: 0},
}}

var schemaConsumerProtocolAssignment = kSchema{name: "ConsumerProtocolAssignment", valid: between(0, 3), fields: []kField{
	{name: "assignedPartitions", typ: kArray, ver: since(0), fields: []kField{
		{name: "topic", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
	{name: "userData", typ: kBytes, ver: since(0), nullable: since(0)},
}}

var schemaConsumerProtocolSubscription = kSchema{name: "ConsumerProtocolSubscription", valid: between(0, 3), fields: []kField{
	{name: "topics", typ: kArray, elem: kString, ver: since(0)},
	{name: "userData", typ: kBytes, ver: since(0), nullable: since(0)},
	{name: "ownedPartitions", typ: kArray, ver: since(1), fields: []kField{
		{name: "topic", typ: kString, ver: since(1)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(1)},
	}},
	{name: "generationId", typ: kInt32, ver: since(2)},
	{name: "rackId", typ: kString, ver: since(3), nullable: since(3)},
}}

var schemaDelegationTokenRecord = kSchema{name: "DelegationTokenRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "owner", typ: kString, ver: since(0)},
	{name: "requester", typ: kString, ver: since(0)},
	{name: "renewers", typ: kArray, elem: kString, ver: since(0)},
	{name: "issueTimestamp", typ: kInt64, ver: since(0)},
	{name: "maxTimestamp", typ: kInt64, ver: since(0)},
	{name: "expirationTimestamp", typ: kInt64, ver: since(0)},
	{name: "tokenId", typ: kString, ver: since(0)},
}}

var schemaEndTransactionRecord = kSchema{name: "EndTransactionRecord", valid: between(0, 0), flexible: since(0), fields: []kField{}}

var schemaFeatureLevelRecord = kSchema{name: "FeatureLevelRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "name", typ: kString, ver: since(0)},
	{name: "featureLevel", typ: kInt16, ver: since(0)},
}}

var schemaFenceBrokerRecord = kSchema{name: "FenceBrokerRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "id", typ: kInt32, ver: since(0)},
	{name: "epoch", typ: kInt64, ver: since(0)},
}}

var schemaGroupMetadataKey = kSchema{name: "GroupMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "group", typ: kString, ver: between(0, 0)},
}}

var schemaGroupMetadataValue = kSchema{name: "GroupMetadataValue", valid: between(0, 4), flexible: since(4), fields: []kField{
	{name: "protocolType", typ: kString, ver: since(0)},
	{name: "generation", typ: kInt32, ver: since(0)},
	{name: "protocol", typ: kString, ver: since(0), nullable: since(0)},
	{name: "leader", typ: kString, ver: since(0), nullable: since(0)},
	{name: "currentStateTimestamp", typ: kInt64, ver: since(2)},
	{name: "members", typ: kArray, ver: since(0), fields: []kField{
		{name: "memberId", typ: kString, ver: since(0)},
		{name: "groupInstanceId", typ: kString, ver: since(3), nullable: since(3)},
		{name: "clientId", typ: kString, ver: since(0)},
		{name: "clientHost", typ: kString, ver: since(0)},
		{name: "rebalanceTimeout", typ: kInt32, ver: since(1)},
		{name: "sessionTimeout", typ: kInt32, ver: since(0)},
		{name: "subscription", typ: kBytes, ver: since(0)},
		{name: "assignment", typ: kBytes, ver: since(0)},
	}},
}}

var schemaLegacyOffsetCommitKey = kSchema{name: "LegacyOffsetCommitKey", valid: between(0, 0), fields: []kField{
	{name: "group", typ: kString, ver: between(0, 0)},
	{name: "topic", typ: kString, ver: between(0, 0)},
	{name: "partition", typ: kInt32, ver: between(0, 0)},
}}

var schemaLegacyOffsetCommitValue = kSchema{name: "LegacyOffsetCommitValue", valid: between(0, 0), fields: []kField{
	{name: "offset", typ: kInt64, ver: between(0, 0)},
	{name: "metadata", typ: kString, ver: between(0, 0)},
	{name: "commitTimestamp", typ: kInt64, ver: between(0, 0)},
}}

var schemaNoOpRecord = kSchema{name: "NoOpRecord", valid: between(0, 0), flexible: since(0), fields: []kField{}}

var schemaOffsetCommitKey = kSchema{name: "OffsetCommitKey", valid: between(0, 0), fields: []kField{
	{name: "group", typ: kString, ver: between(0, 0)},
	{name: "topic", typ: kString, ver: between(0, 0)},
	{name: "partition", typ: kInt32, ver: between(0, 0)},
}}

var schemaOffsetCommitValue = kSchema{name: "OffsetCommitValue", valid: between(0, 4), flexible: since(4), fields: []kField{
	{name: "offset", typ: kInt64, ver: since(0)},
	{name: "leaderEpoch", typ: kInt32, ver: since(3)},
	{name: "metadata", typ: kString, ver: since(0)},
	{name: "commitTimestamp", typ: kInt64, ver: since(0)},
	{name: "expireTimestamp", typ: kInt64, ver: between(1, 1)},
	{name: "topicId", typ: kUUID, ver: since(4), tagged: since(4), tag: 0},
}}

var schemaPartitionChangeRecord = kSchema{name: "PartitionChangeRecord", valid: between(0, 2), flexible: since(0), fields: []kField{
	{name: "partitionId", typ: kInt32, ver: since(0)},
	{name: "topicId", typ: kUUID, ver: since(0)},
	{name: "isr", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	{name: "leader", typ: kInt32, ver: since(0), tagged: since(0), tag: 1, def: -2},
	{name: "replicas", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 2},
	{name: "removingReplicas", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 3},
	{name: "addingReplicas", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 4},
	{name: "leaderRecoveryState", typ: kInt8, ver: since(0), tagged: since(0), tag: 5, def: -1},
	{name: "directories", typ: kArray, elem: kUUID, ver: since(1), nullable: since(1), tagged: since(1), tag: 8},
	{name: "eligibleLeaderReplicas", typ: kArray, elem: kInt32, ver: since(2), nullable: since(2), tagged: since(2), tag: 6},
	{name: "lastKnownElr", typ: kArray, elem: kInt32, ver: since(2), nullable: since(2), tagged: since(2), tag: 7},
}}

var schemaPartitionRecord = kSchema{name: "PartitionRecord", valid: between(0, 2), flexible: since(0), fields: []kField{
	{name: "partitionId", typ: kInt32, ver: since(0)},
	{name: "topicId", typ: kUUID, ver: since(0)},
	{name: "replicas", typ: kArray, elem: kInt32, ver: since(0)},
	{name: "isr", typ: kArray, elem: kInt32, ver: since(0)},
	{name: "removingReplicas", typ: kArray, elem: kInt32, ver: since(0)},
	{name: "addingReplicas", typ: kArray, elem: kInt32, ver: since(0)},
	{name: "leader", typ: kInt32, ver: since(0)},
	{name: "leaderRecoveryState", typ: kInt8, ver: since(0), tagged: since(0), tag: 0},
	{name: "leaderEpoch", typ: kInt32, ver: since(0)},
	{name: "partitionEpoch", typ: kInt32, ver: since(0)},
	{name: "directories", typ: kArray, elem: kUUID, ver: since(1)},
	{name: "eligibleLeaderReplicas", typ: kArray, elem: kInt32, ver: since(2), nullable: since(2), tagged: since(2), tag: 1},
	{name: "lastKnownElr", typ: kArray, elem: kInt32, ver: since(2), nullable: since(2), tagged: since(2), tag: 2},
}}

var schemaProducerIdsRecord = kSchema{name: "ProducerIdsRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "brokerId", typ: kInt32, ver: since(0)},
	{name: "brokerEpoch", typ: kInt64, ver: since(0)},
	{name: "nextProducerId", typ: kInt64, ver: since(0)},
}}

var schemaRegisterBrokerRecord = kSchema{name: "RegisterBrokerRecord", valid: between(0, 4), flexible: since(0), fields: []kField{
	{name: "brokerId", typ: kInt32, ver: since(0)},
	{name: "isMigratingZkBroker", typ: kBool, ver: since(2)},
	{name: "incarnationId", typ: kUUID, ver: since(0)},
	{name: "brokerEpoch", typ: kInt64, ver: since(0)},
	{name: "endPoints", typ: kArray, ver: since(0), fields: []kField{
		{name: "name", typ: kString, ver: since(0)},
		{name: "host", typ: kString, ver: since(0)},
		{name: "port", typ: kUint16, ver: since(0)},
		{name: "securityProtocol", typ: kInt16, ver: since(0)},
	}},
	{name: "features", typ: kArray, ver: since(0), fields: []kField{
		{name: "name", typ: kString, ver: since(0)},
		{name: "minSupportedVersion", typ: kInt16, ver: since(0)},
		{name: "maxSupportedVersion", typ: kInt16, ver: since(0)},
	}},
	{name: "rack", typ: kString, ver: since(0), nullable: since(0)},
	{name: "fenced", typ: kBool, ver: since(0)},
	{name: "inControlledShutdown", typ: kBool, ver: since(1)},
	{name: "logDirs", typ: kArray, elem: kUUID, ver: since(3), tagged: since(3), tag: 0},
	{name: "cordonedLogDirs", typ: kArray, elem: kUUID, ver: since(4), nullable: since(4), tagged: since(4), tag: 1},
}}

var schemaRegisterControllerRecord = kSchema{name: "RegisterControllerRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "controllerId", typ: kInt32, ver: since(0)},
	{name: "incarnationId", typ: kUUID, ver: since(0)},
	{name: "zkMigrationReady", typ: kBool, ver: since(0)},
	{name: "endPoints", typ: kArray, ver: since(0), fields: []kField{
		{name: "name", typ: kString, ver: since(0)},
		{name: "host", typ: kString, ver: since(0)},
		{name: "port", typ: kUint16, ver: since(0)},
		{name: "securityProtocol", typ: kInt16, ver: since(0)},
	}},
	{name: "features", typ: kArray, ver: since(0), fields: []kField{
		{name: "name", typ: kString, ver: since(0)},
		{name: "minSupportedVersion", typ: kInt16, ver: since(0)},
		{name: "maxSupportedVersion", typ: kInt16, ver: since(0)},
	}},
}}

var schemaRemoveAccessControlEntryRecord = kSchema{name: "RemoveAccessControlEntryRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "id", typ: kUUID, ver: since(0)},
}}

var schemaRemoveDelegationTokenRecord = kSchema{name: "RemoveDelegationTokenRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "tokenId", typ: kString, ver: since(0)},
}}

var schemaRemoveTopicRecord = kSchema{name: "RemoveTopicRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "topicId", typ: kUUID, ver: since(0)},
}}

var schemaRemoveUserScramCredentialRecord = kSchema{name: "RemoveUserScramCredentialRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "name", typ: kString, ver: since(0)},
	{name: "mechanism", typ: kInt8, ver: since(0)},
}}

var schemaShareGroupCurrentMemberAssignmentKey = kSchema{name: "ShareGroupCurrentMemberAssignmentKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaShareGroupCurrentMemberAssignmentValue = kSchema{name: "ShareGroupCurrentMemberAssignmentValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "memberEpoch", typ: kInt32, ver: since(0)},
	{name: "previousMemberEpoch", typ: kInt32, ver: since(0)},
	{name: "state", typ: kInt8, ver: since(0)},
	{name: "assignedPartitions", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
}}

var schemaShareGroupMemberMetadataKey = kSchema{name: "ShareGroupMemberMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaShareGroupMemberMetadataValue = kSchema{name: "ShareGroupMemberMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "rackId", typ: kString, ver: since(0), nullable: since(0)},
	{name: "clientId", typ: kString, ver: since(0)},
	{name: "clientHost", typ: kString, ver: since(0)},
	{name: "subscribedTopicNames", typ: kArray, elem: kString, ver: since(0)},
}}

var schemaShareGroupMetadataKey = kSchema{name: "ShareGroupMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaShareGroupMetadataValue = kSchema{name: "ShareGroupMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "epoch", typ: kInt32, ver: since(0)},
	{name: "metadataHash", typ: kInt64, ver: since(0)},
}}

var schemaShareGroupStatePartitionMetadataKey = kSchema{name: "ShareGroupStatePartitionMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaShareGroupStatePartitionMetadataValue = kSchema{name: "ShareGroupStatePartitionMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "initializingTopics", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "topicName", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
	{name: "initializedTopics", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "topicName", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
	{name: "deletingTopics", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "topicName", typ: kString, ver: since(0)},
	}},
}}

var schemaShareGroupTargetAssignmentMemberKey = kSchema{name: "ShareGroupTargetAssignmentMemberKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaShareGroupTargetAssignmentMemberValue = kSchema{name: "ShareGroupTargetAssignmentMemberValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "topicPartitions", typ: kArray, ver: since(0), fields: []kField{
		{name: "topicId", typ: kUUID, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
}}

var schemaShareGroupTargetAssignmentMetadataKey = kSchema{name: "ShareGroupTargetAssignmentMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaShareGroupTargetAssignmentMetadataValue = kSchema{name: "ShareGroupTargetAssignmentMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "assignmentEpoch", typ: kInt32, ver: since(0)},
	{name: "assignmentTimestamp", typ: kInt64, ver: since(0), tagged: since(0), tag: 0},
}}

var schemaShareSnapshotKey = kSchema{name: "ShareSnapshotKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "topicId", typ: kUUID, ver: between(0, 0)},
	{name: "partition", typ: kInt32, ver: between(0, 0)},
}}

var schemaShareSnapshotValue = kSchema{name: "ShareSnapshotValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "snapshotEpoch", typ: kInt32, ver: since(0)},
	{name: "stateEpoch", typ: kInt32, ver: since(0)},
	{name: "leaderEpoch", typ: kInt32, ver: since(0)},
	{name: "startOffset", typ: kInt64, ver: since(0)},
	{name: "deliveryCompleteCount", typ: kInt32, ver: since(0), tagged: since(0), tag: 0, def: -1},
	{name: "createTimestamp", typ: kInt64, ver: since(0)},
	{name: "writeTimestamp", typ: kInt64, ver: since(0)},
	{name: "stateBatches", typ: kArray, ver: since(0), fields: []kField{
		{name: "firstOffset", typ: kInt64, ver: since(0)},
		{name: "lastOffset", typ: kInt64, ver: since(0)},
		{name: "deliveryState", typ: kInt8, ver: since(0)},
		{name: "deliveryCount", typ: kInt16, ver: since(0)},
	}},
}}

var schemaShareUpdateKey = kSchema{name: "ShareUpdateKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "topicId", typ: kUUID, ver: between(0, 0)},
	{name: "partition", typ: kInt32, ver: between(0, 0)},
}}

var schemaShareUpdateValue = kSchema{name: "ShareUpdateValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "snapshotEpoch", typ: kInt32, ver: since(0)},
	{name: "leaderEpoch", typ: kInt32, ver: since(0)},
	{name: "startOffset", typ: kInt64, ver: since(0)},
	{name: "deliveryCompleteCount", typ: kInt32, ver: since(0), tagged: since(0), tag: 0, def: -1},
	{name: "stateBatches", typ: kArray, ver: since(0), fields: []kField{
		{name: "firstOffset", typ: kInt64, ver: since(0)},
		{name: "lastOffset", typ: kInt64, ver: since(0)},
		{name: "deliveryState", typ: kInt8, ver: since(0)},
		{name: "deliveryCount", typ: kInt16, ver: since(0)},
	}},
}}

var schemaStreamsGroupCurrentMemberAssignmentKey = kSchema{name: "StreamsGroupCurrentMemberAssignmentKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaStreamsGroupCurrentMemberAssignmentValue = kSchema{name: "StreamsGroupCurrentMemberAssignmentValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "memberEpoch", typ: kInt32, ver: since(0)},
	{name: "previousMemberEpoch", typ: kInt32, ver: since(0)},
	{name: "state", typ: kInt8, ver: since(0)},
	{name: "activeTasks", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
	{name: "standbyTasks", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
	{name: "warmupTasks", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
	{name: "activeTasksPendingRevocation", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
	{name: "standbyTasksPendingRevocation", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
	{name: "warmupTasksPendingRevocation", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
		{name: "assignmentEpochs", typ: kArray, elem: kInt32, ver: since(0), nullable: since(0), tagged: since(0), tag: 0},
	}},
}}

var schemaStreamsGroupMemberMetadataKey = kSchema{name: "StreamsGroupMemberMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaStreamsGroupMemberMetadataValue = kSchema{name: "StreamsGroupMemberMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "instanceId", typ: kString, ver: since(0), nullable: since(0)},
	{name: "rackId", typ: kString, ver: since(0), nullable: since(0)},
	{name: "clientId", typ: kString, ver: since(0)},
	{name: "clientHost", typ: kString, ver: since(0)},
	{name: "rebalanceTimeoutMs", typ: kInt32, ver: since(0)},
	{name: "topologyEpoch", typ: kInt32, ver: since(0)},
	{name: "processId", typ: kString, ver: since(0)},
	{name: "userEndpoint", typ: kStruct, ver: since(0), nullable: since(0), fields: []kField{
		{name: "host", typ: kString, ver: since(0)},
		{name: "port", typ: kUint16, ver: since(0)},
	}},
	{name: "clientTags", typ: kArray, ver: since(0), fields: []kField{
		{name: "key", typ: kString, ver: since(0)},
		{name: "value", typ: kString, ver: since(0)},
	}},
}}

var schemaStreamsGroupMetadataKey = kSchema{name: "StreamsGroupMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaStreamsGroupMetadataValue = kSchema{name: "StreamsGroupMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "epoch", typ: kInt32, ver: since(0)},
	{name: "metadataHash", typ: kInt64, ver: since(0)},
	{name: "validatedTopologyEpoch", typ: kInt32, ver: since(0), tagged: since(0), tag: 0, def: -1},
	{name: "lastAssignmentConfigs", typ: kArray, ver: since(0), nullable: since(0), tagged: since(0), tag: 1, fields: []kField{
		{name: "key", typ: kString, ver: since(0)},
		{name: "value", typ: kString, ver: since(0)},
	}},
	{name: "storedDescriptionTopologyEpoch", typ: kInt32, ver: since(0), tagged: since(0), tag: 2, def: -1},
	{name: "failedDescriptionTopologyEpoch", typ: kInt32, ver: since(0), tagged: since(0), tag: 3, def: -1},
}}

var schemaStreamsGroupTargetAssignmentMemberKey = kSchema{name: "StreamsGroupTargetAssignmentMemberKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
	{name: "memberId", typ: kString, ver: between(0, 0)},
}}

var schemaStreamsGroupTargetAssignmentMemberValue = kSchema{name: "StreamsGroupTargetAssignmentMemberValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "activeTasks", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
	{name: "standbyTasks", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
	{name: "warmupTasks", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "partitions", typ: kArray, elem: kInt32, ver: since(0)},
	}},
}}

var schemaStreamsGroupTargetAssignmentMetadataKey = kSchema{name: "StreamsGroupTargetAssignmentMetadataKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaStreamsGroupTargetAssignmentMetadataValue = kSchema{name: "StreamsGroupTargetAssignmentMetadataValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "assignmentEpoch", typ: kInt32, ver: since(0)},
	{name: "assignmentTimestamp", typ: kInt64, ver: since(0), tagged: since(0), tag: 0},
}}

var schemaStreamsGroupTopologyKey = kSchema{name: "StreamsGroupTopologyKey", valid: between(0, 0), fields: []kField{
	{name: "groupId", typ: kString, ver: between(0, 0)},
}}

var schemaStreamsGroupTopologyValue = kSchema{name: "StreamsGroupTopologyValue", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "epoch", typ: kInt32, ver: since(0)},
	{name: "subtopologies", typ: kArray, ver: since(0), fields: []kField{
		{name: "subtopologyId", typ: kString, ver: since(0)},
		{name: "sourceTopics", typ: kArray, elem: kString, ver: since(0)},
		{name: "sourceTopicRegex", typ: kArray, elem: kString, ver: since(0)},
		{name: "stateChangelogTopics", typ: kArray, ver: since(0), fields: []kField{
			{name: "name", typ: kString, ver: since(0)},
			{name: "partitions", typ: kInt32, ver: since(0)},
			{name: "replicationFactor", typ: kInt16, ver: since(0)},
			{name: "topicConfigs", typ: kArray, ver: since(0), fields: []kField{
				{name: "key", typ: kString, ver: since(0)},
				{name: "value", typ: kString, ver: since(0)},
			}},
		}},
		{name: "repartitionSinkTopics", typ: kArray, elem: kString, ver: since(0)},
		{name: "repartitionSourceTopics", typ: kArray, ver: since(0), fields: []kField{
			{name: "name", typ: kString, ver: since(0)},
			{name: "partitions", typ: kInt32, ver: since(0)},
			{name: "replicationFactor", typ: kInt16, ver: since(0)},
			{name: "topicConfigs", typ: kArray, ver: since(0), fields: []kField{
				{name: "key", typ: kString, ver: since(0)},
				{name: "value", typ: kString, ver: since(0)},
			}},
		}},
		{name: "copartitionGroups", typ: kArray, ver: since(0), fields: []kField{
			{name: "sourceTopics", typ: kArray, elem: kInt16, ver: since(0)},
			{name: "sourceTopicRegex", typ: kArray, elem: kInt16, ver: since(0)},
			{name: "repartitionSourceTopics", typ: kArray, elem: kInt16, ver: since(0)},
		}},
	}},
}}

var schemaTopicRecord = kSchema{name: "TopicRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "name", typ: kString, ver: since(0)},
	{name: "topicId", typ: kUUID, ver: since(0)},
}}

var schemaTransactionLogKey = kSchema{name: "TransactionLogKey", valid: between(0, 0), fields: []kField{
	{name: "transactionalId", typ: kString, ver: between(0, 0)},
}}

var schemaTransactionLogValue = kSchema{name: "TransactionLogValue", valid: between(0, 1), flexible: since(1), fields: []kField{
	{name: "producerId", typ: kInt64, ver: since(0)},
	{name: "previousProducerId", typ: kInt64, ver: since(1), tagged: since(1), tag: 0, def: -1},
	{name: "nextProducerId", typ: kInt64, ver: since(1), tagged: since(1), tag: 1, def: -1},
	{name: "producerEpoch", typ: kInt16, ver: since(0)},
	{name: "nextProducerEpoch", typ: kInt16, ver: since(1), tagged: since(1), tag: 3, def: -1},
	{name: "transactionTimeoutMs", typ: kInt32, ver: since(0)},
	{name: "transactionStatus", typ: kInt8, ver: since(0)},
	{name: "transactionPartitions", typ: kArray, ver: since(0), nullable: since(0), fields: []kField{
		{name: "topic", typ: kString, ver: since(0)},
		{name: "partitionIds", typ: kArray, elem: kInt32, ver: since(0)},
	}},
	{name: "transactionLastUpdateTimestampMs", typ: kInt64, ver: since(0)},
	{name: "transactionStartTimestampMs", typ: kInt64, ver: since(0)},
	{name: "clientTransactionVersion", typ: kInt16, ver: since(1), tagged: since(1), tag: 2},
}}

var schemaUnfenceBrokerRecord = kSchema{name: "UnfenceBrokerRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "id", typ: kInt32, ver: since(0)},
	{name: "epoch", typ: kInt64, ver: since(0)},
}}

var schemaUnregisterBrokerRecord = kSchema{name: "UnregisterBrokerRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "brokerId", typ: kInt32, ver: since(0)},
	{name: "brokerEpoch", typ: kInt64, ver: since(0)},
}}

var schemaUnregisterControllerRecord = kSchema{name: "UnregisterControllerRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "controllerId", typ: kInt32, ver: since(0)},
}}

var schemaUserScramCredentialRecord = kSchema{name: "UserScramCredentialRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "name", typ: kString, ver: since(0)},
	{name: "mechanism", typ: kInt8, ver: since(0)},
	{name: "salt", typ: kBytes, ver: since(0)},
	{name: "storedKey", typ: kBytes, ver: since(0)},
	{name: "serverKey", typ: kBytes, ver: since(0)},
	{name: "iterations", typ: kInt32, ver: since(0)},
}}

var schemaZkMigrationStateRecord = kSchema{name: "ZkMigrationStateRecord", valid: between(0, 0), flexible: since(0), fields: []kField{
	{name: "zkMigrationState", typ: kInt8, ver: since(0)},
}}
