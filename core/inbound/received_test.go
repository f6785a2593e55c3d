package inbound

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postmill/postmill/ports"
)

// Fakes of the ports receiving and downloading use. Only the methods those paths call are implemented; the
// embedded interfaces make any other call panic.

type fakeInboundStore struct {
	ports.InboundStore
	domain ports.InboundDomain
	mu     sync.Mutex
	emails map[string]ports.ReceivedEmail
}

func (f *fakeInboundStore) InboundDomainByName(_ context.Context, name string) (ports.InboundDomain, error) {
	if name != f.domain.Name {
		return ports.InboundDomain{}, ports.NotFound("no inbound domain")
	}
	return f.domain, nil
}

func (f *fakeInboundStore) ListRoutes(context.Context, string, string) ([]ports.InboundRoute, error) {
	return []ports.InboundRoute{{ID: "r1", OrganizationID: f.domain.OrganizationID, InboundDomainID: f.domain.ID,
		MatchType: ports.MatchCatchAll, Action: ports.ActionStore, Enabled: true, Priority: 100}}, nil
}

func (f *fakeInboundStore) InsertReceived(_ context.Context, e ports.ReceivedEmail, _ []ports.Event) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.emails[e.ID] = e
	return true, "", nil
}

func (f *fakeInboundStore) GetReceived(_ context.Context, orgID, id string) (ports.ReceivedEmail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.emails[id]
	if !ok || e.OrganizationID != orgID {
		return ports.ReceivedEmail{}, ports.NotFound("received email not found")
	}
	return e, nil
}

type fakeBlobs struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (f *fakeBlobs) Put(_ context.Context, key string, data []byte, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs[key] = bytes.Clone(data)
	return nil
}

func (f *fakeBlobs) Get(_ context.Context, key string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.objs[key]
	if !ok {
		return nil, ports.NotFound("blob %s not found", key)
	}
	return bytes.Clone(b), nil
}

func (f *fakeBlobs) Delete(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objs, key)
	return nil
}

type cleanScanner struct{}

func (cleanScanner) Scan(context.Context, string, string, []byte) (ports.ScanVerdict, error) {
	return ports.ScanVerdict{Clean: true}, nil
}

// lineParts is a MessageParts over a toy format: each line of the raw message is "<path>=<bytes>".
type lineParts struct{ calls *int }

func (p lineParts) Extract(_ context.Context, raw []byte, path string) ([]byte, error) {
	*p.calls++
	for _, l := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && k == path {
			return []byte(v), nil
		}
	}
	return nil, ports.NotFound("no part %s", path)
}

type receiveBundle struct {
	svc     *Service
	store   *fakeInboundStore
	blobs   *fakeBlobs
	extract int
}

