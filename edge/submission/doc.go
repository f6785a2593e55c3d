// Package submission is Postmill's SMTP message submission server (RFC 6409) for SMTP credentials: a
// client authenticates with AUTH PLAIN (RFC 4616) or AUTH LOGIN, submits a message, and the message enters
// the same send path as POST /v1/emails — the core's EmailService.Send with the same checks and events.
//
// Policy:
//   - AUTH is offered and accepted only on a TLS connection (STARTTLS, RFC 3207, when a certificate is
//     configured) or when the client connects from a loopback address; anywhere else AUTH answers
//     538 5.7.11 (RFC 4954 §6) and EHLO does not advertise it, so passwords never cross a network in clear.
//   - MAIL, RCPT and DATA require a successful AUTH first: 530 5.7.0 (RFC 4954 §6).
//   - Failed AUTH attempts lock out: Config.AuthLockout's count of failures from one client address (an
//     IPv6 /64), or for one username from any address, makes AUTH answer 454 4.7.0 for a while without
//     asking the core, whatever the password; each further lockout of the same key lasts twice as long
//     (defaults: 5 per address, 10 per username, 1 minute doubling up to 1 hour).
//   - Connections: at most Config.MaxConnections sessions at once and MaxConnectionsPerIP per client
//     address (defaults 64 and 16); beyond either the client is greeted with 421 and disconnected.
//   - DATA (and BDAT, RFC 3030) is parsed as it arrives: the raw message is never held whole, an
//     attachment is refused as soon as it passes SPEC §8's 10 MiB (25 MiB for all), and a message past
//     Config.MaxMessageBytes (advertised as SIZE, RFC 1870; default 40 MiB) is refused with 552 5.3.4.
//   - 8BITMIME (RFC 6152) and SMTPUTF8 (RFC 6531) are offered: UTF-8 header fields (RFC 6532), 8-bit bodies
//     and UTF-8 mailboxes are taken as they are.
//   - Display names in To, Cc, From and Reply-To (quoted, RFC 2047-encoded in any charset, or raw UTF-8)
//     travel to the core with the address, which validates, suppresses and meters the address alone.
//   - The envelope decides who receives the message (RFC 5321 §3.3, RFC 5322 §3.6.3): To and Cc header
//     addresses that are also envelope recipients become To and Cc; every other envelope recipient becomes
//     Bcc; header addresses that are not envelope recipients are not sent to.
//   - From must hold exactly one address; the core refuses it unless its domain is a verified domain of the
//     credential's organization. Subject, Reply-To, the first text/plain and text/html body parts, and every
//     other part (attachments, and parts with a Content-ID as inline parts) are decoded into a
//     ports.SendRequest.
//     Custom X- header fields travel in Headers when their names match ^[A-Za-z0-9-]+$ and do not start with
//     X-Postmill- (names Postmill reserves for itself); every other header field of the submitted message is
//     replaced by what the MTA writes (Message-ID, Date, DKIM-Signature, ...).
//
// Replies to the send path come from one function, replyFor:
//
//	ports code          SMTP reply   why
//	(accepted)          250 2.0.0    Ok: queued as <message id>
//	invalid_argument    550 5.7.1    the message as given will never be accepted (validation, unknown or
//	                                 unverified domain, suppressed recipient, rejected attachment)
//	permission_denied   550 5.7.1    organization sending is paused
//	payment_required    550 5.7.0    the monthly allowance is exhausted for the rest of the calendar month;
//	                                 retrying within minutes or hours cannot succeed, so the reply is permanent
//	resource_exhausted  451 4.7.0    the daily warm-up cap (or a rate limit): try again later
//	unauthenticated     535 5.7.8    bad credentials (RFC 4954 §6)
//	internal            451 4.3.0    temporary local problem; during AUTH 454 4.7.0 (RFC 4954 §6)
//
// Replies that do not come from the core: 530 5.7.0 (no AUTH yet), 538 5.7.11 (plaintext AUTH from a
// remote client), 454 4.7.0 (locked out after failed AUTH attempts, with the wait in seconds), 421 4.3.2
// and 421 4.7.0 (connection limits, at connect), 552 5.3.4 (message too large).
//
// The package imports ports, adapters/smtpd (the listener lifecycle and reply-line helpers it shares with
// the inbound tier) and go-smtp/go-message/go-sasl, never the core (STYLE.md §1).
package submission
