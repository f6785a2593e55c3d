package marketing

import (
	"context"
	"fmt"
	"html"
	"net/mail"
	"strings"

	"github.com/postmill/postmill/ports"
)

const (
	msgConfirmFrom         = "must be an email address, at most 320 characters"
	msgConfirmFromDomain   = "must be an address at a verified sending domain of the organization"
	msgConfirmFromDisabled = "confirmation mails are not available on this installation"
)

// checkConfirmFromSyntax checks a topic's confirmFrom as written: empty (no confirmation mail) or one
// address, with or without a display name.
func (v *violations) checkConfirmFromSyntax(from *string) {
	if from == nil || *from == "" {
		return
	}
	if len(*from) > ports.MaxContactEmailLen || strings.ContainsAny(*from, "\r\n") || !storable(*from) {
		v.add("confirmFrom", msgConfirmFrom)
		return
	}
	if _, err := mail.ParseAddress(*from); err != nil {
		v.add("confirmFrom", msgConfirmFrom)
	}
}

// checkConfirmFromDomain checks that a topic's confirmFrom is at a verified sending domain of the
// organization, as a broadcast's from must be: the send would be refused otherwise, after the
// subscription was recorded.
func (b *base) checkConfirmFromDomain(ctx context.Context, orgID string, from *string) error {
	if from == nil || *from == "" {
		return nil
	}
	if b.confirmations == nil {
		return ports.ValidationError(ports.FieldViolation{Path: "confirmFrom", Message: msgConfirmFromDisabled})
	}
	a, _ := mail.ParseAddress(*from) // checked by checkConfirmFromSyntax
	domain := strings.ToLower(a.Address[strings.LastIndexByte(a.Address, '@')+1:])
	d, err := b.confirmations.Domains.DomainByName(ctx, orgID, domain)
	if ports.ErrorCode(err) == ports.CodeNotFound || (err == nil && d.Status != ports.DomainVerified) {
		return ports.ValidationError(ports.FieldViolation{Path: "confirmFrom", Message: msgConfirmFromDomain})
	}
	if err != nil {
		return fmt.Errorf("marketing: confirmFrom domain: %w", err)
	}
	return nil
}

// mailConfirmation sends a pending subscription its confirmation link from the topic's ConfirmFrom,
// through the send path, and records the outcome on res: the message id, or why the send was refused (a
// suppressed address, the plan's allowance, a domain no longer verified). The subscription stays
// recorded either way; a refusal is not the subscribe call's error (a failure of the platform is).
func (b *base) mailConfirmation(ctx context.Context, orgID string, topic ports.Topic, res *ports.SubscriptionResult) error {
	if b.confirmations == nil || topic.ConfirmFrom == "" || res.ConfirmToken == "" {
		return nil
	}
	link := strings.TrimRight(b.confirmations.BaseURL, "/") + "/p/confirm/" + res.ConfirmToken
	name := strings.Join(strings.Fields(topic.Name), " ") // one line, whatever the name holds
	sent, err := b.confirmations.Emails.Send(ctx, orgID, ports.SendRequest{
		From:    topic.ConfirmFrom,
		To:      []string{res.Subscription.Email},
		Subject: "Confirm your subscription to " + name,
		Text: "Please confirm that you want to receive " + name + ":\n\n" + link + "\n\n" +
			"If you did not ask for it, ignore this message: nothing will be sent to you.\n",
		HTML: "<p>Please confirm that you want to receive " + html.EscapeString(name) + ".</p>\n" +
			`<p><a href="` + html.EscapeString(link) + `">Confirm my subscription</a></p>` + "\n" +
			"<p>If you did not ask for it, ignore this message: nothing will be sent to you.</p>\n",
		Tags: map[string]string{"postmill": "topic-confirmation"},
	})
	if e, ok := ports.AsError(err); ok && e.Code != ports.CodeInternal {
		res.ConfirmationError = e
		return nil
	}
	if err != nil {
		return fmt.Errorf("marketing: confirmation mail: %w", err)
	}
	res.ConfirmationEmailID = sent.ID
	return nil
}