func setupReceive(t *testing.T, withParts bool) *receiveBundle {
	t.Helper()
	b := &receiveBundle{
		store: &fakeInboundStore{domain: ports.InboundDomain{ID: "d1", OrganizationID: "o1", Name: "in.test",
			Status: ports.InboundVerified}, emails: map[string]ports.ReceivedEmail{}},
		blobs: &fakeBlobs{objs: map[string][]byte{}},
	}
	deps := Deps{Store: b.store, Resolver: struct{ ports.Resolver }{}, Blobs: b.blobs, Scanner: cleanScanner{}}
	if withParts {
		deps.Parts = lineParts{calls: &b.extract}
	}
	svc, err := New(Config{MXHost: "mx.postmill.test"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	b.svc = svc
	return b
}

// receive hands the service a message whose raw bytes hold two parts in lineParts' format.
func (b *receiveBundle) receive(t *testing.T, withPaths bool) (ports.ReceivedEmail, []byte) {
	t.Helper()
	raw := []byte("1=first part\n2.1=second part")
	m := ports.InboundMessage{From: "a@sender.test", Rcpts: []string{"x@in.test"}, Raw: raw, Attachments: []ports.InboundPart{
		{Filename: "a.txt", ContentType: "text/plain", Data: []byte("first part"), PartPath: "1"},
		{Filename: "b.bin", ContentType: "application/octet-stream", Data: []byte("second part"), PartPath: "2.1"}}}
	if !withPaths {
		for i := range m.Attachments {
			m.Attachments[i].PartPath = ""
		}
	}
	res, err := b.svc.Receive(context.Background(), m)
	if err != nil || len(res.IDs) != 1 || res.IDs[0] == "" {
		t.Fatalf("Receive = %+v, %v", res, err)
	}
	e, err := b.store.GetReceived(context.Background(), "o1", res.IDs[0])
	if err != nil {
		t.Fatal(err)
	}
	return e, raw
}

// TestReceiveKeepsOnlyTheRawMessage: a received message writes one blob, the raw message; its attachments
// are recorded by part path and checksum and downloaded byte for byte from the raw message.
func TestReceiveKeepsOnlyTheRawMessage(t *testing.T) {
	t.Parallel()
	b := setupReceive(t, true)
	e, _ := b.receive(t, true)
	if len(b.blobs.objs) != 1 || b.blobs.objs[e.RawKey] == nil {
		t.Fatalf("blobs written: %d, want the raw message only", len(b.blobs.objs))
	}
	for i, want := range []string{"first part", "second part"} {
		a := e.Attachments[i]
		if a.BlobKey != "" || a.PartPath == "" || a.SHA256 != sha256Hex([]byte(want)) || !a.Downloadable() {
			t.Errorf("attachment %d recorded as %+v", i, a)
		}
		_, data, err := b.svc.ReceivedAttachment(context.Background(), "o1", e.ID, a.ID)
		if err != nil || string(data) != want {
			t.Errorf("download %d = %q, %v; want %q", i, data, err, want)
		}
	}
	if _, _, err := b.svc.ReceivedAttachment(context.Background(), "o2", e.ID, e.Attachments[0].ID); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Errorf("another organization: %v, want not_found", err)
	}
}

// TestReceivedAttachmentTamperedRaw: when the raw message's bytes changed since receipt, the download is an
// internal error and serves nothing: a part with other bytes, or a part no longer there.
func TestReceivedAttachmentTamperedRaw(t *testing.T) {
	t.Parallel()
	for name, tampered := range map[string]string{
		"bytes changed":   "1=first part\n2.1=secXnd part",
		"length changed":  "1=first part\n2.1=second part!",
		"part gone":       "1=first part",
		"part renumbered": "1=first part\n2.2=second part",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupReceive(t, true)
			e, _ := b.receive(t, true)
			b.blobs.objs[e.RawKey] = []byte(tampered)
			_, data, err := b.svc.ReceivedAttachment(context.Background(), "o1", e.ID, e.Attachments[1].ID)
			if ports.ErrorCode(err) != ports.CodeInternal || data != nil {
				t.Fatalf("download of a tampered part = %q, %v; want an internal error and no bytes", data, err)
			}
			if _, data, err := b.svc.ReceivedAttachment(context.Background(), "o1", e.ID, e.Attachments[0].ID); err != nil || string(data) != "first part" {
				t.Errorf("the untouched part = %q, %v", data, err)
			}
			delete(b.blobs.objs, e.RawKey)
			if _, _, err := b.svc.ReceivedAttachment(context.Background(), "o1", e.ID, e.Attachments[0].ID); ports.ErrorCode(err) != ports.CodeNotFound {
				t.Errorf("raw message gone: %v, want not_found", err)
			}
		})
	}
}

// TestReceivedAttachmentOldScheme: an attachment stored as a blob of its own (rows written before the raw
// message became the only blob) is served from that blob, without reading the raw message.
func TestReceivedAttachmentOldScheme(t *testing.T) {
	t.Parallel()
	b := setupReceive(t, true)
	e := ports.ReceivedEmail{ID: "e-old", OrganizationID: "o1", RawKey: "inbound/raw/old", Attachments: []ports.ReceivedAttachment{
		{ID: "a-old", Filename: "old.pdf", ContentType: "application/pdf", Size: 7, ScanStatus: ports.ScanClean,
			BlobKey: "inbound/part/old"}}}
	b.store.emails[e.ID] = e
	b.blobs.objs["inbound/part/old"] = []byte("old pdf")
	_, data, err := b.svc.ReceivedAttachment(context.Background(), "o1", "e-old", "a-old")
	if err != nil || string(data) != "old pdf" || b.extract != 0 {
		t.Fatalf("old-scheme download = %q, %v (%d extractions)", data, err, b.extract)
	}
	delete(b.blobs.objs, "inbound/part/old")
	if _, _, err := b.svc.ReceivedAttachment(context.Background(), "o1", "e-old", "a-old"); ports.ErrorCode(err) != ports.CodeNotFound {
		t.Errorf("missing blob: %v, want not_found", err)
	}
}

