package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/mirror"
)

// The admin endpoint: HTTP with JSON bodies, for `partlog mirror` and
// for peers' lookups.
//
//	GET  /v1/mirrors                   → {"partitions": [MirrorPartitionStatus...]}
//	POST /v1/mirrors/start  MirrorStartRequest → {"partitions": [...], "error": "..."}
//	POST /v1/mirrors/stop   MirrorStopRequest  → {"partitions": [...], "error": "..."}
//	GET  /v1/mirrors/position?cluster_id=C&topic=T&topic_id=ID&partition=N → MirrorPosition
//	GET  /v1/mirrors/mirrors-from?cluster_id=C&topic=T&partition=N → {"mirrors": bool}
//
// A request that is wrong answers 400 and one whose source could not be
// reached 502, both with {"error": "..."} and nothing changed; a start or
// stop that failed for some topics or partitions answers 200 with the
// partitions that did start or stop and "error" naming the others, so
// the caller always learns what changed.
//
// Any web page a browser shows could send requests here (a text/plain
// POST needs no CORS preflight, and DNS rebinding makes the endpoint the
// page's own origin), so the endpoint refuses what a browser sends:
//
//   - every request with an Origin, Referer or Sec-Fetch-* header (403);
//   - every request whose Host is not an IP address or localhost
//     (403: a rebound name), unless it carries the token;
//   - a POST without Content-Type application/json (415);
//   - a POST without "Authorization: Bearer <token>" (401), the token
//     being the content of AdminTokenFile in the log directory, made at
//     the first start and readable by its owner only: only who can read
//     the log directory changes mirrors (`partlog mirror --dir`).
//
// The lookups (GET) need no token: a peer asks them, and they change
// nothing.

// AdminTokenFile holds the admin endpoint's token, in the log directory
// (mode 0600, made at the first start).
const AdminTokenFile = "partlog-admin-token"

