package e2e

import (
	"bytes"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postmill/postmill/adapters/dns/dnstest"
	"github.com/postmill/postmill/adapters/postgres/pgtest"
	"github.com/postmill/postmill/ports"
)

// blobFiles lists the files of the fs blob store, temporary files included.
func blobFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

// TestInboundAttachmentsFromRaw: receiving writes one blob per message, the raw message; every attachment,
// nested in multipart/related or inside a message/rfc822 part, is downloaded byte for byte from it; and a
// raw message whose bytes changed on disk makes the changed attachment's download fail, never serve other
// bytes.
func TestInboundAttachmentsFromRaw(t *testing.T) {
	t.Parallel()
	dns := dnstest.New(t)
	dns.SetA(inboundMXHost, netip.MustParseAddr("127.0.0.1"))
	cfg := testConfig(t, pgtest.URL(t))
	cfg.DNSResolver = dns.Addr()
	cfg.InboundMXHost = inboundMXHost
	w := &inboundWorld{env: MustStart(t, cfg, "all"), dns: dns}
	w.owner = w.MustSignup("owner@acme.example", "")
	_, w.key = w.MustKey(w.owner, []string{ports.ScopeInboundRead})
	w.domain = "in-" + randomHex(t, 3) + ".acme.example"
	w.domID = expect(t, w.post("/v1/inbound/domains", w.owner.access, map[string]any{"domain": w.domain}), 201).str("id")
	w.dns.SetMX(w.domain, ports.MX{Host: inboundMXHost, Preference: 10})
	expect(t, w.post("/v1/inbound/domains/"+w.domID+"/verify", w.owner.access, nil), 201)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID, "matchType": "catch_all",
		"action": "store"}), 201)
	blobs := filepath.Join(cfg.DataDir, "blobs")

	fixture, err := os.ReadFile(filepath.Join("..", "..", "inbound", "testdata", "received-nested-related-rfc822.eml"))
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.Replace(string(fixture), "To: support@inbound.test", "To: support@"+w.domain, 1)
	if _, derr := w.send(t, "dana@example.net", []string{"support@" + w.domain}, raw); derr != nil {
		t.Fatalf("delivery: %v", derr)
	}
	if files := blobFiles(t, blobs); len(files) != 1 {
		t.Fatalf("blob files after one message: %v, want the raw message only", files)
	}
	if _, derr := w.send(t, "jerome@sender.example", []string{"support@" + w.domain},
		inboundMessage("support@"+w.domain, "second", "aGVsbG8gd29ybGQK")); derr != nil {
		t.Fatalf("second delivery: %v", derr)
	}
	if files := blobFiles(t, blobs); len(files) != 2 {
		t.Fatalf("blob files after two messages: %v, want one per message", files)
	}

	l := expect(t, w.get("/v1/received-emails", w.key), 200)
	var id string
	for _, d := range l.body["data"].([]any) {
		if m := d.(map[string]any); m["subject"] == "Nested parts" {
			id = m["id"].(string)
		}
	}
	if id == "" {
		t.Fatalf("nested message not listed: %s", l.raw)
	}
	png := make([]byte, 120)
	for i := range png {
		png[i] = byte(i)
	}
	want := map[string][]byte{
		"logo.png":       png,
		"":               []byte("The contract is attached."),
		"contract.pdf":   []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"),
		"kept-whole.eml": []byte("From: Finn <finn@example.org>\r\nTo: dana@example.net\r\nSubject: Kept whole\r\n\r\nA message attached as a file."),
		"numbers.csv":    []byte("a,b,c\n1,2,3\nété,x,y"),
		"single.bin":     []byte("single part body"),
	}
	det := expect(t, w.get("/v1/received-emails/"+id, w.key), 200)
	atts := det.body["attachments"].([]any)
	if len(atts) != len(want) {
		t.Fatalf("attachments: %v", atts)
	}
	ids := map[string]string{}
	for _, a := range atts {
		att := a.(map[string]any)
		name := att["filename"].(string)
		ids[name] = att["id"].(string)
		if att["downloadable"] != true || att["size"].(float64) != float64(len(want[name])) {
			t.Errorf("attachment %q: %v", name, att)
		}
		dl := expect(t, w.get("/v1/received-emails/"+id+"/attachments/"+att["id"].(string), w.key), 200)
		if !bytes.Equal(dl.raw, want[name]) {
			t.Errorf("download of %q = %q, want %q", name, dl.raw, want[name])
		}
	}

	// Change one byte of the logo's base64 in the stored raw message: the logo's download fails, the other
	// attachments are still served.
	var rawFile string
	for _, f := range blobFiles(t, blobs) {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("Nested parts")) {
			rawFile = f
		}
	}
	stored, err := os.ReadFile(rawFile)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(stored, []byte("AAECAwQF"), []byte("AQECAwQF"), 1)
	if bytes.Equal(tampered, stored) {
		t.Fatal("the logo's base64 is not in the stored raw message")
	}
	if err := os.WriteFile(rawFile, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.get("/v1/received-emails/"+id+"/attachments/"+ids["logo.png"], w.key); r.status != 500 || bytes.Contains(r.raw, png[:8]) {
		t.Fatalf("download of a tampered part: %d %q, want 500 and no bytes", r.status, r.raw)
	}
	if dl := expect(t, w.get("/v1/received-emails/"+id+"/attachments/"+ids["contract.pdf"], w.key), 200); !bytes.Equal(dl.raw, want["contract.pdf"]) {
		t.Errorf("untouched part after tampering: %q", dl.raw)
	}
}
