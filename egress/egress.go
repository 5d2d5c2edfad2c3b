// Package egress decides which network addresses the controller may
// connect to on behalf of what git names: repository URLs, image
// registries and chart repositories. Whoever can commit to the app set or
// an artifact file chooses those hosts; without a guard, a commit could
// point the controller at a cloud metadata endpoint or a service only the
// swarm's network reaches. Any host it reaches may redirect, so every
// outbound HTTP client of the controller (git, chart repositories,
// registries, webhook and forge notifiers) is built on Dialer or
// Transport, which judge each hop where it connects.
//
// An address is internal when it is loopback, private (RFC 1918, IPv6
// unique local), link-local, unspecified or multicast. A Policy refuses an
// internal address unless one of its allowed prefixes holds it; public
// addresses always pass. The check is made on the address actually dialled
// (Dialer, Transport), so a name that resolves to a public address when
// checked and an internal one when dialled gains nothing; CheckHost, for
// clients that cannot take a dialer, resolves ahead and is the weaker
// check. A proxy is dialled in place of the host behind it, and it is the
// proxy's address that is checked.
//
// This package imports nothing of Skep.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of an address.
var ErrRefused = errors.New("address refused")

// DefaultAllow is the controller's default --allow-private-hosts:
// loopback and private networks, where self-hosted forges and registries
// live. Link-local (cloud metadata endpoints among them), unspecified and
// multicast addresses stay refused.
const DefaultAllow = "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"

// Policy says which internal addresses may be dialled. The zero value
// allows none; a Policy is immutable and safe for concurrent use.
type Policy struct {
	allow []netip.Prefix
}

// Parse reads a comma-separated list of CIDR prefixes (a bare address is
// one host) into a Policy; "" allows no internal address. Every bad entry
// is reported, each by its position.
func Parse(list string) (Policy, error) {
	var p Policy
	var errs []error
	for i, field := range strings.Split(list, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(field)
		if err != nil {
			addr, aerr := netip.ParseAddr(field)
			if aerr != nil {
				errs = append(errs, fmt.Errorf("entry %d %q: want a CIDR prefix such as 10.0.0.0/8 or an address", i+1, field))
				continue
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		p.allow = append(p.allow, prefix.Masked())
	}
	if err := errors.Join(errs...); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// String lists the allowed prefixes as Parse reads them.
func (p Policy) String() string {
	parts := make([]string, 0, len(p.allow))
	for _, a := range p.allow {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, ",")
}

// Internal reports whether addr is loopback, private, link-local,
// unspecified or multicast. An IPv4 address mapped into IPv6 is judged as
// the IPv4 address it carries.
func Internal(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() || !addr.IsValid()
}

// Check returns nil when addr may be dialled: it is not internal, or an
// allowed prefix holds it. A refusal wraps ErrRefused and names the
// address and what to change.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if !Internal(addr) || slices.ContainsFunc(p.allow, func(a netip.Prefix) bool { return a.Contains(addr) }) {
		return nil
	}
	return fmt.Errorf("%w: %s is an internal address; allow it with --allow-private-hosts", ErrRefused, addr)
}

// control is a net.Dialer's Control: it sees the address a connection is
// about to be made to, after name resolution, and refuses it by policy.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read dialled address %q: %w", ErrRefused, address, err)
	}
	return p.Check(ap.Addr())
}

// Dialer returns a net.Dialer that refuses, at connect time, every address
// p refuses.
func (p Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
}

// Transport returns an HTTP transport like http.DefaultTransport (proxy
// from the environment, HTTP/2, the same timeouts) whose connections are
// made through Dialer. The caller owns it.
func (p Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = p.Dialer().DialContext
	return t
}

// CheckHost resolves host (a name or an address literal, without a port)
// and returns an error wrapping ErrRefused if p refuses any address it
// resolves to. A name that does not resolve is not refused here: the
// client's own dial fails and says so. CheckHost is for clients whose
// connections cannot go through Dialer; a name that resolves differently
// by the time it is dialled escapes it.
func (p Policy) CheckHost(ctx context.Context, host string) error {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if addr, err := netip.ParseAddr(host); err == nil {
		return p.checkNamed(host, addr)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, addr := range addrs {
		if err := p.checkNamed(host, addr); err != nil {
			return err
		}
	}
	return nil
}

// checkNamed is Check, naming host when it is not the address itself.
func (p Policy) checkNamed(host string, addr netip.Addr) error {
	err := p.Check(addr)
	if err != nil && host != addr.String() {
		return fmt.Errorf("host %s: %w", host, err)
	}
	return err
}
