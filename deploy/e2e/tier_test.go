package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/adapters/rpc"
	"github.com/postmill/postmill/adapters/rpc/rpctest"
	"github.com/postmill/postmill/deploy/app"
	"github.com/postmill/postmill/ports"
)

// The hop between tiers over mutual TLS, with a credential per tier: a core, and an edge and an MTA
// that hold only their tier's credential and client certificate, never the master secret.

// unknownMessageID names no message: a call that passes the core's allow-list and finds nothing.
const unknownMessageID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// mailRecords serves the recipients' MX at rcpt.example from mx, as MustMailWorld does.
func mailRecords(t *testing.T) (*dnstest.Server, *sink) {
	t.Helper()
	dns := dnstest.New(t)
	mx := MustSink(t, "127.0.0.1", "0")
	dns.SetMX("rcpt.example", ports.MX{Host: "mx.rcpt.example", Preference: 10})
	dns.SetA("mx.rcpt.example", netip.MustParseAddr("127.0.0.1"))
	return dns, mx
}

// tierClient is a Connect client of the core at url presenting credential, over TLS with files (no
// client certificate when Cert is empty). With force it presents the certificate even when it does not
// chain to a CA the core asks for, as an attacker would.
func tierClient(t *testing.T, url, credential string, files rpctest.Files, force bool) *rpc.Client {
	t.Helper()
	cfg, err := rpc.ClientTLS(rpc.TLSFiles{Cert: files.Cert, Key: files.Key, CA: files.CA})
	if err != nil {
		t.Fatal(err)
	}
	if force {
		cert := cfg.Certificates[0]
		cfg.Certificates = nil
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return rpc.NewClient(url, credential, rpc.NewHTTPClient(cfg))
}

// sendOverTheSplit sends one message through w's edge and waits until the recipient's MX has it,
// DKIM-signed: the edge, the core and the MTA each took their part over the hop.
func sendOverTheSplit(t *testing.T, w *mailWorld, subject string) {
	t.Helper()
	w.owner = w.MustSignup("owner@"+senderDomain, "")
	w.mustVerifiedDomain(t, senderDomain)
	_, w.key = w.MustKey(w.owner, []string{"emails:send", "emails:read"})
	r := expect(t, w.send(t, map[string]any{
		"from": "Ada <ada@" + senderDomain + ">", "to": "rcpt1@rcpt.example", "subject": subject, "text": "over the hop",
	}, nil), 202)
	w.waitStatus(t, r.str("id"), "delivered", 30*time.Second)
	got := w.mx.waitFor(t, "Subject: "+subject, 5*time.Second)
	if !strings.Contains(string(got.data), "DKIM-Signature:") {
		t.Error("the delivered mail is not DKIM-signed")
	}
}

func TestTierCredentialsOverMutualTLS(t *testing.T) {
	t.Parallel()
	pki, rogue := rpctest.MustPKI(t, "postmill"), rpctest.MustPKI(t, "rogue")
	server, edgeCert, mtaCert, inboundCert := pki.Server(t), pki.Client(t, "edge"), pki.Client(t, "mta"), pki.Client(t, "inbound")
	dns, mx := mailRecords(t)
	dbURL := pgtest.URL(t)

	coreCfg := testConfig(t, dbURL)
	coreCfg.DNSResolver = dns.Addr()
	coreCfg.RPCTLSCert, coreCfg.RPCTLSKey, coreCfg.RPCTLSCA = server.Cert, server.Key, server.CA
	core := MustStart(t, coreCfg, "core")
	coreURL := core.app.RPCURL()
	if !strings.HasPrefix(coreURL, "https://") {
		t.Fatalf("the core's RPC URL is %q, want https", coreURL)
	}
	cred := map[string]string{}
	for _, tier := range []string{"edge", "mta", "inbound"} {
		c, err := app.TierCredential(coreCfg.SecretKeys, tier)
		if err != nil {
			t.Fatal(err)
		}
		cred[tier] = c
	}

	// The edge and the MTA run with their credential and certificate, and no secret key.
	edgeCfg := testConfig(t, "")
	edgeCfg.SecretKeys, edgeCfg.RPCCredentials, edgeCfg.CoreURL = nil, []string{cred["edge"]}, coreURL
	edgeCfg.RPCTLSCert, edgeCfg.RPCTLSKey, edgeCfg.RPCTLSCA = edgeCert.Cert, edgeCert.Key, edgeCert.CA
	edge := MustStart(t, edgeCfg, "edge")

	mtaCfg := testConfig(t, dbURL) // the PostgreSQL queue lives in the core's database
	mtaCfg.SecretKeys, mtaCfg.RPCCredentials, mtaCfg.CoreURL = nil, []string{cred["mta"]}, coreURL
	mtaCfg.RPCTLSCert, mtaCfg.RPCTLSKey, mtaCfg.RPCTLSCA = mtaCert.Cert, mtaCert.Key, mtaCert.CA
	mtaCfg.DNSResolver, mtaCfg.MTAPort, mtaCfg.MTARetryBase = dns.Addr(), atoiPort(t, mx.port()), 200*time.Millisecond
	MustStart(t, mtaCfg, "mta")

	expect(t, edge.get("/readyz", ""), 200)
	sendOverTheSplit(t, &mailWorld{env: edge, dns: dns, mx: mx}, "Over mutual TLS")

	ctx := context.Background()
	denied := func(name string, err error) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s: %v, want permission denied", name, err)
		}
	}
	admitted := func(name string, err error) {
		t.Helper()
		if connect.CodeOf(err) == connect.CodePermissionDenied || connect.CodeOf(err) == connect.CodeUnauthenticated ||
			connect.CodeOf(err) == connect.CodeUnavailable {
			t.Errorf("%s: %v, want the call to reach the core", name, err)
		}
	}

	// The edge's credential, with its valid certificate, cannot load a message with its DKIM key nor
	// report deliveries; it can do what the edge does.
	edgeCore := tierClient(t, coreURL, cred["edge"], edgeCert, false).Core()
	_, err := edgeCore.Delivery.LoadOutbound(ctx, ports.DeliveryJob{MessageID: unknownMessageID})
	denied("edge: Delivery.LoadOutbound", err)
	denied("edge: Delivery.ReportDelivery", edgeCore.Delivery.ReportDelivery(ctx, ports.DeliveryReport{Job: ports.DeliveryJob{MessageID: unknownMessageID}}))
	_, err = edgeCore.Feedback.AcceptsRecipient(ctx, "fbl@bounces.postmill.local")
	denied("edge: Feedback.AcceptsRecipient", err)
	orgs, err := edgeCore.Organizations.ListOrganizations(ctx)
	if err != nil || len(orgs) == 0 {
		t.Errorf("edge: Organizations.ListOrganizations: %d organizations, %v", len(orgs), err)
	}

	// The MTA's credential cannot reach accounts or organizations; it reaches the delivery service.
	mtaCore := tierClient(t, coreURL, cred["mta"], mtaCert, false).Core()
	_, err = mtaCore.Accounts.Login(ctx, ports.LoginInput{Email: "owner@" + senderDomain, Password: "correct horse battery"})
	denied("mta: Accounts.Login", err)
	_, err = mtaCore.Organizations.ListOrganizations(ctx)
	denied("mta: Organizations.ListOrganizations", err)
	_, err = mtaCore.Delivery.LoadOutbound(ctx, ports.DeliveryJob{MessageID: unknownMessageID})
	admitted("mta: Delivery.LoadOutbound", err)

	// The inbound credential asks about recipients and nothing else.
	inboundCore := tierClient(t, coreURL, cred["inbound"], inboundCert, false).Core()
	if ok, err := inboundCore.Feedback.AcceptsRecipient(ctx, "fbl@bounces.postmill.local"); err != nil || !ok {
		t.Errorf("inbound: Feedback.AcceptsRecipient = %v, %v", ok, err)
	}
	_, err = inboundCore.Emails.Send(ctx, "org", ports.SendRequest{})
	denied("inbound: Emails.Send", err)
	_, err = inboundCore.Delivery.LoadOutbound(ctx, ports.DeliveryJob{MessageID: unknownMessageID})
	denied("inbound: Delivery.LoadOutbound", err)

	// Without a valid client certificate nothing gets through, whatever the credential; nor does a
	// plaintext client, which the core's TLS listener answers with a bare 400.
	foreign := rogue.Client(t, "edge")
	foreign.CA = pki.CAFile // the client trusts the core; the core must not trust the client
	for name, c := range map[string]*rpc.Client{
		"no client certificate":            tierClient(t, coreURL, cred["edge"], rpctest.Files{CA: pki.CAFile}, false),
		"client certificate of another CA": tierClient(t, coreURL, cred["edge"], foreign, true),
		"plaintext":                        rpc.NewClient("http://"+strings.TrimPrefix(coreURL, "https://"), cred["edge"], nil),
	} {
		// Unauthenticated or permission denied would come from the handler: the refusal must come first.
		err := c.Ping(ctx)
		if code := connect.CodeOf(err); err == nil || code == connect.CodeUnauthenticated || code == connect.CodePermissionDenied {
			t.Errorf("%s: %v, want the connection refused before any handler", name, err)
		}
	}
}

