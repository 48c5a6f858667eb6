package batch

import (
	"hash/crc32"

	"github.com/partlog/partlog/internal/crc32c"
)

// Checksum returns the CRC-32C of b, a batch's checksum over bytes
// [21, end) (formats.md §0.3).
func Checksum(b []byte) uint32 { return crc32c.Checksum(b) }

// ChecksumIEEE returns the CRC-32 (IEEE) of b, used by legacy v0/v1
// messages (formats.md §2.3).
func ChecksumIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
