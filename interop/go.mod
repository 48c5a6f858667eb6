module github.com/partlog/partlog/interop

go 1.26.0

require (
	github.com/partlog/partlog v0.0.0-00010101000000-000000000000
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgraph-io/ristretto/v2 v2.4.2 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/hanwen/go-fuse/v2 v2.12.1 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go v1.22.3
)

replace github.com/partlog/partlog => ../
