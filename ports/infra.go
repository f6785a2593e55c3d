package ports

import (
	"context"
	"net/netip"
	"time"
)

// Infrastructure ports: what the core and the tiers need from engines outside Postmill (time, the queue,
// blob storage, the malware scanner, DNS, the analytics event stream, health checks). Adapters implement
// them; nothing here is a use case.

// Clock tells the time; the core never calls time.Now directly so tests can move it.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// Pinger reports whether a backing engine answers (for /readyz).
type Pinger interface {
	Ping(ctx context.Context) error
}

// LeaseRenewer is implemented by deliveries whose queue hides a received job only for a lease (the
// PostgreSQL queue). A consumer renews while the work is still under way — a slow receiver may take many
// minutes under RFC 5321 §4.5.3.2's timeouts — so the job is not handed to another consumer meanwhile.
// Renew returns failed_precondition once the lease is lost.
type LeaseRenewer interface {
	Renew(ctx context.Context) error
}

// Delivery is one received job. Exactly one of Ack, Nack, NackAfter, HandBack or DeadLetter is called: Ack
// after the outcome is recorded, Nack or NackAfter to have it delivered again, HandBack to return a job
// that was not worked on, DeadLetter to take it out of circulation. A delivery neither acked nor nacked (a
// crash) is redelivered.
type Delivery interface {
	Job() DeliveryJob
	// Deliveries counts the times the job was handed out, this one included: 1 the first time. Every Nack
	// and NackAfter counts; a redelivery after a crash or an expired lease counts where the queue can tell
	// (PostgreSQL does; Kafka does not). Consumers cap their retries with it.
	Deliveries() int
	Ack(ctx context.Context) error
	// Nack hands the job out again at once.
	Nack(ctx context.Context) error
	// NackAfter hands the job out again once delay has passed, not before, so that a failure that recurs is
	// retried with backoff rather than at full speed.
	NackAfter(ctx context.Context, delay time.Duration) error
	// HandBack is NackAfter for a job the consumer received but did not work on (its destination's turn
	// has not come): the job is handed out again once delay has passed, and this delivery is not counted,
	// so however often a job waits for its turn, Deliveries still counts only the times it was tried.
	HandBack(ctx context.Context, delay time.Duration) error
	// DeadLetter takes the job out of circulation for good and keeps it, with reason, where an operator
	// can see it and put it back (PostgreSQL: the row stays with dead_at and dead_reason; Kafka: the
	// dead-letter topic). It is for a job whose outcome cannot be recorded at all.
	DeadLetter(ctx context.Context, reason string) error
}

// Queue carries delivery jobs from the relay to the MTA tier, at least once. The PostgreSQL adapter leases
// rows (FOR UPDATE SKIP LOCKED, leases that expire); the Kafka adapter uses a topic keyed by recipient
// domain and a consumer group, committing offsets only after Ack.
type Queue interface {
	Publish(ctx context.Context, jobs []DeliveryJob) error
	// Receive returns between 1 and max deliveries, blocking until some are available or ctx ends.
	Receive(ctx context.Context, max int) ([]Delivery, error)
}

// BulkBacklog is implemented by a Queue that can tell how far behind its consumers are with broadcast work.
// The broadcast expander uses it to stay a bounded time ahead of the MTA (docs/decisions.md, "Broadcast
// pacing").
type BulkBacklog interface {
	// BulkWait is how long the oldest bulk job ready for delivery (neither leased nor waiting for a retry)
	// has been ready: zero when there is none.
	BulkWait(ctx context.Context) (time.Duration, error)
}

// TransactionalSignal is implemented by a Queue that can tell a consumer that transactional jobs
// (DeliveryJob.Bulk false) have just been queued: by this process, and by others where the queue can
// announce them across processes. The MTA leases jobs in batches and, while a broadcast keeps its worker
// slots busy, waits a moment for a batch's worth of them to free up; a signal ends that wait, so a receipt
// is leased with the next free slot instead of the next batch. Jobs whose queueing is not signalled are
// leased with the next batch, as without it.
type TransactionalSignal interface {
	// TransactionalQueued returns a channel that receives a value after transactional jobs were queued;
	// one value may stand for several queueings, and the channel is never closed.
	TransactionalQueued() <-chan struct{}
}

