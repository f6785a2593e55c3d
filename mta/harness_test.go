package mta_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postmill/postmill/mta"
	"github.com/postmill/postmill/ports"
)

// memQueue is an in-memory ports.Queue: the tier's input, not a store under test. A nacked job comes back
// (after its delay) counting one more delivery, as from the real queues.
type memQueue struct {
	mu       sync.Mutex
	jobs     []queuedJob
	ready    chan struct{}
	settled  chan settlement
	renewals atomic.Int64 // lease renewals of every delivery so far
}

type queuedJob struct {
	job    ports.DeliveryJob
	before int // deliveries before this one
}

// settlement is how the MTA settled one delivery: Ack, or a nack after Delay, or a dead letter with its
// reason.
type settlement struct {
	JobID      string
	Ack        bool
	Delay      time.Duration
	Dead       string
	Deliveries int
	HandedBack bool
}

func newMemQueue() *memQueue {
	return &memQueue{ready: make(chan struct{}, 1), settled: make(chan settlement, 1000)}
}

func (q *memQueue) Publish(_ context.Context, jobs []ports.DeliveryJob) error {
	q.mu.Lock()
	for _, j := range jobs {
		q.jobs = append(q.jobs, queuedJob{job: j})
	}
	q.mu.Unlock()
	q.wake()
	return nil
}

func (q *memQueue) requeue(j queuedJob) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	q.wake()
}

func (q *memQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *memQueue) Receive(ctx context.Context, max int) ([]ports.Delivery, error) {
	for {
		q.mu.Lock()
		if n := min(max, len(q.jobs)); n > 0 {
			ds := make([]ports.Delivery, n)
			for i, j := range q.jobs[:n] {
				ds[i] = &memDelivery{q: q, job: j.job, deliveries: j.before + 1}
			}
			q.jobs = q.jobs[n:]
			q.mu.Unlock()
			return ds, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

type memDelivery struct {
	q          *memQueue
	job        ports.DeliveryJob
	deliveries int
}

func (d *memDelivery) Job() ports.DeliveryJob { return d.job }
func (d *memDelivery) Deliveries() int        { return d.deliveries }
func (d *memDelivery) Ack(context.Context) error {
	d.q.settled <- settlement{JobID: d.job.ID, Ack: true, Deliveries: d.deliveries}
	return nil
}

// Renew implements ports.LeaseRenewer, like the PostgreSQL queue's deliveries, counting the calls.
func (d *memDelivery) Renew(context.Context) error {
	d.q.renewals.Add(1)
	return nil
}
func (d *memDelivery) Nack(ctx context.Context) error { return d.NackAfter(ctx, 0) }

func (d *memDelivery) NackAfter(_ context.Context, delay time.Duration) error {
	d.q.settled <- settlement{JobID: d.job.ID, Delay: delay, Deliveries: d.deliveries}
	again := queuedJob{job: d.job, before: d.deliveries}
	time.AfterFunc(delay, func() { d.q.requeue(again) })
	return nil
}

// HandBack requeues the job without counting this delivery, recorded as a settlement with HandedBack.
func (d *memDelivery) HandBack(_ context.Context, delay time.Duration) error {
	d.q.settled <- settlement{JobID: d.job.ID, Delay: delay, Deliveries: d.deliveries, HandedBack: true}
	again := queuedJob{job: d.job, before: d.deliveries - 1}
	time.AfterFunc(delay, func() { d.q.requeue(again) })
	return nil
}

func (d *memDelivery) DeadLetter(_ context.Context, reason string) error {
	d.q.settled <- settlement{JobID: d.job.ID, Dead: reason, Deliveries: d.deliveries}
	return nil
}

// memDeliveryService is an in-memory ports.DeliveryService: it hands out prepared messages and records
// reports. refuse, when set, decides per report whether recording it fails (a store refusing its text);
// reportErr fails every report.
type memDeliveryService struct {
	mu        sync.Mutex
	messages  map[string]ports.OutboundMessage // by job id
	loadErr   error
	reportErr error
	refuse    func(ports.DeliveryReport) error
	reports   chan ports.DeliveryReport
}

func (s *memDeliveryService) LoadOutbound(_ context.Context, job ports.DeliveryJob) (ports.OutboundMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		return ports.OutboundMessage{}, s.loadErr
	}
	m, ok := s.messages[job.ID]
	if !ok {
		return ports.OutboundMessage{}, ports.NotFound("message not found")
	}
	return m, nil
}

func (s *memDeliveryService) ReportDelivery(_ context.Context, r ports.DeliveryReport) error {
	s.mu.Lock()
	err := s.reportErr
	if err == nil && s.refuse != nil {
		err = s.refuse(r)
	}
	s.mu.Unlock()
	s.reports <- r
	return err
}

// memBlobs is an in-memory ports.BlobStore.
type memBlobs struct {
	mu   sync.Mutex
	data map[string][]byte
}

func (b *memBlobs) Put(_ context.Context, key string, data []byte, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data[key] = data
	return nil
}

func (b *memBlobs) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.data[key]
	if !ok {
		return nil, ports.NotFound("blob not found")
	}
	return d, nil
}

func (b *memBlobs) Delete(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.data, key)
	return nil
}

