package ui_test

import (
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skiplock/skiplock/ui"
)

// hostClient requests paths of srv with the Host header host, as a browser that resolved
// host to srv's address sends them.
type hostClient struct {
	srv  *httptest.Server
	host string
}

func (c hostClient) do(t *testing.T, method, path string, form url.Values, header map[string]string) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, c.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = c.host
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var pauseToken = regexp.MustCompile(`action="/queues/pause"><input type="hidden" name="csrf" value="([^"]+)"`)

// rebind is the attack of DNS rebinding on a dashboard without authentication: a page of
// the attacker's name, whose address now resolves to the dashboard, reads the overview,
// takes the pause form's token and posts it as same-origin. It returns the status of the
// GET and of the POST (0 when the page had no token to take).
func rebind(t *testing.T, c hostClient) (getCode, postCode int) {
	t.Helper()
	getCode, page := c.do(t, http.MethodGet, "/", nil, nil)
	m := pauseToken.FindStringSubmatch(page)
	if m == nil {
		return getCode, 0
	}
	origin := "http://" + c.host
	postCode, _ = c.do(t, http.MethodPost, "/queues/pause", url.Values{"csrf": {html.UnescapeString(m[1])}, "queue": {"mail"}},
		map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-origin"})
	return getCode, postCode
}

// TestDNSRebindingRefused: a Host the dashboard does not answer for gets 421 on every path,
// before anything is read or changed; IP addresses, localhost and the configured names pass.
func TestDNSRebindingRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, &ui.Options{AllowedHosts: []string{"Dash.Example.com:8443"}})
	exec(t, b, `SELECT jobs_enqueue('send', queue => 'mail')`)
	srv := httptest.NewServer(b.h)
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	attacker := hostClient{srv, "rebind.attacker.example:" + port}
	getCode, postCode := rebind(t, attacker)
	if getCode != http.StatusMisdirectedRequest || postCode != 0 {
		t.Errorf("rebinding with Host %s: GET %d (want 421), POST %d (want none: no token to take)", attacker.host, getCode, postCode)
	}
	// Even with a token taken elsewhere.
	code, body := attacker.do(t, http.MethodPost, "/queues/pause", url.Values{"csrf": {b.h.TokenFor("/queues/pause")}, "queue": {"mail"}},
		map[string]string{"Origin": "http://" + attacker.host, "Sec-Fetch-Site": "same-origin"})
	if code != http.StatusMisdirectedRequest || !strings.Contains(body, `"rebind.attacker.example:`+port+`"`) || !strings.Contains(body, "--allowed-hosts") {
		t.Errorf("POST with Host %s and a valid token: %d %q, want 421 naming the host and how to allow it", attacker.host, code, body)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs_queues WHERE paused`); n != 0 {
		t.Fatal("a request of a refused Host paused the queue")
	}

	for _, host := range []string{"rebind.attacker.example", "example.com", "dash.example.com.attacker.example",
		"evil.dash.example.com", "localhost.attacker.example", "127.0.0.1.nip.io", "0x7f.1"} {
		c := hostClient{srv, host}
		for _, path := range []string{"/", "/jobs", "/jobs/1", "/dead", "/queues/mail", "/schedules", "/throughput.svg", "/nosuch"} {
			if code, _ := c.do(t, http.MethodGet, path, nil, nil); code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: %d, want 421", path, host, code)
			}
		}
		for _, path := range []string{"/dead/retry", "/dead/delete", "/queues/pause", "/queues/resume", "/queues/concurrency",
			"/queues/rate", "/schedules/run", "/schedules/enable", "/schedules/disable"} {
			if code, _ := c.do(t, http.MethodPost, path, url.Values{"csrf": {b.h.TokenFor(path)}, "queue": {"mail"}},
				map[string]string{"Sec-Fetch-Site": "same-origin"}); code != http.StatusMisdirectedRequest {
				t.Errorf("POST %s with Host %q: %d, want 421", path, host, code)
			}
		}
	}

	for _, host := range []string{"localhost:" + port, "LocalHost", "localhost.", "app.localhost:" + port, "127.0.0.1:" + port,
		"127.0.0.2", "[::1]:" + port, "[::1]", "10.1.2.3:8080", "dash.example.com", "DASH.example.COM:9999", "dash.example.com.:" + port} {
		c := hostClient{srv, host}
		if code, body := c.do(t, http.MethodGet, "/", nil, nil); code != http.StatusOK {
			t.Errorf("GET / with Host %q: %d, want 200\n%s", host, code, body)
		}
	}
	// The whole flow works for an allowed name.
	if getCode, postCode := rebind(t, hostClient{srv, "dash.example.com:" + port}); getCode != http.StatusOK || postCode != http.StatusSeeOther {
		t.Errorf("the same flow with an allowed Host: GET %d, POST %d, want 200 and 303", getCode, postCode)
	}
	if n := count(t, b, `SELECT count(*) FROM jobs_queues WHERE queue = 'mail' AND paused`); n != 1 {
		t.Error("the POST of an allowed Host did not pause the queue")
	}
}

// TestAllowedHostsOption: nil allows only addresses and localhost; AnyHost allows every
// Host; an entry that is not a host name is an error of New.
func TestAllowedHostsOption(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	get := func(h http.Handler, host string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := get(b.h, "dash.example.com"); code != http.StatusMisdirectedRequest {
		t.Errorf("zero Options, Host dash.example.com: %d, want 421", code)
	}
	if code := get(b.h, "127.0.0.1:8080"); code != http.StatusOK {
		t.Errorf("zero Options, Host 127.0.0.1:8080: %d, want 200", code)
	}
	if code := get(b.h, ""); code != http.StatusMisdirectedRequest {
		t.Errorf("zero Options, no Host: %d, want 421", code)
	}
	anyHost, err := ui.New(b.pool, &ui.Options{AllowedHosts: []string{ui.AnyHost}})
	if err != nil {
		t.Fatal(err)
	}
	if code := get(anyHost, "rebind.attacker.example"); code != http.StatusOK {
		t.Errorf("AllowedHosts {AnyHost}, Host rebind.attacker.example: %d, want 200", code)
	}
	for _, bad := range []string{"", "a b", "http://dash.example.com/", "dash.example.com/", "*.example.com", ":8080", "dash.example.com:http"} {
		if _, err := ui.New(b.pool, &ui.Options{AllowedHosts: []string{bad}}); err == nil || !strings.Contains(err.Error(), "AllowedHosts") {
			t.Errorf("AllowedHosts {%q}: err %v, want an error naming AllowedHosts", bad, err)
		}
	}
	// The wrapper `skiplock ui` puts in front of /metrics checks the same way.
	metrics, err := ui.RequireAllowedHost([]string{"metrics.internal"}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{"metrics.internal:9100": 200, "[::1]:9100": 200, "rebind.attacker.example": 421} {
		if code := get(metrics, host); code != want {
			t.Errorf("RequireAllowedHost, Host %s: %d, want %d", host, code, want)
		}
	}
}