// TestReceiveWithoutPartPaths: a part the tier sent without a path, or a service without MessageParts,
// keeps each clean attachment as a blob of its own, as before.
func TestReceiveWithoutPartPaths(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ parts, paths bool }{"no paths": {true, false}, "no MessageParts": {false, true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupReceive(t, c.parts)
			e, _ := b.receive(t, c.paths)
			if len(b.blobs.objs) != 3 {
				t.Fatalf("%d blobs, want the raw message and two attachments", len(b.blobs.objs))
			}
			for _, a := range e.Attachments {
				if a.BlobKey == "" || a.PartPath != "" {
					t.Errorf("attachment %+v", a)
				}
				if _, data, err := b.svc.ReceivedAttachment(context.Background(), "o1", e.ID, a.ID); err != nil || int64(len(data)) != a.Size {
					t.Errorf("download = %q, %v", data, err)
				}
			}
		})
	}
}

type oneDomain struct{ ports.DomainService }

func (oneDomain) ListDomains(context.Context, string) ([]ports.Domain, error) {
	return []ports.Domain{{Name: "acme.test", Status: ports.DomainVerified}}, nil
}

// TestForwardAttachmentsFromRaw: a forward carries the attachments derived from the raw message, read once
// for all of them.
func TestForwardAttachmentsFromRaw(t *testing.T) {
	t.Parallel()
	b := setupReceive(t, true)
	b.svc.deps.Domains = oneDomain{}
	e, _ := b.receive(t, true)
	reads := 0
	counting := &countingBlobs{fakeBlobs: b.blobs, reads: &reads}
	b.svc.deps.Blobs = counting
	req, err := b.svc.forwardRequest(context.Background(), e, "dest@example.test", 0)
	if err != nil || len(req.Attachments) != 2 || string(req.Attachments[0].Content) != "first part" ||
		string(req.Attachments[1].Content) != "second part" || reads != 1 {
		t.Fatalf("forward request: %+v, %v (%d raw reads)", req.Attachments, err, reads)
	}
}

type countingBlobs struct {
	*fakeBlobs
	reads *int
}

func (c *countingBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	*c.reads++
	return c.fakeBlobs.Get(ctx, key)
}

// TestReceiveStoresCleanText: whatever a tier hands over, every text value kept is valid UTF-8 without NUL
// and the values taken from headers are one line; the raw message is kept byte for byte.
func TestReceiveStoresCleanText(t *testing.T) {
	t.Parallel()
	b := setupReceive(t, true)
	raw := []byte("1=part\x00\xff")
	m := ports.InboundMessage{From: "a\x00@sender.test", Rcpts: []string{"x@in.test"}, Raw: raw,
		Subject: "fwd\r\nBcc: x@evil.example", FromName: "Eve\x00\xe9", HeaderFrom: "eve@sender.test",
		MessageID: "<m\n@x>", InReplyTo: "<a\x00>", References: "<r\xff>", To: []string{"x@in.test\r"}, Cc: []string{"c\x00@x"},
		Text: "line 1\r\nline\x00 2\xfe", HTML: "<p>\x00</p>",
		Headers: map[string][]string{"Subject": {"fwd\r\nBcc: x@evil.example"}, "X-Bad\x00": {"\xff"}},
		Attachments: []ports.InboundPart{{Filename: "a\x00\n.txt", ContentType: "text/plain\r\n", ContentID: "c\xff",
			Data: []byte("part\x00\xff"), PartPath: "1"}}}
	res, err := b.svc.Receive(context.Background(), m)
	if err != nil || len(res.IDs) != 1 || res.IDs[0] == "" {
		t.Fatalf("Receive = %+v, %v", res, err)
	}
	e, err := b.store.GetReceived(context.Background(), "o1", res.IDs[0])
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "fwd  Bcc: x@evil.example" || e.HeaderFromName != "Eve \uFFFD" || e.Text != "line 1\r\nline\uFFFD 2\uFFFD" ||
		e.HTML != "<p>\uFFFD</p>" || e.Headers["Subject"][0] != e.Subject || e.Attachments[0].Filename != "a  .txt" {
		t.Errorf("stored subject %q, name %q, text %q, html %q, headers %q, attachment %q", e.Subject, e.HeaderFromName, e.Text,
			e.HTML, e.Headers, e.Attachments[0].Filename)
	}
	if !bytes.Equal(b.blobs.objs[e.RawKey], raw) {
		t.Error("the raw message changed")
	}
	values := []string{e.To, e.From, e.HeaderFrom, e.HeaderFromName, e.Subject, e.MessageID, *e.InReplyTo, *e.References}
	values = append(append(values, e.ToAddresses...), e.CcAddresses...)
	for k, vs := range e.Headers {
		values = append(append(values, k), vs...)
	}
	for _, a := range e.Attachments {
		values = append(values, a.Filename, a.ContentType, a.ContentID)
	}
	for _, s := range values {
		if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' }) {
			t.Errorf("stored header value %q is not one line of UTF-8", s)
		}
	}
	for _, s := range []string{e.Text, e.HTML} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Errorf("stored body %q is not UTF-8 without NUL", s)
		}
	}
}

