package batch

import (
	"hash/crc32"
)

// castagnoli is the CRC-32C table (formats.md §0.3). hash/crc32 uses the
// SSE4.2 CRC32 instruction with three-way interleaving on amd64 when this
// polynomial is asked for; BenchmarkCRC32C in crc_test.go compares it with
// github.com/klauspost/crc32 on the machine at hand.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ChecksumIEEE returns the CRC-32 (IEEE) of b, used by legacy v0/v1
// messages (formats.md §2.3).
func ChecksumIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
