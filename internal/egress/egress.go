// Package egress decides which network addresses Sluice may connect to on a workflow's behalf
// (the `http` action, and any later action that downloads). A workflow's URLs come from its
// author and, through templates, from the documents it ingests, so without a policy an upload
// could make the server call its own loopback services, the private network or a cloud's
// metadata endpoint (169.254.169.254).
//
// A [Policy] refuses loopback, private, link-local, shared (CGNAT), multicast and unspecified
// addresses unless an allow rule names them, and refuses whatever a deny rule names; deny wins
// over allow. An IPv6 address that carries an IPv4 address to a gateway — IPv4-mapped
// (::ffff:0:0/96), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) — is checked as that IPv4 address,
// so 64:ff9b::7f00:1 is loopback; the deprecated or local forms whose gateway cannot be known
// (IPv4-compatible ::/96, local-use NAT64 64:ff9b:1::/48, Teredo 2001::/32, site-local
// fec0::/10) are refused unless allowed. It is enforced when connecting, on the address the name resolved to (a
// [net.Dialer] Control function), so DNS rebinding — a name that resolves to a public address when
// checked and a private one when used — cannot get past it, and every redirect's connection is
// checked again.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Policy is an egress policy. The nil *Policy is the default policy: special-purpose ranges
// refused, everything else allowed. A Policy is immutable and safe for concurrent use.
type Policy struct {
	allow, deny []rule
}

// rule is one allow or deny entry: a prefix, a host name ("api.example.com"), or the subdomains
// of a name ("*.example.com", which does not match example.com itself).
type rule struct {
	text   string
	prefix netip.Prefix
	host   string // lowercase, without a leading "*." or "."
	subs   bool   // host's subdomains match too
}

// New returns a policy with the given allow and deny rules, each a CIDR prefix ("10.0.0.0/8"), an
// IP address, a host name or "*.domain"; empty entries are ignored. Host rules match the name a
// URL gives, before it is resolved; prefixes match the address connected to.
func New(allow, deny []string) (*Policy, error) {
	p := &Policy{}
	var err error
	if p.allow, err = parseRules(allow); err != nil {
		return nil, fmt.Errorf("egress allow: %w", err)
	}
	if p.deny, err = parseRules(deny); err != nil {
		return nil, fmt.Errorf("egress deny: %w", err)
	}
	return p, nil
}