// staticResolver answers from tables: the resolver is the tier's input (DNS itself is tested in the DNS
// adapter). Names missing from a table are NXDOMAIN.
type staticResolver struct {
	mu    sync.Mutex
	mx    map[string][]ports.MX
	mxErr map[string]ports.DNSErrorKind
	ips   map[string][]netip.Addr
	ipErr map[string]ports.DNSErrorKind
	asked []string // "MX name" / "IP name", in order
}

func newResolver() *staticResolver {
	return &staticResolver{
		mx: map[string][]ports.MX{}, mxErr: map[string]ports.DNSErrorKind{},
		ips: map[string][]netip.Addr{}, ipErr: map[string]ports.DNSErrorKind{},
	}
}

func (r *staticResolver) MX(domain string, records ...ports.MX) *staticResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mx[domain] = records
	return r
}

func (r *staticResolver) IP(host string, addrs ...string) *staticResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		r.ips[host] = append(r.ips[host], netip.MustParseAddr(a))
	}
	return r
}

func (r *staticResolver) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

func (r *staticResolver) LookupTXT(context.Context, string) ([]string, error) {
	return nil, &ports.DNSError{Kind: ports.DNSNotFound}
}

func (r *staticResolver) LookupCNAME(context.Context, string) (string, error) {
	return "", &ports.DNSError{Kind: ports.DNSNotFound}
}

func (r *staticResolver) LookupMX(_ context.Context, name string) ([]ports.MX, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, "MX "+name)
	if k, ok := r.mxErr[name]; ok {
		return nil, &ports.DNSError{Kind: k, Name: name}
	}
	if mx, ok := r.mx[name]; ok {
		return mx, nil
	}
	return nil, &ports.DNSError{Kind: ports.DNSNotFound, Name: name}
}

func (r *staticResolver) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, "IP "+host)
	if k, ok := r.ipErr[host]; ok {
		return nil, &ports.DNSError{Kind: k, Name: host}
	}
	if a, ok := r.ips[host]; ok {
		return a, nil
	}
	return nil, &ports.DNSError{Kind: ports.DNSNotFound, Name: host}
}

// dkimKey is one RSA-2048 key shared by the tests (generating one takes a while).
var dkimKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func dkimDER(tb testing.TB) []byte {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(dkimKey())
	if err != nil {
		tb.Fatal(err)
	}
	return der
}

// dkimTXT is the DKIM key record a domain would publish (RFC 6376 §3.6.1).
func dkimTXT(tb testing.TB) string {
	tb.Helper()
	spki, err := x509.MarshalPKIXPublicKey(&dkimKey().PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(spki)
}

// newID returns a random identifier (the tier treats ids as opaque).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// harness runs an MTA against in-memory ports and real SMTP servers.
type harness struct {
	tb       testing.TB
	Queue    *memQueue
	Service  *memDeliveryService
	Resolver *staticResolver
	Blobs    *memBlobs
	MTA      *mta.MTA
	cancel   context.CancelFunc
	done     chan error
}

// baseConfig is a test configuration delivering to port. The test servers listen on loopback, which the
// forbidden-address rule refuses unless allow-listed: 127.0.0.0/8 is, here (hardening_test.go narrows it).
func baseConfig(port int) mta.Config {
	return mta.Config{
		Port:           port,
		HELO:           "mta.postmill.test",
		ConnectTimeout: 2 * time.Second,
		CommandTimeout: 5 * time.Second,
		Concurrency:    4,
		Workers:        8,
		AllowNets:      []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
}

// newHarness builds the MTA; start runs it.
func newHarness(tb testing.TB, cfg mta.Config, resolver *staticResolver, deps ...func(*mta.Deps)) *harness {
	tb.Helper()
	h := &harness{
		tb:       tb,
		Queue:    newMemQueue(),
		Service:  &memDeliveryService{messages: map[string]ports.OutboundMessage{}, reports: make(chan ports.DeliveryReport, 1000)},
		Resolver: resolver,
		Blobs:    &memBlobs{data: map[string][]byte{}},
	}
	d := mta.Deps{Queue: h.Queue, Delivery: h.Service, Resolver: resolver, Blobs: h.Blobs}
	for _, f := range deps {
		f(&d)
	}
	m, err := mta.New(cfg, d)
	if err != nil {
		tb.Fatal(err)
	}
	h.MTA = m
	return h
}

// start runs the MTA until the test ends (or Stop).
func (h *harness) start() *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.MTA.Run(ctx) }()
	h.tb.Cleanup(func() { _ = h.Stop() })
	return h
}

