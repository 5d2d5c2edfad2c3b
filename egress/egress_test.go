package egress_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skep-cd/skep/egress"
)

func TestCheckRefusesInternalAddressesUnlessAllowed(t *testing.T) {
	def, err := egress.Parse(egress.DefaultAllow)
	if err != nil {
		t.Fatal(err)
	}
	none := egress.Policy{}
	one, err := egress.Parse("10.1.2.3, 192.168.5.0/24")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		policy egress.Policy
		addr   string
		refuse bool
	}{
		{"a public address always passes", none, "93.184.216.34", false},
		{"a public IPv6 address always passes", none, "2606:4700::1111", false},
		{"loopback is refused by the zero policy", none, "127.0.0.1", true},
		{"IPv6 loopback is refused by the zero policy", none, "::1", true},
		{"loopback mapped into IPv6 is loopback", none, "::ffff:127.0.0.1", true},
		{"a private address is refused by the zero policy", none, "10.0.0.5", true},
		{"the unspecified address is refused", none, "0.0.0.0", true},
		{"multicast is refused", def, "224.0.0.1", true},
		{"the default allows loopback", def, "127.0.0.1", false},
		{"the default allows private networks", def, "172.20.0.4", false},
		{"the default allows IPv6 unique local", def, "fd12::1", false},
		{"the default refuses the cloud metadata endpoint", def, "169.254.169.254", true},
		{"the default refuses IPv6 link-local", def, "fe80::1", true},
		{"an allowed host passes", one, "10.1.2.3", false},
		{"its neighbour does not", one, "10.1.2.4", true},
		{"an allowed prefix passes its members", one, "192.168.5.200", false},
		{"loopback is refused when only other prefixes are allowed", one, "127.0.0.1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(netip.MustParseAddr(tc.addr))
			if got := errors.Is(err, egress.ErrRefused); got != tc.refuse || (err != nil) != tc.refuse {
				t.Errorf("Check(%s) under %q = %v, want refused %v", tc.addr, tc.policy, err, tc.refuse)
			}
			if err != nil && !strings.Contains(err.Error(), "--allow-private-hosts") {
				t.Errorf("refusal %q does not say how to allow the address", err)
			}
		})
	}
}

func TestParseNamesEveryBadEntry(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", ""},
		{" 10.0.0.0/8 , ::1 ", "10.0.0.0/8,::1/128"},
		{"10.0.0.1/8", "10.0.0.0/8"},
		{"10.0.0.0/33,nope,127.0.0.1", `entry 1 "10.0.0.0/33": want a CIDR prefix such as 10.0.0.0/8 or an address` + "\n" + `entry 2 "nope": want a CIDR prefix`},
	} {
		p, err := egress.Parse(tc.in)
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), tc.want):
			t.Errorf("Parse(%q) = %v, want an error starting %q", tc.in, err, tc.want)
		case err == nil && p.String() != tc.want:
			t.Errorf("Parse(%q) = %q, want %q", tc.in, p, tc.want)
		}
	}
}

// The transport refuses at connect time: the server on loopback never
// sees the request a policy refuses, and sees the one it allows.
func TestTransportRefusesWhatThePolicyRefusesBeforeConnecting(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		allow  string
		refuse bool
	}{
		{"no internal address allowed", "", true},
		{"another private network allowed", "10.0.0.0/8", true},
		{"loopback allowed", "127.0.0.0/8", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := egress.Parse(tc.allow)
			if err != nil {
				t.Fatal(err)
			}
			before := served.Load()
			client := &http.Client{Transport: p.Transport()}
			// The server's URL names 127.0.0.1; "localhost" would be
			// resolved first and refused the same way.
			resp, err := client.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			if errors.Is(err, egress.ErrRefused) != tc.refuse {
				t.Errorf("GET %s allowing %q = %v, want refused %v", srv.URL, tc.allow, err, tc.refuse)
			}
			if got := served.Load() - before; (got == 0) != tc.refuse {
				t.Errorf("the server saw %d requests, want them only when allowed", got)
			}
		})
	}
}

func TestCheckHostResolvesNamesAndLiterals(t *testing.T) {
	none := egress.Policy{}
	for _, host := range []string{"localhost", "127.0.0.1", "[::1]", "169.254.169.254"} {
		if err := none.CheckHost(t.Context(), host); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("CheckHost(%s) = %v, want refused", host, err)
		}
	}
	loop, _ := egress.Parse("127.0.0.0/8,::1")
	if err := loop.CheckHost(t.Context(), "localhost"); err != nil {
		t.Errorf("CheckHost(localhost) allowing loopback = %v", err)
	}
	// The client's own dial reports a name that does not resolve.
	if err := none.CheckHost(t.Context(), "name.invalid"); err != nil {
		t.Errorf("CheckHost of a name that does not resolve = %v, want nil", err)
	}
}
