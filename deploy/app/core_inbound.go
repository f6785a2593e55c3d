package app

import (
	"fmt"

	"github.com/postmill/postmill/adapters/spamd"
	"github.com/postmill/postmill/core/inbound"
	mx "github.com/postmill/postmill/inbound"
	"github.com/postmill/postmill/ports"
)

// coreInbound builds inbound mail: inbound domains (MX checked through the resolver), routes, receiving
// (raw mail to the blob store, attachments through the malware scanner, a spam verdict that is ham until a
// spam adapter is configured), the received-mail API (attachments derived from the raw message by the
// inbound tier's MIME walk, mx.Parts), and the loop posting webhook routes' requests through the webhook
// sender's SSRF guard.
func (a *App) coreInbound(env *coreEnv) error {
	blobs, err := a.blobStore(env.ctx)
	if err != nil {
		return err
	}
	scanner, err := a.malwareScanner()
	if err != nil {
		return err
	}
	sender, err := a.webhookSender()
	if err != nil {
		return err
	}
	spam, err := spamChecker(a.cfg.Inbound)
	if err != nil {
		return err
	}
	svc, err := inbound.New(inbound.Config{MXHost: a.cfg.InboundMXHost, Schedule: a.cfg.WebhookSchedule}, inbound.Deps{
		Store: env.store.Inbound, Resolver: a.dnsResolver(), Blobs: blobs, Scanner: scanner, Parts: mx.Parts{}, Spam: spam,
		Sender: sender, Keyring: env.keyring, Emails: env.core.Emails, Domains: env.core.Domains,
		Clock: env.clock, Logger: env.logger,
	})
	if err != nil {
		return err
	}
	env.loops = append(env.loops, svc.RunActions)
	env.core.Inbound = svc
	env.core.Receiving = svc
	return nil
}

// spamChecker is the spam checker of POSTMILL_SPAM (validated with the configuration): "spamd" asks
// SpamAssassin's spamd at POSTMILL_SPAMD_ADDR; unset (or "ham") judges every message ham.
func spamChecker(c InboundConfig) (ports.SpamChecker, error) {
	switch c.Spam {
	case "", "ham":
		return inbound.Ham{}, nil
	case "spamd":
		return spamd.New(spamd.Config{Addr: c.SpamdAddr})
	default:
		return nil, fmt.Errorf("POSTMILL_SPAM: %q is not ham or spamd", c.Spam)
	}
}