func parseRules(entries []string) ([]rule, error) {
	var out []rule
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		r := rule{text: e}
		if pf, err := netip.ParsePrefix(e); err == nil {
			r.prefix = pf.Masked()
		} else if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			r.prefix = netip.PrefixFrom(a, a.BitLen())
		} else {
			h := strings.ToLower(strings.TrimSuffix(e, "."))
			if rest, ok := strings.CutPrefix(h, "*."); ok {
				h, r.subs = rest, true
			}
			if !validHost(h) {
				return nil, fmt.Errorf("%q is not a CIDR prefix, an IP address or a host name", e)
			}
			r.host = h
		}
		out = append(out, r)
	}
	return out, nil
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (r rule) matches(host string, a netip.Addr) bool {
	if r.host == "" {
		return a.IsValid() && r.prefix.Contains(a)
	}
	if r.subs {
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

// special is a range refused unless allowed.
type special struct {
	prefix netip.Prefix
	what   string
}

var specials = func() []special {
	var out []special
	for _, s := range []struct{ cidr, what string }{
		{"0.0.0.0/8", "unspecified address"},
		{"10.0.0.0/8", "private address"},
		{"100.64.0.0/10", "shared (carrier-grade NAT) address"},
		{"127.0.0.0/8", "loopback address"},
		{"169.254.0.0/16", "link-local address, where cloud metadata services live"},
		{"172.16.0.0/12", "private address"},
		{"192.0.0.0/24", "IETF protocol address (NAT64 and DS-Lite gateways)"},
		{"192.168.0.0/16", "private address"},
		{"198.18.0.0/15", "benchmarking address, used for internal networks"},
		{"224.0.0.0/4", "multicast address"},
		{"240.0.0.0/4", "reserved address"},
		// ::/128 and ::1/128 come before ::/96, which holds them, for their own reasons.
		{"::/128", "unspecified address"},
		{"::1/128", "loopback address"},
		{"::/96", "IPv4-compatible address (deprecated; a tunnel may take it to any IPv4 address)"},
		{"::ffff:0:0:0/96", "IPv4-translated address"},
		{"64:ff9b:1::/48", "local-use NAT64 address (its gateway may reach private IPv4 addresses)"},
		{"100::/64", "discard-only address"},
		{"2001::/32", "Teredo address (a tunnel to an IPv4 address)"},
		{"fc00::/7", "private (unique local) address"},
		{"fe80::/10", "link-local address"},
		{"fec0::/10", "site-local address (deprecated private)"},
		{"ff00::/8", "multicast address"},
	} {
		out = append(out, special{netip.MustParsePrefix(s.cidr), s.what})
	}
	return out
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// embedded returns the IPv4 address a NAT64 (RFC 6052's well-known prefix) or 6to4 (RFC 3056)
// address carries, and which kind it is: the gateway that takes the connection on delivers it
// to that IPv4 address.
func embedded(a netip.Addr) (netip.Addr, string, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64 address", true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4 address", true
	}
	return a, "", false
}

// RefusedError is the error of a connection the policy refused. It is permanent: retrying cannot
// help until the policy changes.
type RefusedError struct {
	// Addr is the address refused; Host the name the URL gave, when it was not an address.
	Addr netip.AddrPort
	Host string
	// Reason says why, and how to allow it where it can be.
	Reason string
}

func (e *RefusedError) Error() string {
	target := e.Addr.String()
	if !e.Addr.IsValid() {
		target = e.Host
	} else if e.Host != "" && e.Host != e.Addr.Addr().String() {
		target = e.Host + " (" + e.Addr.String() + ")"
	}
	return "egress to " + target + " refused by policy (" + e.Reason + ")"
}

// Check reports whether a connection to addr, for a URL naming host, is allowed: nil, or a
// *[RefusedError]. host may be empty or the address itself.
func (p *Policy) Check(host string, addr netip.AddrPort) error {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	a := addr.Addr().Unmap()
	addr = netip.AddrPortFrom(a, addr.Port())
	// An address carrying an IPv4 address is checked as that address: rules and ranges alike.
	via := ""
	if v4, what, ok := embedded(a); ok {
		a, via = v4, " ("+v4.String()+" in a "+what+")"
	}
	if p != nil {
		for _, r := range p.deny {
			if r.matches(host, a) {
				return &RefusedError{Addr: addr, Host: host, Reason: "denied by --egress-deny " + r.text + via}
			}
		}
		for _, r := range p.allow {
			if r.matches(host, a) {
				return nil
			}
		}
	}
	for _, s := range specials {
		if s.prefix.Contains(a) {
			return &RefusedError{Addr: addr, Host: host,
				Reason: s.what + via + "; allow it with --egress-allow " + s.prefix.String()}
		}
	}
	return nil
}

// checkHost refuses, before any lookup, a name a deny rule names.
func (p *Policy) checkHost(host string) error {
	if p == nil {
		return nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range p.deny {
		if r.host != "" && r.matches(h, netip.Addr{}) {
			return &RefusedError{Host: h, Reason: "denied by --egress-deny " + r.text}
		}
	}
	return nil
}

// DialContext returns a dial function, for [http.Transport.DialContext], that connects with d
// (a zero Dialer when nil) and refuses what the policy refuses: a host a deny rule names before
// it is looked up, and every address it resolves to when the socket is about to connect.
func (p *Policy) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if err := p.checkHost(host); err != nil {
			return nil, err
		}
		dd := *d
		prev := d.Control
		dd.ControlContext = nil
		dd.Control = func(network, address string, c syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: unexpected address %q: %w", address, err)
			}
			if err := p.Check(host, ap); err != nil {
				return err
			}
			if prev != nil {
				return prev(network, address, c)
			}
			return nil
		}
		return dd.DialContext(ctx, network, addr)
	}
}

// Transport returns an HTTP transport whose connections the policy checks. It uses no proxy: a
// proxy would make the dial go to the proxy, and the policy could no longer see where requests go.
func (p *Policy) Transport() *http.Transport {
	return &http.Transport{
		DialContext:           p.DialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Client returns an HTTP client on [Policy.Transport]. Redirects are followed as by
// [http.Client] (at most 10), each new connection checked again.
func (p *Policy) Client() *http.Client { return &http.Client{Transport: p.Transport()} }

// IsRefused reports whether err comes from a connection the policy refused.
func IsRefused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re)
}
