package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestAdminRefusesBrowsers: the admin endpoint had no authentication and
// no Content-Type, Origin or Host check, so a text/plain POST from any
// web page (or after DNS rebinding) started a mirror into an existing
// topic, and its error messages turned it into a port scanner. Changes
// need the token; what a browser sends is refused.
func TestAdminRefusesBrowsers(t *testing.T) {
	s := startTest(t, Config{})
	h := httptest.NewServer(s.AdminHandler())
	defer h.Close()
	const body = `{"source": "127.0.0.1:1", "topics": ["t"]}`
	tok := s.AdminToken()
	for _, c := range []struct {
		name    string
		method  string
		headers map[string]string
		want    int
	}{
		{"text/plain POST", "POST", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"text/plain POST with the token", "POST", map[string]string{"Content-Type": "text/plain", "Authorization": "Bearer " + tok}, http.StatusUnsupportedMediaType},
		{"form POST", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": "Bearer " + tok}, http.StatusUnsupportedMediaType},
		{"no token", "POST", map[string]string{"Content-Type": "application/json"}, http.StatusUnauthorized},
		{"wrong token", "POST", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + strings.Repeat("x", len(tok))}, http.StatusUnauthorized},
		{"Origin", "POST", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + tok, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"Sec-Fetch-Mode", "POST", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + tok, "Sec-Fetch-Mode": "no-cors"}, http.StatusForbidden},
		{"Referer", "GET", map[string]string{"Referer": "http://evil.example/"}, http.StatusForbidden},
		{"rebound Host", "GET", map[string]string{"Host": "evil.example:9093"}, http.StatusForbidden},
		{"rebound Host POST", "POST", map[string]string{"Host": "evil.example", "Content-Type": "application/json"}, http.StatusForbidden},
		{"status", "GET", nil, http.StatusOK},
		{"localhost status", "GET", map[string]string{"Host": "localhost:9093"}, http.StatusOK},
		// With the token, a name as Host is the operator's.
		{"token and a name", "POST", map[string]string{"Host": "admin.example", "Content-Type": "application/json; charset=utf-8", "Authorization": "Bearer " + tok}, http.StatusBadGateway},
	} {
		path := "/v1/mirrors/start"
		if c.method == "GET" {
			path = "/v1/mirrors"
		}
		req, err := http.NewRequest(c.method, h.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.headers {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	if st := s.MirrorStatus(); len(st) != 0 {
		t.Fatalf("refused requests changed mirrors: %+v", st)
	}
}

// TestAdminTokenFile: the token is made at the first start, kept in the
// log directory readable by its owner only, and the same after a
// restart; ReadAdminToken reads it.
func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	s := startTest(t, Config{Dir: dir})
	tok := s.AdminToken()
	s.close(t)
	fi, err := os.Stat(filepath.Join(dir, AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || len(tok) < 40 {
		t.Fatalf("token file mode %v, token of %d characters", fi.Mode().Perm(), len(tok))
	}
	if got, err := ReadAdminToken(dir); err != nil || got != tok {
		t.Fatalf("ReadAdminToken: %q %v", got, err)
	}
	s = startTest(t, Config{Dir: dir})
	if s.AdminToken() != tok {
		t.Fatal("the token changed at restart")
	}
}

// TestMirrorStartIntoDataNeedsConsent: a start into a topic whose
// partitions hold records of their own truncated them silently; it is
// refused (nothing changes, the partition stays writable) unless
// AllowTruncation, and then the answer and the log say how many offsets
// were discarded.
func TestMirrorStartIntoDataNeedsConsent(t *testing.T) {
	a := startTest(t, Config{})
	var mu sync.Mutex
	var lines []string
	b := startTest(t, Config{Logf: func(f string, args ...any) {
		mu.Lock()
		lines = append(lines, f)
		mu.Unlock()
	}})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "d", 1)
	produceOK(t, ra, "d", 0, records(t, 2, -1, 0, 0, false, 10))
	createTopic(t, rb, "d", 1)
	for i := 0; i < 3; i++ {
		produceOK(t, rb, "d", 0, records(t, 1, -1, 0, 0, false, 10))
	}
	_, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"d"}})
	if !errors.Is(err, errWouldTruncate) || !strings.Contains(err.Error(), "offsets 0 to 2") {
		t.Fatalf("start into a topic with 3 records: %v", err)
	}
	if end := logOf(t, b, "d", 0).LogEndOffset(); end != 3 {
		t.Fatalf("refused start left log end %d, want 3", end)
	}
	produceOK(t, rb, "d", 0, records(t, 1, -1, 0, 0, false, 10)) // still writable
	st, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"d"}, AllowTruncation: true})
	if err != nil || len(st) != 1 || st[0].Truncated != 4 {
		t.Fatalf("start with AllowTruncation: %+v %v, want 4 offsets truncated", st, err)
	}
	waitMirrored(t, b, a, "d", 0)
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range lines {
		if strings.Contains(l, "offsets discarded") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no log line for the truncation: %q", lines)
	}
}
