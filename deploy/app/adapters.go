package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/postmill/postmill/adapters/clamd"
	"github.com/postmill/postmill/adapters/dns"
	"github.com/postmill/postmill/adapters/fs"
	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/adapters/postgres"
	"github.com/postmill/postmill/adapters/react"
	"github.com/postmill/postmill/adapters/s3"
	webhookhttp "github.com/postmill/postmill/adapters/webhook"
	"github.com/postmill/postmill/core/scan"
	"github.com/postmill/postmill/ports"
)

// shared holds the adapters several tiers of one process use, built on first use so that a process only
// opens what its targets need (an edge-only process opens no queue, blob store or scanner).
type shared struct {
	mu       sync.Mutex
	queue    ports.Queue
	closers  []func()
	blobs    ports.BlobStore
	scanner  ports.Scanner
	resolver *dns.Resolver // also the DNSSEC resolver of the MTA's DANE checks (tier_mta_tls.go)
}

// queue returns the delivery queue of POSTMILL_QUEUE: PostgreSQL tables on the store's pool, or Kafka.
func (a *App) queue(ctx context.Context) (ports.Queue, error) {
	a.shared.mu.Lock()
	defer a.shared.mu.Unlock()
	if a.shared.queue != nil {
		return a.shared.queue, nil
	}
	switch a.cfg.Queue {
	case "kafka":
		q, err := kafka.New(ctx, kafka.Config{Brokers: a.cfg.KafkaBrokers, Logger: a.logger})
		if err != nil {
			return nil, fmt.Errorf("kafka queue: %w", err)
		}
		a.shared.queue = q
		a.shared.closers = append(a.shared.closers, q.Close)
	default:
		st := a.Store()
		if st == nil {
			return nil, fmt.Errorf("the PostgreSQL queue needs the store")
		}
		q := postgres.NewQueue(st.Pool(), postgres.QueueConfig{})
		st.EnqueueSendsOn(q) // sends write their jobs into the queue's table in their own transaction
		a.shared.queue = q
	}
	return a.shared.queue, nil
}

// blobStore returns the blob store of POSTMILL_BLOB: a directory under POSTMILL_DATA_DIR, or S3.
func (a *App) blobStore(ctx context.Context) (ports.BlobStore, error) {
	a.shared.mu.Lock()
	defer a.shared.mu.Unlock()
	if a.shared.blobs != nil {
		return a.shared.blobs, nil
	}
	var err error
	switch a.cfg.Blob {
	case "s3":
		a.shared.blobs, err = s3.New(ctx, s3.Config{Endpoint: a.cfg.S3Endpoint, Bucket: a.cfg.S3Bucket,
			AccessKey: a.cfg.S3AccessKey, SecretKey: a.cfg.S3SecretKey, Region: a.cfg.S3Region})
	default:
		a.shared.blobs, err = fs.New(filepath.Join(a.cfg.DataDir, "blobs"))
	}
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return a.shared.blobs, nil
}

// malwareScanner returns the scanner of POSTMILL_SCANNER: the builtin one or clamd.
func (a *App) malwareScanner() (ports.Scanner, error) {
	a.shared.mu.Lock()
	defer a.shared.mu.Unlock()
	if a.shared.scanner != nil {
		return a.shared.scanner, nil
	}
	if a.cfg.Scanner == "clamd" {
		s, err := clamd.New(clamd.Config{Addr: a.cfg.ClamdAddr})
		if err != nil {
			return nil, fmt.Errorf("clamd: %w", err)
		}
		a.shared.scanner = s
	} else {
		a.shared.scanner = scan.Builtin{}
	}
	return a.shared.scanner, nil
}

// dnsResolver returns the resolver of POSTMILL_DNS_RESOLVER (the system's when unset).
func (a *App) dnsResolver() ports.Resolver {
	a.shared.mu.Lock()
	defer a.shared.mu.Unlock()
	if a.shared.resolver == nil {
		a.shared.resolver = dns.New(a.cfg.DNSResolver, dns.Options{})
	}
	return a.shared.resolver
}

// webhookSender is the HTTP client of webhooks behind the SSRF guard, resolving through
// POSTMILL_DNS_RESOLVER and exempting POSTMILL_WEBHOOK_ALLOW_NETS (and loopback in local mode).
func (a *App) webhookSender() (ports.WebhookSender, error) {
	s, err := webhookhttp.New(webhookhttp.Config{AllowNets: a.webhookAllowNets()}, a.dnsResolver())
	if err != nil {
		return nil, fmt.Errorf("webhook sender: %w", err)
	}
	a.shared.mu.Lock()
	a.shared.closers = append(a.shared.closers, s.CloseIdleConnections)
	a.shared.mu.Unlock()
	return s, nil
}

// eventStream publishes every event to Kafka when the Kafka queue is configured; with PostgreSQL the
// events table is the stream and there is nothing more to do.
func (a *App) eventStream(ctx context.Context) (ports.EventStream, error) {
	if a.cfg.Queue != "kafka" {
		return nil, nil
	}
	s, err := kafka.NewEventStream(ctx, kafka.Config{Brokers: a.cfg.KafkaBrokers, Logger: a.logger})
	if err != nil {
		return nil, fmt.Errorf("kafka events stream: %w", err)
	}
	a.shared.mu.Lock()
	a.shared.closers = append(a.shared.closers, s.Close)
	a.shared.mu.Unlock()
	return s, nil
}

func (a *App) closeShared() {
	a.shared.mu.Lock()
	defer a.shared.mu.Unlock()
	for _, c := range a.shared.closers {
		c()
	}
	a.shared.closers = nil
}

// submissionTLS loads the certificate for STARTTLS on the submission port, when one is configured.
func (a *App) submissionTLS() (*tls.Config, error) {
	if a.cfg.SubmissionTLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(a.cfg.SubmissionTLSCert, a.cfg.SubmissionTLSKey)
	if err != nil {
		return nil, fmt.Errorf("submission certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// reactRenderer renders React Email sources for template versions, each in a child process of this
// executable under an address-space and a CPU-time limit (the executable serves react.ChildArg: the
// postmill binary's main and the end-to-end tests' TestMain do), with the adapter's default CPU, memory
// and concurrency bounds. A template is code from a tenant: a runaway one must not take the server's
// memory.
func (a *App) reactRenderer() (ports.ReactRenderer, error) {
	r, err := react.New(react.Config{Isolate: true})
	if err != nil {
		return nil, fmt.Errorf("react renderer: %w", err)
	}
	return r, nil
}
