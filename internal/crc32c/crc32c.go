// Package crc32c is the one CRC-32C (Castagnoli) table of partlog, for
// every format that carries one (record batches, producer snapshots,
// mirror.checkpoint, the consumer-group store; formats.md §0.3).
// hash/crc32 uses the SSE4.2 CRC32 instruction with three-way interleaving
// on amd64 (and the ARMv8 instructions on arm64) for this polynomial;
// BenchmarkCRC32C in package batch compares it with
// github.com/klauspost/crc32 on the machine at hand.
package crc32c

import "hash/crc32"

var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }

// Update returns the CRC-32C of the bytes crc covers followed by b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, table, b) }
