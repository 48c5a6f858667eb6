package peers

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/partlog/partlog"
	"github.com/tidwall/wal"
	bolt "go.etcd.io/bbolt"
)

// store is one library under test, holding each appended batch as an
// opaque entry. append must return only once the entry is durable when
// the store was opened durable.
type store interface {
	append(b []byte) error
	close() error
}

type opener struct {
	name string
	open func(dir string, durable bool) (store, error)
}

var peers = []opener{
	{"partlog", openPartlog},
	{"tidwall-wal", openTidwall},
	{"nats-filestore", openNATS},
	{"pebble", openPebble},
	{"bbolt", openBolt},
}

// partlog: AppendAsLeader; durable = Log.Sync up to the appended offset
// (one appender, so each Sync is one flush: fdatasync of the segment).
type partlogStore struct {
	l       *partlog.Log
	durable bool
}

func openPartlog(dir string, durable bool) (store, error) {
	c, err := partlog.NewMappingCache(1 << 30)
	if err != nil {
		return nil, err
	}
	l, err := partlog.Open(dir, &partlog.Options{MappingCache: c})
	if err != nil {
		return nil, err
	}
	return &partlogStore{l: l, durable: durable}, nil
}

func (s *partlogStore) append(b []byte) error {
	info, err := s.l.AppendAsLeader(b, 1)
	if err != nil || !s.durable {
		return err
	}
	return s.l.Sync(context.Background(), info.LastOffset+1)
}

func (s *partlogStore) close() error { return s.l.Close() }

// tidwall/wal: one entry per batch, binary format, default 20 MB
// segments; durable = its default fsync after every Write.
type tidwallStore struct {
	w    *wal.Log
	next uint64
}

func openTidwall(dir string, durable bool) (store, error) {
	w, err := wal.Open(filepath.Join(dir, "wal"), &wal.Options{NoSync: !durable, LogFormat: wal.Binary, NoCopy: true})
	if err != nil {
		return nil, err
	}
	return &tidwallStore{w: w, next: 1}, nil
}

func (s *tidwallStore) append(b []byte) error {
	err := s.w.Write(s.next, b)
	s.next++
	return err
}

func (s *tidwallStore) close() error { return s.w.Close() }

// NATS file store: the store of a JetStream stream (one subject), reached
// through an embedded server with no listener. The package does not
// export its constructor (newFileStore), so the stream is created with
// Account.RestoreStream from an empty snapshot and its store taken with
// Store(); StoreMsg is then called directly, without the server's publish
// path. durable = the server's SyncAlways (fsync after every write);
// otherwise the default background sync every 2 minutes.
type natsStore struct {
	srv *server.Server
	fs  server.StreamStore
}

func openNATS(dir string, durable bool) (store, error) {
	opts := &server.Options{
		JetStream:  true,
		StoreDir:   dir,
		DontListen: true,
		NoLog:      true,
		NoSigs:     true,
		SyncAlways: durable,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server not ready")
	}
	cfg := server.StreamConfig{
		Name:     "bench",
		Subjects: []string{"p"},
		Storage:  server.FileStorage,
		Replicas: 1,
		MaxMsgs:  -1, MaxBytes: -1, MaxMsgsPer: -1, MaxMsgSize: -1,
	}
	snap, err := emptyStreamSnapshot(cfg)
	if err == nil {
		var mset interface{ Store() server.StreamStore }
		if mset, err = srv.GlobalAccount().RestoreStream(&cfg, bytes.NewReader(snap)); err == nil {
			return &natsStore{srv: srv, fs: mset.Store()}, nil
		}
	}
	srv.Shutdown()
	return nil, err
}

// emptyStreamSnapshot is a JetStream stream snapshot (an s2-compressed tar)
// holding only the stream's metadata file.
func emptyStreamSnapshot(cfg server.StreamConfig) ([]byte, error) {
	meta, err := json.Marshal(server.FileStreamInfo{Created: time.Now().UTC(), StreamConfig: cfg})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := s2.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: server.JetStreamMetaFile, Mode: 0o600, Size: int64(len(meta)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(meta); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (s *natsStore) append(b []byte) error {
	_, _, err := s.fs.StoreMsg("p", nil, b, 0)
	return err
}

func (s *natsStore) close() error {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return nil
}

// pebble: key = big-endian offset, value = the batch; durable =
// pebble.Sync (WAL fsync per Set), otherwise pebble.NoSync.
type pebbleStore struct {
	db   *pebble.DB
	wo   *pebble.WriteOptions
	next uint64
	key  [8]byte
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Fatalf(string, ...interface{}) { panic("pebble fatal") }

func openPebble(dir string, durable bool) (store, error) {
	db, err := pebble.Open(filepath.Join(dir, "pebble"), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	wo := pebble.NoSync
	if durable {
		wo = pebble.Sync
	}
	return &pebbleStore{db: db, wo: wo}, nil
}

func (s *pebbleStore) append(b []byte) error {
	binary.BigEndian.PutUint64(s.key[:], s.next)
	s.next++
	return s.db.Set(s.key[:], b, s.wo)
}

func (s *pebbleStore) close() error { return s.db.Close() }

// bbolt: one bucket, one read-write transaction per batch (key =
// big-endian offset, fill percent 1 for the sequential keys); durable =
// its default fdatasync at commit, otherwise NoSync.
type boltStore struct {
	db   *bolt.DB
	next uint64
	key  [8]byte
}

var boltBucket = []byte("partition")

func openBolt(dir string, durable bool) (store, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, &bolt.Options{NoSync: !durable, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &boltStore{db: db}, nil
}

func (s *boltStore) append(b []byte) error {
	binary.BigEndian.PutUint64(s.key[:], s.next)
	s.next++
	return s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		bk.FillPercent = 1
		return bk.Put(s.key[:], b)
	})
}

func (s *boltStore) close() error { return s.db.Close() }