// Stop cancels Run and waits for it to return.
func (h *harness) Stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		return err
	case <-time.After(20 * time.Second):
		h.tb.Error("Run did not return after cancel")
		return nil
	}
}

// Enqueue registers out and publishes its job.
func (h *harness) Enqueue(out ports.OutboundMessage) {
	h.tb.Helper()
	h.Service.mu.Lock()
	h.Service.messages[out.Job.ID] = out
	h.Service.mu.Unlock()
	if err := h.Queue.Publish(context.Background(), []ports.DeliveryJob{out.Job}); err != nil {
		h.tb.Fatal(err)
	}
}

// Report waits for the next delivery report.
func (h *harness) Report() ports.DeliveryReport {
	h.tb.Helper()
	select {
	case r := <-h.Service.reports:
		return r
	case <-time.After(15 * time.Second):
		h.tb.Fatal("no delivery report")
		return ports.DeliveryReport{}
	}
}

// Send enqueues out and waits for its report and for the job to be settled.
func (h *harness) Send(out ports.OutboundMessage) (ports.DeliveryReport, settlement) {
	h.tb.Helper()
	h.Enqueue(out)
	r := h.Report()
	return r, h.Settled()
}

// Settled waits for the next Ack or Nack.
func (h *harness) Settled() settlement {
	h.tb.Helper()
	select {
	case s := <-h.Queue.settled:
		return s
	case <-time.After(15 * time.Second):
		h.tb.Fatal("job neither acked nor nacked")
		return settlement{}
	}
}

// outbound is a message from news@acme.test to the given recipients of one domain ("to:", "cc:" or
// "bcc:" prefixes choose the type; default to).
func outbound(tb testing.TB, domain string, rcpts ...string) ports.OutboundMessage {
	tb.Helper()
	msgID := newID()
	out := ports.OutboundMessage{
		Job: ports.DeliveryJob{
			ID: newID(), OrganizationID: "org-1", MessageID: msgID, Domain: domain,
			Attempt: 1, FirstQueuedAt: time.Now(),
		},
		MessageID:       msgID,
		OrganizationID:  "org-1",
		From:            "Acme News <news@acme.test>",
		Subject:         "Hello",
		Text:            "Hello there.",
		CreatedAt:       time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		DKIMDomain:      "acme.test",
		DKIMSelector:    "pm0123456789",
		DKIMPrivateKey:  dkimDER(tb),
		ReturnPath:      "b-token@bounce.acme.test",
		MessageIDHeader: msgID + "@acme.test",
	}
	for i, r := range rcpts {
		typ, addr, ok := strings.Cut(r, ":")
		if !ok {
			typ, addr = ports.RecipientTo, r
		}
		rc := ports.Recipient{ID: fmt.Sprintf("r%d", i+1), Type: typ, Address: addr, Status: ports.StatusQueued}
		out.Recipients = append(out.Recipients, rc)
		out.Job.RecipientIDs = append(out.Job.RecipientIDs, rc.ID)
		switch typ {
		case ports.RecipientTo:
			out.To = append(out.To, addr)
		case ports.RecipientCc:
			out.Cc = append(out.Cc, addr)
		}
	}
	return out
}

// outcomes maps recipient id to "kind|response".
func outcomes(r ports.DeliveryReport) map[string]string {
	m := map[string]string{}
	for _, o := range r.Recipients {
		m[o.RecipientID] = string(o.Kind) + "|" + o.Response
	}
	return m
}
