package mta

import (
	"container/list"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/postmill/postmill/ports"
)

// signDKIM prepends a DKIM-Signature (RFC 6376) to raw: rsa-sha256, relaxed/relaxed canonicalization
// (§3.4.2 and §3.4.4, which survive the header refolding and trailing-space changes relays make),
// d= the From domain, s= its selector, covering the header fields in keys.
func signDKIM(raw []byte, keys []string, out ports.OutboundMessage, key crypto.Signer) ([]byte, error) {
	s, err := dkim.NewSigner(&dkim.SignOptions{
		Domain:                 out.DKIMDomain,
		Selector:               out.DKIMSelector,
		Signer:                 key,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
		HeaderKeys:             keys,
	})
	if err != nil {
		return nil, permanentf("5.7.0 DKIM signing not possible: %v", err)
	}
	if _, err := s.Write(raw); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	sig := s.Signature()
	signed := make([]byte, 0, len(sig)+len(raw))
	signed = append(signed, sig...)
	return append(signed, raw...), nil
}

// keyCache keeps parsed DKIM keys: parsing and validating an RSA key costs more than a third of a
// signature, and every message of a domain uses the same key.
type keyCache struct {
	mu   sync.Mutex
	keys map[[32]byte]crypto.Signer
}

const maxCachedKeys = 4096

func (c *keyCache) signer(der []byte) (crypto.Signer, error) {
	if len(der) == 0 {
		return nil, permanentf("5.7.0 no DKIM key for the sending domain")
	}
	id := sha256.Sum256(der)
	c.mu.Lock()
	k, ok := c.keys[id]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, permanentf("5.7.0 the DKIM key of the sending domain is unusable")
	}
	k, ok = parsed.(crypto.Signer)
	if !ok {
		return nil, permanentf("5.7.0 the DKIM key of the sending domain is unusable")
	}
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCachedKeys {
		c.keys = make(map[[32]byte]crypto.Signer)
	}
	c.keys[id] = k
	c.mu.Unlock()
	return k, nil
}

// signedCache keeps the signed bytes of messages whose recipients span several domains, so that each of
// the message's jobs (one per recipient domain) sends the same bytes and DKIM runs once per message.
// Concurrent jobs of one message wait for the first to finish signing. Entries live for signedCacheTTL
// and the cache holds at most signedCacheBytes.
type signedCache struct {
	mu      sync.Mutex
	entries map[string]*list.Element
	order   list.List // *signedEntry, oldest first
	size    int
	now     func() time.Time
}

const (
	signedCacheTTL   = 10 * time.Minute
	signedCacheBytes = 64 << 20
)

type signedEntry struct {
	key     string
	ready   chan struct{}
	data    []byte
	err     error
	expires time.Time
	done    bool // built and counted in size; guarded by signedCache.mu
}

// get returns the cached bytes for key or runs build once for all concurrent callers.
func (c *signedCache) get(key string, build func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[string]*list.Element)
	}
	c.evictLocked()
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*signedEntry)
		c.mu.Unlock()
		<-e.ready
		return e.data, e.err
	}
	e := &signedEntry{key: key, ready: make(chan struct{}), expires: c.now().Add(signedCacheTTL)}
	c.entries[key] = c.order.PushBack(e)
	c.mu.Unlock()

	e.data, e.err = build()

	c.mu.Lock()
	if e.err != nil || len(e.data) > signedCacheBytes {
		if el, ok := c.entries[key]; ok && el.Value == e {
			delete(c.entries, key)
			c.order.Remove(el)
		}
	} else {
		e.done = true
		c.size += len(e.data)
		c.evictLocked()
	}
	c.mu.Unlock()
	close(e.ready)
	return e.data, e.err
}

// evictLocked drops expired entries and the oldest ones beyond the byte budget. Entries are in expiry
// order because the TTL is constant; entries still being built are left to their builder.
func (c *signedCache) evictLocked() {
	now := c.now()
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		e := el.Value.(*signedEntry)
		if !now.After(e.expires) && c.size <= signedCacheBytes {
			return
		}
		if e.done {
			c.order.Remove(el)
			delete(c.entries, e.key)
			c.size -= len(e.data)
		}
		el = next
	}
}
