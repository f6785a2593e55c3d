package rpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/postmill/postmill/adapters/rpc"
	emailv1 "github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1"
	"github.com/postmill/postmill/adapters/rpc/gen/postmill/email/v1/emailv1connect"
	"github.com/postmill/postmill/ports"
)

// TestBatchItemErrors checks that each item's error comes back as the *ports.Error a single Send would
// have returned (every code, reason, details and fields), aligned to its index, while the other items
// succeed; and that an item's unexpected error does not leak its words.
func TestBatchItemErrors(t *testing.T) {
	t.Parallel()
	codes := []ports.Code{
		ports.CodeInvalidArgument, ports.CodeNotFound, ports.CodeAlreadyExists, ports.CodeFailedPrecondition,
		ports.CodePermissionDenied, ports.CodeUnauthenticated, ports.CodeResourceExhausted,
		ports.CodePaymentRequired, ports.CodeInternal,
	}
	type item struct {
		err  error
		want *ports.Error
	}
	var items []item
	for _, code := range codes {
		items = append(items, item{fullError(code), fullError(code)})
	}
	items = append(items,
		item{nil, nil},
		item{&ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"},
			&ports.Error{Code: ports.CodePermissionDenied, Reason: "org_suspended", Message: "organization sending is paused"}},
		item{fmt.Errorf("send: %w", ports.MissingReference("templates_pkey")), ports.MissingReference("templates_pkey")},
		item{ports.ValidationError([]ports.FieldViolation{}...), ports.ValidationError([]ports.FieldViolation{}...)},
		item{errors.New("pq: secret connection string"), &ports.Error{Code: ports.CodeInternal, Message: "internal error"}},
		item{&ports.Error{Code: "teapot", Message: "secret teapot"}, &ports.Error{Code: ports.CodeInternal, Message: "internal error"}},
	)
	var results []ports.BatchItemResult
	for i, it := range items {
		r := ports.BatchItemResult{Index: i, Err: it.err}
		if it.err == nil {
			r.Result = ports.SendResult{ID: fmt.Sprintf("m%d", i), Status: ports.StatusQueued}
		}
		results = append(results, r)
	}
	b := setup(t, &fakeCore{batch: results})
	got, err := b.client.Core().Emails.SendBatch(context.Background(), "org1", make([]ports.SendRequest, len(items)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(items) {
		t.Fatalf("got %d results, want %d", len(got), len(items))
	}
	for i, it := range items {
		if got[i].Index != i {
			t.Errorf("item %d: index %d", i, got[i].Index)
		}
		if it.want == nil {
			if got[i].Err != nil || got[i].Result != results[i].Result {
				t.Errorf("item %d: got %+v, want success %+v", i, got[i], results[i].Result)
			}
			continue
		}
		assertSameError(t, got[i].Err, it.want)
		if strings.Contains(got[i].Err.Error(), "secret") {
			t.Errorf("item %d: err = %q leaks the implementation's words", i, got[i].Err)
		}
	}
}

// TestTemplateVariablesExact checks that numbers in template variables arrive exactly, as json.Number:
// an integer beyond 2^53 would not survive google.protobuf.Struct or a float64.
func TestTemplateVariablesExact(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req := ports.SendRequest{Template: &ports.TemplateRef{ID: "t", Variables: map[string]any{
		"big": int64(1<<60 + 1), "ratio": 0.1, "count": 3, "list": []int{1, 2},
	}}}
	if _, err := b.client.Core().Emails.Send(context.Background(), "org1", req); err != nil {
		t.Fatal(err)
	}
	calls := b.fake.recorded()
	got := calls[0].args[1].(ports.SendRequest).Template.Variables
	want := map[string]any{
		"big": json.Number("1152921504606846977"), "ratio": json.Number("0.1"), "count": json.Number("3"),
		"list": []any{json.Number("1"), json.Number("2")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("variables = %#v, want %#v", got, want)
	}
}

// TestUnencodableVariables checks that a send whose template variables are not JSON fails before the
// wire as an internal error that names the cause, and never reaches the core.
func TestUnencodableVariables(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	bad := ports.SendRequest{Template: &ports.TemplateRef{ID: "t", Variables: map[string]any{"ch": make(chan int)}}}
	_, err := b.client.Core().Emails.Send(context.Background(), "org1", bad)
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "template variables") {
		t.Errorf("Send: err = %v, want internal naming the variables", err)
	}
	_, err = b.client.Core().Emails.SendBatch(context.Background(), "org1", []ports.SendRequest{{}, bad})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("SendBatch: err = %v, want internal naming the item", err)
	}
	if calls := b.fake.recorded(); len(calls) != 0 {
		t.Errorf("implementation reached: %+v", calls)
	}
}

// capture records every response body the client reads, to inspect what crossed the wire.
type capture struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies map[string][]byte // by URL path, decompressed
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	plain := body
	if res.Header.Get("Content-Encoding") == "gzip" {
		// Connect compresses answers itself; look at what the bytes say, not at their compressed form.
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if plain, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.bodies[req.URL.Path] = plain
	c.mu.Unlock()
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// TestSecretsStayInCore checks on the wire itself that no DomainService answer carries the DKIM private
// key and no EmailService answer an attachment's storage key, while LoadOutbound carries both to the MTA.
func TestSecretsStayInCore(t *testing.T) {
	t.Parallel()
	fake := &fakeCore{
		domain: fullDomain(), domains: []ports.Domain{fullDomain()}, message: fullMessage(),
		page: ports.EmailPage{Data: []ports.Message{fullMessage()}}, outbound: fullOutbound(),
	}
	srv := mustServe(t, fake.core(), testToken)
	cap := &capture{next: srv.Client().Transport, bodies: map[string][]byte{}}
	c := rpc.NewClient(srv.URL, testToken, &http.Client{Transport: cap}).Core()
	ctx := context.Background()

	for name, call := range map[string]func() error{
		"CreateDomain":  func() error { _, err := c.Domains.CreateDomain(ctx, "org1", "x"); return err },
		"ListDomains":   func() error { _, err := c.Domains.ListDomains(ctx, "org1"); return err },
		"GetDomain":     func() error { _, err := c.Domains.GetDomain(ctx, "org1", "d1"); return err },
		"VerifyDomain":  func() error { _, err := c.Domains.VerifyDomain(ctx, "org1", "d1"); return err },
		"SuspendDomain": func() error { _, err := c.Domains.SuspendDomain(ctx, "org1", "d1"); return err },
		"UpdateDomainTracking": func() error {
			_, err := c.Domains.UpdateDomainTracking(ctx, "org1", "d1", ports.TrackingSettings{OpenTracking: ptr(true)})
			return err
		},
		"GetEmail":    func() error { _, err := c.Emails.GetEmail(ctx, "org1", "m1"); return err },
		"CancelEmail": func() error { _, err := c.Emails.CancelEmail(ctx, "org1", "m1"); return err },
		"ListEmails":  func() error { _, err := c.Emails.ListEmails(ctx, "org1", ports.ListEmailsQuery{}); return err },
	} {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	out, err := c.Delivery.LoadOutbound(ctx, fullJob())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.DKIMPrivateKey, dkimKey) || out.Attachments[0].Key != storageKey {
		t.Errorf("LoadOutbound: key %q, storage key %q; want both as the core holds them", out.DKIMPrivateKey, out.Attachments[0].Key)
	}

	cap.mu.Lock()
	defer cap.mu.Unlock()
	if len(cap.bodies) != 10 {
		t.Fatalf("captured %d bodies, want 10", len(cap.bodies))
	}
	for path, body := range cap.bodies {
		hasKey := bytes.Contains(body, dkimKey)
		hasStorageKey := bytes.Contains(body, []byte(storageKey))
		if strings.Contains(path, "LoadOutbound") {
			if !hasKey || !hasStorageKey {
				t.Errorf("%s: DKIM key on the wire %v, storage key %v; want both", path, hasKey, hasStorageKey)
			}
			continue
		}
		if hasKey || hasStorageKey {
			t.Errorf("%s: DKIM key on the wire %v, storage key %v; want neither", path, hasKey, hasStorageKey)
		}
	}
}

// TestSchemaKeepsSecretsInCore checks the schema itself: no message of the domain or email packages may
// grow a field for a private key or an attachment's storage key, and the delivery package, where both
// travel to the MTA, has them.
func TestSchemaKeepsSecretsInCore(t *testing.T) {
	t.Parallel()
	fields := func(path string) map[protoreflect.Name]protoreflect.FullName {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out := map[protoreflect.Name]protoreflect.FullName{}
		var walk func(protoreflect.MessageDescriptors)
		walk = func(ms protoreflect.MessageDescriptors) {
			for i := range ms.Len() {
				m := ms.Get(i)
				if m.IsMapEntry() {
					continue // key and value of a map<string, string>
				}
				for j := range m.Fields().Len() {
					f := m.Fields().Get(j)
					out[f.Name()] = f.FullName()
				}
				walk(m.Messages())
			}
		}
		walk(fd.Messages())
		if len(out) == 0 {
			t.Fatalf("%s: no fields", path)
		}
		return out
	}
	for _, path := range []string{"postmill/domain/v1/domain.proto", "postmill/email/v1/email.proto"} {
		for name, full := range fields(path) {
			lower := strings.ToLower(string(name))
			if strings.Contains(lower, "private") || strings.Contains(lower, "secret") || lower == "key" || strings.Contains(lower, "storage") {
				t.Errorf("%s: field %s would carry what the core keeps", path, full)
			}
		}
	}
	delivery := fields("postmill/delivery/v1/delivery.proto")
	for _, want := range []protoreflect.FullName{
		"postmill.delivery.v1.OutboundMessage.dkim_private_key",
		"postmill.delivery.v1.OutboundAttachment.key",
	} {
		if delivery[want.Name()] != want {
			t.Errorf("delivery schema lacks %s, which the MTA needs", want)
		}
	}
}

// TestUnsendableNeverReachesCore checks that a request the client cannot put on the wire (a string that
// is not UTF-8, which proto3 forbids) fails as an internal error naming the field, and that the core
// never runs the method on an empty message instead.
func TestUnsendableNeverReachesCore(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	_, err := b.client.Core().Emails.Send(ctx, "org1", ports.SendRequest{Subject: "caf\xe9"})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "subject") {
		t.Errorf("Send: err = %v, want internal naming the subject", err)
	}
	err = b.client.Core().Delivery.ReportDelivery(ctx, ports.DeliveryReport{Job: fullJob(), Recipients: []ports.RecipientOutcome{
		{RecipientID: "rc1", Kind: ports.OutcomeBounced, Response: "550 5.1.1 unknown \xff"},
	}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "response") {
		t.Errorf("ReportDelivery: err = %v, want internal naming the response", err)
	}
	_, err = b.client.Core().Emails.Send(ctx, "org1", ports.SendRequest{Headers: map[string]string{"X-A": "\xff"}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "value") {
		t.Errorf("Send with a header: err = %v, want internal naming the map value", err)
	}
	_, err = b.client.Core().Emails.Send(ctx, "org1", ports.SendRequest{To: []string{"a@example.org", "\xffb@example.org"}})
	if ports.ErrorCode(err) != ports.CodeInternal || !strings.Contains(err.Error(), "values") {
		t.Errorf("Send with a recipient: err = %v, want internal naming the list", err)
	}
	// A call that does go out, so that an empty request sent by the failures above would be recorded.
	if err := b.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := b.fake.recorded(); len(calls) != 1 || calls[0].method != "Ping" {
		t.Errorf("implementation calls = %+v, want only Ping", calls)
	}
}

// TestLargeSend checks that a send with a 30 MiB attachment crosses the hop byte for byte, and that a
// message beyond rpc.MaxMessageBytes is refused by the client before sending and by the server before
// the core sees it.
func TestLargeSend(t *testing.T) {
	t.Parallel()
	b := setup(t, &fakeCore{sendResult: fullSendResult()})
	ctx := context.Background()

	content := make([]byte, 30<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>13)
	}
	req := ports.SendRequest{From: "a@mail.example.com", Attachments: []ports.Attachment{{Filename: "big.bin", Content: content}}}
	if _, err := b.client.Core().Emails.Send(ctx, "org1", req); err != nil {
		t.Fatalf("30 MiB send: %v", err)
	}
	calls := b.fake.recorded()
	if len(calls) != 1 {
		t.Fatalf("implementation calls = %d, want 1", len(calls))
	}
	if got := calls[0].args[1].(ports.SendRequest).Attachments[0].Content; !bytes.Equal(got, content) {
		t.Errorf("attachment arrived with %d bytes, differing from the %d sent", len(got), len(content))
	}

	huge := ports.SendRequest{Attachments: []ports.Attachment{{Content: make([]byte, rpc.MaxMessageBytes)}}}
	_, err := b.client.Core().Emails.Send(ctx, "org1", huge)
	if ports.ErrorCode(err) != ports.CodeInternal || connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("client over the limit: err = %v, want internal caused by resource_exhausted", err)
	}

	// A caller without the client's limit meets the server's.
	raw := emailv1connect.NewEmailServiceClient(b.server.Client(), b.server.URL)
	rawReq := connect.NewRequest(&emailv1.SendRequest{OrganizationId: "org1", Email: &emailv1.SendEmail{
		Attachments: &emailv1.AttachmentList{Items: []*emailv1.Attachment{{Content: make([]byte, rpc.MaxMessageBytes)}}},
	}})
	rawReq.Header().Set("Authorization", "Bearer "+testToken)
	_, err = raw.Send(ctx, rawReq)
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("server over the limit: err = %v, want resource_exhausted", err)
	}
	if calls := b.fake.recorded(); len(calls) != 1 {
		t.Errorf("implementation calls = %d, want only the 30 MiB send", len(calls))
	}
}

// boolPtrName names an optional setting in a test's name.
func boolPtrName(b *bool) string {
	if b == nil {
		return "unchanged"
	}
	return fmt.Sprint(*b)
}