// recordingStore is the inbound store as forward sees it: what RecordAction was told.
type recordingStore struct {
	ports.InboundStore
	mu       sync.Mutex
	statuses []string
}

func (r *recordingStore) RecordAction(_ context.Context, _, _ string, status string, _ int, _ *time.Time, _ int, _, fwd string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, status+"/"+fwd)
	return nil
}

// sendingFake is the send path as forward sees it: the requests it was given.
type sendingFake struct {
	ports.EmailService
	reqs []ports.SendRequest
}

func (s *sendingFake) Send(_ context.Context, _ string, req ports.SendRequest) (ports.SendResult, error) {
	s.reqs = append(s.reqs, req)
	return ports.SendResult{ID: "m"}, nil
}

// A forward carries one hop more than the mail it forwards, and mail that went through maxForwardHops
// forwards, or carries maxReceived Received fields, is not forwarded again: a route forwarding to its own
// address, or two organizations forwarding to each other, stop after a bounded number of sends.
func TestForwardStopsMailLoops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		sent    string // the hop count of the forward, "" for none sent
	}{
		{"first forward", nil, "1"},
		{"forwarded before", map[string][]string{"X-Postmill-Forward-Hops": {"3"}}, "4"},
		{"at the hop bound", map[string][]string{"x-postmill-forward-hops": {"10"}}, ""},
		{"many Received fields", map[string][]string{"Received": make([]string, 50)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, emails := &recordingStore{}, &sendingFake{}
			svc, err := New(Config{MXHost: "mx.postmill.test"}, Deps{Store: store, Resolver: struct{ ports.Resolver }{},
				Blobs: &fakeBlobs{objs: map[string][]byte{}}, Scanner: cleanScanner{}, Emails: emails, Domains: oneDomain{}})
			if err != nil {
				t.Fatal(err)
			}
			e := ports.ReceivedEmail{ID: "e1", OrganizationID: "o1", To: "loop@in.test", From: "a@x.test", Subject: "s",
				Text: "t", Headers: tc.headers}
			if err := svc.forward(context.Background(), ports.DueAction{Email: e, Route: ports.InboundRoute{Destination: "loop@in.test"}}); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.sent == "" && (len(emails.reqs) != 0 || len(store.statuses) != 1 || store.statuses[0] != ports.ReceivedFailed+"/"+ports.ForwardFailed):
				t.Errorf("sent %d, recorded %v: want nothing sent and the forward failed", len(emails.reqs), store.statuses)
			case tc.sent != "" && (len(emails.reqs) != 1 || emails.reqs[0].Headers["X-Postmill-Forward-Hops"] != tc.sent):
				t.Errorf("sent %+v: want one forward with hop count %s", emails.reqs, tc.sent)
			}
		})
	}
}
