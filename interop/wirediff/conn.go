package wirediff

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is one Kafka-protocol connection that sends each request at the
// version set on it (no negotiation, no retries, no routing): what a
// script says is what goes on the wire.
type Conn struct {
	c        net.Conn
	r        *bufio.Reader
	corr     int32
	clientID string
}

// Dial connects to a broker.
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10), clientID: clientID}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// errNoResponse is RoundTrip's answer to a produce with acks=0.
var errTimeout = errors.New("no answer within 15 s")

// RoundTrip writes req (at req.GetVersion()) and reads its response.
// A produce with acks=0 gets none: RoundTrip returns nil, nil.
func (c *Conn) RoundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	// A broker that neither answers nor closes within 15 s is reported
	// as such (Kafka mutes a connection whose request it could not read).
	deadline := time.Now().Add(15 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.c.SetDeadline(deadline)
	c.corr++
	corr := c.corr
	buf := make([]byte, 4, 256)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(c.clientID)))
	buf = append(buf, c.clientID...)
	if req.IsFlexible() {
		buf = append(buf, 0) // no tagged fields in the header
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := c.c.Write(buf); err != nil {
		return nil, err
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		return nil, nil
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, errTimeout
		}
		return nil, fmt.Errorf("%s v%d: reading the response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 256<<20 {
		return nil, fmt.Errorf("%s v%d: response size %d", kmsg.NameForKey(req.Key()), req.GetVersion(), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions answers with header v0
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		// ApiVersions answers an unsupported version at v0.
		if req.Key() == 18 {
			v0 := kmsg.NewPtrApiVersionsResponse()
			if v0.ReadFrom(body) == nil {
				return v0, nil
			}
		}
		return nil, fmt.Errorf("%s v%d: decoding the response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tagged fields in the response header")
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("bad tag in the response header")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("bad tag size in the response header")
		}
		b = b[n+int(size):]
	}
	return b, nil
}
