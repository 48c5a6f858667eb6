package batch_test

import (
	"fmt"
	"log"

	"github.com/partlog/partlog/batch"
)

// fetched is what a fetch returns: whole batches, here a plain one and a
// zstd-compressed one with a header.
func fetched() []byte {
	var b batch.Builder
	plain := batch.NewBatchSpec(0)
	region, err := b.AppendBatch(nil, &plain, []batch.RecordSpec{
		{Timestamp: 1_700_000_000_000, Key: []byte("order-1"), Value: []byte("created")},
		{Timestamp: 1_700_000_000_001, Key: []byte("order-2"), Value: []byte("created")},
	})
	if err != nil {
		log.Fatal(err)
	}
	zstd := batch.NewBatchSpec(2)
	zstd.Compression = batch.CompressionZstd
	region, err = b.AppendBatch(region, &zstd, []batch.RecordSpec{
		{Timestamp: 1_700_000_000_002, Key: []byte("order-1"), Value: []byte("paid"),
			Headers: []batch.Header{{Key: []byte("source"), Value: []byte("web")}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	return region
}

// Decode the records of fetched batches (a View.Records of a Log.Read, a
// segment, a produce request): the batches one by one, then the records
// of each, decompressed when the batch is compressed. Both iterators are
// used the same way: Next until false, then Err.
func ExampleView_Records() {
	var scratch []byte // reused by every decompression
	batches := batch.NewIterator(fetched(), 0)
	for v, ok := batches.Next(); ok; v, ok = batches.Next() {
		data, err := v.RecordData(scratch, 1<<20)
		if err != nil {
			log.Fatal(err)
		}
		if v.Compression() != batch.CompressionNone {
			scratch = data
		}
		records := v.Records(data)
		for r, ok := records.Next(); ok; r, ok = records.Next() {
			fmt.Printf("offset %d %s=%s", r.Offset, r.Key, r.Value)
			headers := r.Headers()
			for h, ok := headers.Next(); ok; h, ok = headers.Next() {
				fmt.Printf(" [%s: %s]", h.Key, h.Value)
			}
			fmt.Println()
		}
		if err := records.Err(); err != nil {
			log.Fatal(err)
		}
	}
	if err := batches.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// offset 0 order-1=created
	// offset 1 order-2=created
	// offset 2 order-1=paid [source: web]
}
