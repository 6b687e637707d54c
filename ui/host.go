package ui

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// AnyHost in [Options.AllowedHosts] turns the Host check off: for a handler behind a proxy
// or middleware that checks the Host itself.
const AnyHost = "*"

// hostAllowList decides which Host headers a handler answers. The names a browser could
// have been tricked into sending by DNS rebinding (a name the attacker controls, resolving
// to this server) are exactly the names not on it: an IP literal cannot be rebound (the
// page's origin is then the address itself), and localhost and *.localhost never leave the
// machine's resolver.
type hostAllowList struct {
	any   bool
	names map[string]bool // lower case, without port or trailing dot
}

func newHostAllowList(hosts []string) (*hostAllowList, error) {
	l := &hostAllowList{names: map[string]bool{}}
	for _, h := range hosts {
		if h == AnyHost {
			l.any = true
			continue
		}
		name := normalizeHost(h)
		if !validHostEntry(h, name) {
			return nil, fmt.Errorf("ui: AllowedHosts: %q is not a host name (a name or address, with or without :port, or %q)", h, AnyHost)
		}
		l.names[name] = true
	}
	return l, nil
}

// hostName is a DNS name as a Host header carries it (underscores allowed).
var hostName = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)*$`)

// validHostEntry reports whether entry, whose normalized form is name, is a name or an IP
// address, with at most a numeric port.
func validHostEntry(entry, name string) bool {
	if _, port, err := net.SplitHostPort(entry); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return false
		}
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	return hostName.MatchString(name)
}

// normalizeHost is host (a Host header or an allowed host) without its port, brackets and
// trailing dot, in lower case.
func normalizeHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimPrefix(host, "[")
	host = strings.TrimSuffix(host, "]")
	host = strings.TrimSuffix(host, ".")
	return strings.ToLower(host)
}

// allows reports whether a request with this Host header may be answered.
func (l *hostAllowList) allows(hostHeader string) bool {
	if l.any {
		return true
	}
	host := normalizeHost(hostHeader)
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return l.names[host]
}

// wrap answers 421 Misdirected Request, before next runs, to a request whose Host is not
// allowed.
func (l *hostAllowList) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.allows(r.Host) {
			http.Error(w, fmt.Sprintf("misdirected request: this dashboard does not answer for the host %q; "+
				"it answers IP addresses, localhost and the names it was given "+
				"(skiplock ui --allowed-hosts, ui.Options.AllowedHosts)", r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireAllowedHost wraps next with the Host check of [Options.AllowedHosts]: a request
// whose Host header is not an IP address, localhost, a name under .localhost or one of
// allowed gets 421 Misdirected Request and never reaches next. `skiplock ui` puts it in front
// of /metrics too. It fails for an entry of allowed that is not a host name.
func RequireAllowedHost(allowed []string, next http.Handler) (http.Handler, error) {
	l, err := newHostAllowList(allowed)
	if err != nil {
		return nil, err
	}
	return l.wrap(next), nil
}