// BlobStore keeps attachment bytes and raw inbound mail under generated keys.
type BlobStore interface {
	Put(ctx context.Context, key string, data []byte, contentType string) error
	Get(ctx context.Context, key string) ([]byte, error) // Errors: not_found
	Delete(ctx context.Context, key string) error        // deleting a missing key is not an error
}

// ScanVerdict is a malware scanner's answer.
type ScanVerdict struct {
	Clean     bool
	Signature string // what was found, when not clean
}

// Scanner inspects content before Postmill accepts it.
type Scanner interface {
	Scan(ctx context.Context, filename, contentType string, data []byte) (ScanVerdict, error)
}

// MX is one mail exchanger.
type MX struct {
	Host       string // without the trailing dot
	Preference uint16
}

// DNSErrorKind distinguishes answers that mean "no such data" from failures worth retrying.
type DNSErrorKind string

// DNS outcomes other than an answer.
const (
	DNSNotFound  DNSErrorKind = "nxdomain"  // the name does not exist
	DNSNoData    DNSErrorKind = "nodata"    // the name exists, the type does not
	DNSTemporary DNSErrorKind = "temporary" // SERVFAIL, timeout, refused: try again later
)

// DNSError is what a Resolver returns instead of an answer.
type DNSError struct {
	Kind DNSErrorKind
	Name string
	Err  error
}

// Error implements error.
func (e *DNSError) Error() string {
	if e.Err != nil {
		return "dns " + string(e.Kind) + " for " + e.Name + ": " + e.Err.Error()
	}
	return "dns " + string(e.Kind) + " for " + e.Name
}

// Unwrap exposes the cause.
func (e *DNSError) Unwrap() error { return e.Err }

// Resolver answers the DNS questions Postmill asks: domain verification, MX routing, webhook hosts. Every
// lookup goes to POSTMILL_DNS_RESOLVER (or the system's) so tests and private deployments control answers.
// Failures are *DNSError.
type Resolver interface {
	// LookupTXT returns each TXT record with its character-strings joined.
	LookupTXT(ctx context.Context, name string) ([]string, error)
	// LookupCNAME returns the CNAME target without the trailing dot.
	LookupCNAME(ctx context.Context, name string) (string, error)
	// LookupMX returns the MX records sorted by preference. A null MX (RFC 7505) is returned as one
	// record with Host "".
	LookupMX(ctx context.Context, name string) ([]MX, error)
	// LookupIP returns the A and AAAA addresses of host.
	LookupIP(ctx context.Context, host string) ([]netip.Addr, error)
}

// TLSA is one TLSA record (RFC 6698 §2.1): which certificate of a TLS server's chain it names (Usage),
// which part of it (Selector: 0 the whole certificate, 1 its SubjectPublicKeyInfo) and how (MatchingType: 0
// the bytes themselves, 1 their SHA-256, 2 their SHA-512).
type TLSA struct {
	Usage        uint8 // 0 PKIX-TA, 1 PKIX-EE, 2 DANE-TA, 3 DANE-EE (RFC 7218)
	Selector     uint8
	MatchingType uint8
	Data         []byte
}

// DNSSECResolver answers the lookups whose worth depends on DNSSEC: DANE for SMTP (RFC 7672) may only use
// records a validating resolver authenticated. authenticated is the AD bit of the answer (RFC 4035 §3.2.3,
// RFC 6840 §5.8), so POSTMILL_DNS_RESOLVER must be a validating resolver reached over a path Postmill trusts
// (loopback, or the operator's own network): an attacker between the two could set the bit. It is a port of
// its own, beside Resolver, so that only what needs DNSSEC depends on it. Failures are *DNSError, as for
// Resolver; the authenticated flag means something only when err is nil.
type DNSSECResolver interface {
	// LookupTLSA returns the TLSA records at name (for SMTP, "_25._tcp." + the MX host, RFC 7672 §2.2).
	LookupTLSA(ctx context.Context, name string) (records []TLSA, authenticated bool, err error)
	// LookupMXAuthenticated is LookupMX that also says whether the MX records were authenticated: DANE
	// applies to an MX host only when the MX RRset that named it was (RFC 7672 §2.2.1).
	LookupMXAuthenticated(ctx context.Context, name string) (mxs []MX, authenticated bool, err error)
}

// EventStream carries every event to the analytics tier: a Kafka topic keyed by message id, or nothing
// extra when the events table itself is the stream.
type EventStream interface {
	Publish(ctx context.Context, events []Event) error
}
