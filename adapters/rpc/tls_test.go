package rpc_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/adapters/rpc/rpctest"
)

// mustServeTLS serves fake's core over TLS with the server certificate of pki, requiring client
// certificates from pki's CA when mutual is set.
func mustServeTLS(tb testing.TB, fake *fakeCore, pki *rpctest.PKI, mutual bool) *httptest.Server {
	tb.Helper()
	files := pki.Server(tb)
	serverFiles := rpc.TLSFiles{Cert: files.Cert, Key: files.Key}
	if mutual {
		serverFiles.CA = files.CA
	}
	cfg, err := rpc.ServerTLS(serverFiles)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rpc.NewHandler(fake.core(), rpc.ServerConfig{
		Credentials: []string{tierCredentials[rpc.TierEdge]},
		Logger:      slog.New(slog.DiscardHandler),
	}))
	srv.TLS = cfg
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return srv
}

// tlsClient is the edge's client of srv with the TLS files given (nil: no TLS configuration of its own).
func tlsClient(tb testing.TB, url string, files *rpc.TLSFiles) *rpc.Client {
	tb.Helper()
	var cfg *tls.Config
	if files != nil {
		var err error
		if cfg, err = rpc.ClientTLS(*files); err != nil {
			tb.Fatal(err)
		}
	}
	return rpc.NewClient(url, tierCredentials[rpc.TierEdge], rpc.NewHTTPClient(cfg))
}

// TestMutualTLS: over mutual TLS only a client with a certificate from the core's CA gets through; one
// without a certificate, with a certificate of another CA, or not verifying the core against its CA is
// refused in the handshake, before any credential is sent, and a plaintext client is refused too.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	pki, rogue := rpctest.MustPKI(t, "postmill"), rpctest.MustPKI(t, "rogue")
	fake := &fakeCore{}
	srv := mustServeTLS(t, fake, pki, true)
	edge, foreign := pki.Client(t, "edge"), rogue.Client(t, "edge")
	ctx := context.Background()

	if err := tlsClient(t, srv.URL, &rpc.TLSFiles{Cert: edge.Cert, Key: edge.Key, CA: edge.CA}).Ping(ctx); err != nil {
		t.Fatalf("client with a certificate of the CA: %v", err)
	}
	// With TLS 1.3 a client learns of the core's refusal (certificate required, unknown certificate
	// authority) only when it reads, so it may see a broken pipe instead: the cause is logged, and what is
	// asserted is the refusal and that the implementation never ran.
	for _, c := range []struct {
		name  string
		files rpc.TLSFiles
		force bool // present the certificate even though it does not chain to the CAs the core asks for
	}{
		{"no client certificate", rpc.TLSFiles{CA: pki.CAFile}, false},
		{"client certificate of another CA", rpc.TLSFiles{Cert: foreign.Cert, Key: foreign.Key, CA: pki.CAFile}, true},
		{"core not verified against the CA", rpc.TLSFiles{Cert: edge.Cert, Key: edge.Key}, false},
		{"core verified against another CA", rpc.TLSFiles{Cert: edge.Cert, Key: edge.Key, CA: rogue.CAFile}, false},
	} {
		cfg, err := rpc.ClientTLS(c.files)
		if err != nil {
			t.Fatal(err)
		}
		if c.force {
			cert := cfg.Certificates[0]
			cfg.Certificates = nil
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		}
		err = rpc.NewClient(srv.URL, tierCredentials[rpc.TierEdge], rpc.NewHTTPClient(cfg)).Ping(ctx)
		if err == nil {
			t.Errorf("%s: admitted", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	plain := "http://" + strings.TrimPrefix(srv.URL, "https://")
	if err := rpc.NewClient(plain, tierCredentials[rpc.TierEdge], nil).Ping(ctx); err == nil {
		t.Error("plaintext client admitted")
	}
	if n := len(fake.recorded()); n != 1 {
		t.Errorf("the implementation ran %d times, want once (the good client's Ping)", n)
	}
}

// TestServerTLSWithoutClientCertificates: without a CA the core asks for no client certificate, still
// refuses plaintext, and HTTP/2 is what the hop speaks.
func TestServerTLSWithoutClientCertificates(t *testing.T) {
	t.Parallel()
	pki := rpctest.MustPKI(t, "postmill")
	fake := &fakeCore{}
	srv := mustServeTLS(t, fake, pki, false)
	if err := tlsClient(t, srv.URL, &rpc.TLSFiles{CA: pki.CAFile}).Ping(context.Background()); err != nil {
		t.Fatalf("TLS client without a certificate: %v", err)
	}
	// A plaintext request to the TLS port is answered 400 by the TLS server, never by the handler.
	res, err := http.Post("http://"+strings.TrimPrefix(srv.URL, "https://")+"/postmill.health.v1.HealthService/Check",
		"application/json", strings.NewReader("{}"))
	if err == nil {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
			t.Errorf("plaintext request: %d %s", res.StatusCode, body)
		}
	}
	if n := len(fake.recorded()); n != 1 {
		t.Errorf("the implementation ran %d times, want once", n)
	}

	cfg, err := rpc.ClientTLS(rpc.TLSFiles{CA: pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	hc := rpc.NewHTTPClient(cfg)
	res, err = hc.Post(srv.URL+"/postmill.health.v1.HealthService/Check", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Errorf("the hop speaks %s, want HTTP/2", res.Proto)
	}
}

// TestTLSFilesRefused: settings that cannot work fail when the configuration is built, not at the first
// call.
func TestTLSFilesRefused(t *testing.T) {
	t.Parallel()
	pki := rpctest.MustPKI(t, "postmill")
	server := pki.Server(t)
	if _, err := rpc.ServerTLS(rpc.TLSFiles{CA: pki.CAFile}); err == nil {
		t.Error("server without a certificate accepted")
	}
	if _, err := rpc.ServerTLS(rpc.TLSFiles{Cert: server.Cert, Key: server.Key, CA: server.Key}); err == nil {
		t.Error("a CA bundle without a certificate accepted")
	}
	if _, err := rpc.ClientTLS(rpc.TLSFiles{Cert: server.Cert}); err == nil {
		t.Error("client certificate without its key accepted")
	}
	if _, err := rpc.ClientTLS(rpc.TLSFiles{CA: "/nonexistent/ca.pem"}); err == nil {
		t.Error("missing CA file accepted")
	}
	if _, err := rpc.ServerTLS(rpc.TLSFiles{Cert: server.Cert, Key: pki.CAFile}); err == nil {
		t.Error("a certificate with the wrong key file accepted")
	}
}
