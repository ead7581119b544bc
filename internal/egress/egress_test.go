package egress_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/egress"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	must := func(allow, deny []string) *egress.Policy {
		p, err := egress.New(allow, deny)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	custom := must([]string{"10.1.0.0/16", "127.0.0.1", "intranet.example", "*.corp.example"}, []string{"10.1.2.0/24", "bad.example.com", "*.evil.example"})
	for _, tt := range []struct {
		name   string
		p      *egress.Policy
		host   string
		addr   string
		reason string // "" means allowed
	}{
		{"default loopback", nil, "", "127.0.0.1:8080", "loopback address; allow it with --egress-allow 127.0.0.0/8"},
		{"default private", nil, "", "10.2.3.4:80", "private address; allow it with --egress-allow 10.0.0.0/8"},
		{"default 192.168", nil, "", "192.168.1.1:80", "private address; allow it with --egress-allow 192.168.0.0/16"},
		{"default metadata", nil, "", "169.254.169.254:80", "link-local address, where cloud metadata services live; allow it with --egress-allow 169.254.0.0/16"},
		{"default IPv6 loopback", nil, "", "[::1]:80", "loopback address; allow it with --egress-allow ::1/128"},
		{"default IPv4-mapped loopback", nil, "", "[::ffff:127.0.0.1]:80", "loopback address; allow it with --egress-allow 127.0.0.0/8"},
		{"default unique local", nil, "", "[fd00::1]:80", "private (unique local) address; allow it with --egress-allow fc00::/7"},
		{"default unspecified", nil, "", "0.0.0.0:80", "unspecified address; allow it with --egress-allow 0.0.0.0/8"},
		{"default public", nil, "example.com", "93.184.216.34:443", ""},
		{"default public IPv6", nil, "", "[2606:2800:220:1::1]:443", ""},
		{"allowed CIDR", custom, "", "10.1.9.9:80", ""},
		{"allowed address", custom, "", "127.0.0.1:80", ""},
		{"allowed address only", custom, "", "127.0.0.2:80", "loopback address; allow it with --egress-allow 127.0.0.0/8"},
		{"deny wins over allow", custom, "", "10.1.2.3:80", "denied by --egress-deny 10.1.2.0/24"},
		{"allowed host", custom, "intranet.example", "10.9.9.9:80", ""},
		{"allowed subdomain", custom, "a.b.corp.example", "192.168.0.1:80", ""},
		{"wildcard is not the domain", custom, "corp.example", "192.168.0.1:80", "private address; allow it with --egress-allow 192.168.0.0/16"},
		{"denied host", custom, "bad.example.com", "93.184.216.34:80", "denied by --egress-deny bad.example.com"},
		{"denied subdomain", custom, "x.evil.example", "93.184.216.34:80", "denied by --egress-deny *.evil.example"},
		{"public with custom", custom, "", "93.184.216.34:80", ""},
		// IPv6 addresses that carry an IPv4 address to a gateway.
		{"NAT64 loopback", nil, "", "[64:ff9b::127.0.0.1]:80", "loopback address (127.0.0.1 in a NAT64 address); allow it with --egress-allow 127.0.0.0/8"},
		{"NAT64 metadata", nil, "", "[64:ff9b::a9fe:a9fe]:80", "link-local address, where cloud metadata services live (169.254.169.254 in a NAT64 address); allow it with --egress-allow 169.254.0.0/16"},
		{"NAT64 public", nil, "", "[64:ff9b::93.184.216.34]:443", ""},
		{"NAT64 allowed as its IPv4 address", custom, "", "[64:ff9b::10.1.9.9]:80", ""},
		{"NAT64 denied as its IPv4 address", custom, "", "[64:ff9b::10.1.2.3]:80", "denied by --egress-deny 10.1.2.0/24 (10.1.2.3 in a NAT64 address)"},
		{"6to4 private", nil, "", "[2002:c0a8:101::1]:80", "private address (192.168.1.1 in a 6to4 address); allow it with --egress-allow 192.168.0.0/16"},
		{"6to4 public", nil, "", "[2002:5db8:d822::1]:80", ""},
		{"IPv4-compatible", nil, "", "[::127.0.0.1]:80", "IPv4-compatible address (deprecated; a tunnel may take it to any IPv4 address); allow it with --egress-allow ::/96"},
		{"IPv4-compatible public", nil, "", "[::93.184.216.34]:80", "IPv4-compatible address (deprecated; a tunnel may take it to any IPv4 address); allow it with --egress-allow ::/96"},
		{"IPv6 unspecified before IPv4-compatible", nil, "", "[::]:80", "unspecified address; allow it with --egress-allow ::/128"},
		{"local-use NAT64", nil, "", "[64:ff9b:1::a00:1]:80", "local-use NAT64 address (its gateway may reach private IPv4 addresses); allow it with --egress-allow 64:ff9b:1::/48"},
		{"Teredo", nil, "", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:80", "Teredo address (a tunnel to an IPv4 address); allow it with --egress-allow 2001::/32"},
		{"site-local", nil, "", "[fec0::1]:80", "site-local address (deprecated private); allow it with --egress-allow fec0::/10"},
		{"benchmarking", nil, "", "198.18.0.1:80", "benchmarking address, used for internal networks; allow it with --egress-allow 198.18.0.0/15"},
		{"IETF protocol assignments", nil, "", "192.0.0.170:80", "IETF protocol address (NAT64 and DS-Lite gateways); allow it with --egress-allow 192.0.0.0/24"},
		{"not Teredo", nil, "", "[2001:4860:4860::8888]:443", ""},
	} {
		err := tt.p.Check(tt.host, netip.MustParseAddrPort(tt.addr))
		var re *egress.RefusedError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tt.name, err)
		case tt.reason != "" && (!errors.As(err, &re) || re.Reason != tt.reason):
			t.Errorf("%s: %v, want refused: %s", tt.name, err, tt.reason)
		}
	}
	err := (*egress.Policy)(nil).Check("", netip.MustParseAddrPort("127.0.0.1:8080"))
	if want := "egress to 127.0.0.1:8080 refused by policy (loopback address; allow it with --egress-allow 127.0.0.0/8)"; err == nil || err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	for _, bad := range []string{"10.0.0.0/33", "exa mple.com", "http://x"} {
		if _, err := egress.New([]string{bad}, nil); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

// TestClient checks the policy where it is enforced, at connection time: a server on loopback
// is refused by the default policy, also by a name that resolves there (localhost), and served
// when allowed; a redirect to a refused address is refused; a denied host is never looked up.
func TestClient(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	get := func(p *egress.Policy, url string) error {
		resp, err := p.Client().Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		return err
	}
	for _, url := range []string{srv.URL, "http://localhost:" + port} {
		err := get(nil, url)
		if !egress.IsRefused(err) || !strings.Contains(err.Error(), "refused by policy (loopback address; allow it with --egress-allow 127.0.0.0/8)") {
			t.Errorf("default policy, %s: %v", url, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("a refused request reached the server %d times", hits.Load())
	}
	loopback, err := egress.New([]string{"127.0.0.0/8", "::1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(loopback, srv.URL); err != nil {
		t.Errorf("allowed loopback: %v", err)
	}
	if err := get(loopback, srv.URL+"/redirect"); !egress.IsRefused(err) || !strings.Contains(err.Error(), "169.254.169.254:80") {
		t.Errorf("redirect to the metadata address: %v", err)
	}
	denied, err := egress.New([]string{"127.0.0.0/8"}, []string{"*.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	if err := get(denied, "http://metadata.invalid/"); !egress.IsRefused(err) || !strings.Contains(err.Error(), "denied by --egress-deny *.invalid") {
		t.Errorf("denied host: %v", err)
	}
}
