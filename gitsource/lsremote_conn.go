package gitsource

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// The ls-remotes of quiet ticks keep connections of their own. net/http's
// Transport runs two goroutines per connection and hands every request to
// one and every response back from the other; on a small machine each
// hand-off wakes a thread, and together they were a quarter of a quiet
// tick's CPU. A request here is written and its answer read by the
// goroutine that asks, with net/http's own Request.Write and
// ReadResponse, on a kept HTTP/1.1 connection. Through a proxy,
// lsRemoteClient (net/http) makes the request instead.

// idleConnTimeout is how long a kept connection may wait for its next
// ls-remote, as http.DefaultTransport's IdleConnTimeout.
const idleConnTimeout = 90 * time.Second

// lsRemoteConns keeps the connections of every Cache in the process, as
// gitPool does for go-git's requests.
var lsRemoteConns = &connPool{idle: map[string][]*keptConn{}}

// dialer dials git hosts as http.DefaultTransport does.
var dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// connPool keeps idle connections by scheme and address, at most
// maxIdlePerHost of each, each closed after idleConnTimeout unused.
type connPool struct {
	mu   sync.Mutex
	idle map[string][]*keptConn
}

// keptConn is one connection with its buffers.
type keptConn struct {
	net.Conn
	key  string
	br   *bufio.Reader
	bw   *bufio.Writer
	idle *time.Timer // closes it when unused for idleConnTimeout; nil while in use
}

// do sends req, a GET without a body, and returns the answer, whose body
// the caller must close. It follows no redirect. A kept connection that
// fails is closed and the request sent again (a GET may be), on the
// next kept one or a new one; an error on a new connection is returned.
func (p *connPool) do(req *http.Request) (*http.Response, error) {
	if proxy, err := gitPool.Proxy(req); err != nil || proxy != nil {
		return lsRemoteClient.Do(req)
	}
	ctx := req.Context()
	key := req.URL.Scheme + "://" + hostPort(req.URL)
	for {
		kc := p.get(key)
		kept := kc != nil
		if !kept {
			var err error
			if kc, err = dial(ctx, req.URL, key); err != nil {
				return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: err}
			}
		}
		res, err := p.send(kc, req)
		if err == nil {
			return res, nil
		}
		_ = kc.Close()
		if ctx.Err() != nil {
			return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: ctx.Err()}
		}
		if !kept {
			return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: err}
		}
	}
}

// send writes req on kc and reads the answer's header. The request's
// context bounds the whole exchange, the answer's body included.
func (p *connPool) send(kc *keptConn, req *http.Request) (*http.Response, error) {
	// The context's end, by its deadline or the caller giving up, ends
	// the exchange: ctx.Err() is set by then, which is how Cache.timedOut
	// tells a remote that did not answer in time.
	stop := context.AfterFunc(req.Context(), func() { _ = kc.SetDeadline(time.Unix(1, 0)) })
	if err := req.Write(kc.bw); err != nil {
		stop()
		return nil, err
	}
	if err := kc.bw.Flush(); err != nil {
		stop()
		return nil, err
	}
	res, err := http.ReadResponse(kc.br, req)
	if err != nil {
		stop()
		return nil, err
	}
	res.Body = &keptBody{body: res.Body, ctx: req.Context(), kc: kc, pool: p, stop: stop, reuse: !res.Close}
	return res, nil
}

// keptBody is an answer's body; closed after it was read to its end, it
// gives its connection back to the pool.
type keptBody struct {
	body  io.ReadCloser
	ctx   context.Context
	kc    *keptConn
	pool  *connPool
	stop  func() bool
	reuse bool // the server keeps the connection open
	eof   bool
	done  bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	} else if err != nil && b.ctx.Err() != nil {
		err = b.ctx.Err() // not the deadline that ended the read
	}
	return n, err
}

func (b *keptBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// Only a body read to its end leaves the connection at the start of
	// the next answer; a context that ended has set a deadline on it.
	if b.stop() && b.eof && b.reuse && b.kc.SetDeadline(time.Time{}) == nil {
		b.pool.put(b.kc)
		return nil
	}
	return b.kc.Close()
}

// get takes the most recently kept connection for key, or nil.
func (p *connPool) get(key string) *keptConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for conns := p.idle[key]; len(conns) > 0; conns = p.idle[key] {
		kc := conns[len(conns)-1]
		p.idle[key] = conns[:len(conns)-1]
		// A timer that already fired is closing kc.
		if kc.idle.Stop() {
			kc.idle = nil
			return kc
		}
	}
	return nil
}

// put keeps kc for the next request to its key, or closes it when as
// many are kept already.
func (p *connPool) put(kc *keptConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[kc.key]) >= maxIdlePerHost {
		_ = kc.Close()
		return
	}
	kc.idle = time.AfterFunc(idleConnTimeout, func() { p.expire(kc) })
	p.idle[kc.key] = append(p.idle[kc.key], kc)
}

// expire closes kc, unused for idleConnTimeout, and forgets it.
func (p *connPool) expire(kc *keptConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := p.idle[kc.key]
	for i, c := range conns {
		if c == kc {
			p.idle[kc.key] = append(conns[:i:i], conns[i+1:]...)
			break
		}
	}
	if len(p.idle[kc.key]) == 0 {
		delete(p.idle, kc.key)
	}
	_ = kc.Close()
}

// dial connects to u's host, over TLS for https with gitPool's settings
// (the system's roots unless set), speaking HTTP/1.1.
func dial(ctx context.Context, u *url.URL, key string) (*keptConn, error) {
	conn, err := dialer.DialContext(ctx, "tcp", hostPort(u))
	if err != nil {
		return nil, err
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if gitPool.TLSClientConfig != nil {
			cfg = gitPool.TLSClientConfig.Clone()
		}
		cfg.ServerName, cfg.NextProtos = u.Hostname(), []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
			_ = conn.Close()
			return nil, fmt.Errorf("the server chose %q over http/1.1", p)
		}
		conn = tc
	}
	return &keptConn{Conn: conn, key: key, br: bufio.NewReader(conn), bw: bufio.NewWriter(conn)}, nil
}

// hostPort is u's host with its port, the scheme's default when u has
// none.
func hostPort(u *url.URL) string {
	if port := u.Port(); port != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), defaultPorts[u.Scheme])
}