// TestBinaryEdgeWithTierCredentialAndNoSecretKey: `postmill rpc-credential` prints the edge's credential
// where the secret lives; an edge binary given only that credential and its certificate (no
// POSTMILL_SECRET_KEY, no database) serves a send end to end through a core binary over mutual TLS,
// creates no secret of its own, and logs neither. A process missing its tier's credential, or pointed at
// the core over plain http while TLS is configured, refuses to start.
func TestBinaryEdgeWithTierCredentialAndNoSecretKey(t *testing.T) {
	t.Parallel()
	pki := rpctest.MustPKI(t, "postmill")
	server, edgeCert := pki.Server(t), pki.Client(t, "edge")
	dns, mx := mailRecords(t)

	coreEnv := baseEnv(t, pgtest.URL(t))
	for k, v := range map[string]string{
		"POSTMILL_DNS_RESOLVER": dns.Addr(), "POSTMILL_MTA_PORT": mx.port(), "POSTMILL_MTA_ALLOW_NETS": "127.0.0.1",
		"POSTMILL_MTA_RETRY_BASE": "200ms", "POSTMILL_RPC_TLS_CERT": server.Cert, "POSTMILL_RPC_TLS_KEY": server.Key,
		"POSTMILL_RPC_TLS_CA": server.CA,
	} {
		coreEnv[k] = v
	}
	core := MustServe(t, "core,mta", coreEnv)
	if !strings.Contains(core.logText(), `"tls":true,"client_certificates":true`) {
		t.Errorf("the core does not report mutual TLS on its RPC listener:\n%s", core.logText())
	}
	coreURL := "https://" + core.addrs["core-rpc"]

	cmd := exec.Command(mustBinary(t), "rpc-credential", "--tier=edge")
	cmd.Env = []string{"POSTMILL_SECRET_KEY=" + coreEnv["POSTMILL_SECRET_KEY"], "POSTMILL_DATA_DIR=" + t.TempDir()}
	out, err := cmd.Output()
	credential := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(credential, "pmrpc_edge_") {
		t.Fatalf("rpc-credential: %v %q", err, out)
	}

	edgeDir := t.TempDir()
	edgeEnv := map[string]string{
		"POSTMILL_HTTP_ADDR": "127.0.0.1:0", "POSTMILL_RPC_ADDR": "127.0.0.1:0", "POSTMILL_SUBMISSION_ADDR": "127.0.0.1:0",
		"POSTMILL_SMTP_ADDR": "127.0.0.1:0", "POSTMILL_METRICS_ADDR": "127.0.0.1:0", "POSTMILL_DATA_DIR": edgeDir, "POSTMILL_TRUSTED_PROXIES": "127.0.0.1",
		"POSTMILL_ADMIN_REQUIRE_2FA": "false", "POSTMILL_CORE_URL": coreURL, "POSTMILL_RPC_CREDENTIAL": credential,
		"POSTMILL_RPC_TLS_CERT": edgeCert.Cert, "POSTMILL_RPC_TLS_KEY": edgeCert.Key, "POSTMILL_RPC_TLS_CA": edgeCert.CA,
	}
	edgeProc := MustServe(t, "edge", edgeEnv)
	e := &env{t: t, base: "http://" + edgeProc.addrs["edge-http"], http: &http.Client{Timeout: 30 * time.Second}}
	expect(t, e.get("/readyz", ""), 200)
	sendOverTheSplit(t, &mailWorld{env: e, dns: dns, mx: mx}, "From an edge without the secret")

	if _, err := os.Stat(filepath.Join(edgeDir, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the edge created a secret key: %v", err)
	}
	for name, p := range map[string]*proc{"core": core, "edge": edgeProc} {
		for _, secret := range []string{credential, credential[len("pmrpc_edge_"):], coreEnv["POSTMILL_SECRET_KEY"]} {
			if strings.Contains(p.logText(), secret) {
				t.Errorf("the %s process logged a secret", name)
			}
		}
	}

	// A plaintext request to the core's port never reaches a handler.
	res, err := http.Post("http://"+core.addrs["core-rpc"]+"/postmill.health.v1.HealthService/Check", "application/json", strings.NewReader("{}"))
	if err == nil {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("plaintext request to the TLS port: %d %s", res.StatusCode, body)
		}
	}

	// Processes that cannot work refuse to start, without printing the credential.
	for _, c := range []struct {
		name, targets string
		edit          map[string]string
		want          string
	}{
		{"inbound with the edge's credential", "inbound", nil, "needs a inbound credential"},
		{"plain http with TLS configured", "edge", map[string]string{"POSTMILL_CORE_URL": "http://" + core.addrs["core-rpc"]}, "must be https://"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, mustBinary(t), "serve", "--target="+c.targets)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range edgeEnv {
			if alt, ok := c.edit[k]; ok {
				v = alt
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), credential) {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
	}
}