// loadAdminToken reads the log directory's admin token, making it (32
// random bytes, base64url) if there is none.
func loadAdminToken(dir string) (string, error) {
	path := filepath.Join(dir, AdminTokenFile)
	tok, err := ReadAdminToken(dir)
	switch {
	case err == nil:
		if len(tok) < 16 {
			return "", fmt.Errorf("partlog/server: %s holds no token (%d bytes); remove it to make a new one", path, len(tok))
		}
		return tok, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("partlog/server: read %s: %w", path, err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tok = base64.RawURLEncoding.EncodeToString(raw[:])
	if err := fsutil.WritePrivateFileAtomic(path, []byte(tok+"\n")); err != nil {
		return "", err
	}
	return tok, nil
}

// ReadAdminToken returns the admin token kept in a log directory (what
// `partlog mirror --dir` sends).
func ReadAdminToken(dir string) (string, error) {
	b, err := fsutil.ReadSmall(filepath.Join(dir, AdminTokenFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// AdminToken returns the token the admin endpoint requires of changes.
func (s *Server) AdminToken() string { return s.adminToken }

// adminGuard refuses browser-shaped requests and changes without the
// token.
func (s *Server) adminGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"Origin", "Referer", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"} {
			if r.Header.Get(h) != "" {
				writeJSON(w, http.StatusForbidden, AdminResponse{Error: "refused: the request has a " + h + " header, as a browser sends; the admin endpoint answers partlog mirror and its peers only"})
				return
			}
		}
		tokenOK := false
		if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			tokenOK = subtle.ConstantTimeCompare([]byte(auth), []byte(s.adminToken)) == 1
		}
		if !tokenOK && !addressHost(r.Host) {
			writeJSON(w, http.StatusForbidden, AdminResponse{Error: "refused: Host " + strconv.Quote(r.Host) + " is not an IP address or localhost"})
			return
		}
		if r.Method == http.MethodPost {
			if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
				writeJSON(w, http.StatusUnsupportedMediaType, AdminResponse{Error: "refused: Content-Type must be application/json"})
				return
			}
			if !tokenOK {
				writeJSON(w, http.StatusUnauthorized, AdminResponse{Error: "refused: a change needs the server's admin token (Authorization: Bearer, from " + AdminTokenFile + " in its log directory: partlog mirror --dir DIR)"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// addressHost reports whether a Host header names an IP address or
// localhost (not a name that could have been rebound to this machine).
func addressHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// AdminResponse is the body of the admin endpoint's mirror answers.
type AdminResponse struct {
	ClusterID  string                  `json:"cluster_id,omitempty"`
	Partitions []MirrorPartitionStatus `json:"partitions"`
	Error      string                  `json:"error,omitempty"`
}

// ServeAdmin answers the admin endpoint on ln until Close.
func (s *Server) ServeAdmin(ln net.Listener) error {
	hs := &http.Server{Handler: s.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ln.Close()
	}
	s.admin = append(s.admin, hs)
	s.mu.Unlock()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// AdminHandler returns the admin endpoint's handler.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	guarded := s.adminGuard(mux)
	mux.HandleFunc("GET /v1/mirrors", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, AdminResponse{ClusterID: s.meta.clusterID(), Partitions: nonNil(s.MirrorStatus())})
	})
	mux.HandleFunc("POST /v1/mirrors/start", func(w http.ResponseWriter, r *http.Request) {
		var req MirrorStartRequest
		if !readJSON(w, r, &req) {
			return
		}
		st, err := s.StartMirror(r.Context(), req)
		answerChange(w, s, st, err)
	})
	mux.HandleFunc("POST /v1/mirrors/stop", func(w http.ResponseWriter, r *http.Request) {
		var req MirrorStopRequest
		if !readJSON(w, r, &req) {
			return
		}
		st, err := s.StopMirror(r.Context(), req)
		answerChange(w, s, st, err)
	})
	mux.HandleFunc("GET /v1/mirrors/position", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, err := strconv.ParseInt(q.Get("partition"), 10, 32)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, AdminResponse{Error: "partition: want a partition number"})
			return
		}
		id, err := mirror.ParseTopicID(q.Get("topic_id"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, AdminResponse{Error: "topic_id: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, s.LastMirrorPosition(q.Get("cluster_id"), q.Get("topic"), id, int32(n)))
	})
	mux.HandleFunc("GET /v1/mirrors/mirrors-from", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, err := strconv.ParseInt(q.Get("partition"), 10, 32)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, AdminResponse{Error: "partition: want a partition number"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"mirrors": s.mirrorsFromCluster(q.Get("cluster_id"), q.Get("topic"), int32(n))})
	})
	return guarded
}

func nonNil(st []MirrorPartitionStatus) []MirrorPartitionStatus {
	if st == nil {
		return []MirrorPartitionStatus{}
	}
	return st
}

func answerChange(w http.ResponseWriter, s *Server, st []MirrorPartitionStatus, err error) {
	resp := AdminResponse{ClusterID: s.meta.clusterID(), Partitions: nonNil(st)}
	code := http.StatusOK
	if err != nil {
		resp.Error = err.Error()
		switch {
		case errors.Is(err, errMirrorUsage):
			code = http.StatusBadRequest
		case errors.Is(err, errSourceUnreachable):
			code = http.StatusBadGateway
		}
	}
	writeJSON(w, code, resp)
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, AdminResponse{Error: "request body: " + err.Error()})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// adminGet asks a peer's admin endpoint and decodes its JSON answer.
func adminGet(ctx context.Context, admin, path string, q url.Values, v any) error {
	host, err := AddressOf(ctx, admin)
	if err != nil {
		return err
	}
	u := url.URL{Scheme: "http", Host: host, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u.Path, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// AddressOf resolves the host of a HOST:PORT to an IP address, so that a
// request to it carries an address as its Host (the admin endpoint
// refuses names, which could have been rebound, from callers without its
// token).
func AddressOf(ctx context.Context, hostPort string) (string, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || addressHost(host) {
		return hostPort, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("resolve %s: %w", host, err)
	}
	return net.JoinHostPort(ips[0].Unmap().String(), port), nil
}

// lookupPosition asks the source's admin endpoint for the position it
// recorded when it stopped mirroring the partition from cluster (ours).
// A position the source is still recording (STOPPING) is asked again
// until ctx ends.
func lookupPosition(ctx context.Context, admin, cluster, topic string, id mirror.TopicID, partition int32) (mirror.Position, error) {
	q := url.Values{"cluster_id": {cluster}, "topic": {topic}, "topic_id": {partlog.TopicID(id).String()},
		"partition": {strconv.Itoa(int(partition))}}
	for {
		var pos MirrorPosition
		if err := adminGet(ctx, admin, "/v1/mirrors/position", q, &pos); err != nil {
			return mirror.Position{}, err
		}
		if !pos.NotReady {
			if !pos.Found {
				return mirror.Position{}, nil
			}
			return mirror.Position{Found: true, Epoch: pos.Epoch, Offset: pos.Offset}, nil
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return mirror.Position{}, fmt.Errorf("last mirror position: still stopping: %w", ctx.Err())
		}
	}
}

// mirrorsFrom asks the source's admin endpoint whether it mirrors the
// partition from cluster (ours): a loop.
func mirrorsFrom(ctx context.Context, admin, cluster, topic string, partition int32) (bool, error) {
	q := url.Values{"cluster_id": {cluster}, "topic": {topic}, "partition": {strconv.Itoa(int(partition))}}
	var out struct {
		Mirrors bool `json:"mirrors"`
	}
	err := adminGet(ctx, admin, "/v1/mirrors/mirrors-from", q, &out)
	return out.Mirrors, err
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
