// Package inbound is Postmill's MX tier: an SMTP listener (POSTMILL_SMTP_ADDR) for mail about mail
// Postmill sent. Bounces arrive at the VERP return paths the MTA put in MAIL FROM, usually long after the
// remote server answered 250 (asynchronous bounces, RFC 3464 §1); feedback reports (RFC 5965) arrive at
// the feedback-loop address. The tier receives and parses; the core's ports.FeedbackService decides:
// which recipients exist, which message and recipient a report is about, hard or soft.
//
// Policy:
//   - No AUTH and no TLS requirement: an MX takes mail from any host (RFC 5321 §2.3.5).
//   - At most Config.MaxConnections sessions at once and Config.MaxConnectionsPerIP from one client
//     address (an IPv6 /64), each idle at most Config.ReadTimeout (Defaults: 64, 8, one minute); a client
//     beyond a limit is greeted with 421 and retries (RFC 5321 §3.8).
//   - MAIL FROM accepts any reverse path; bounces come from the null path <> (RFC 3464 §2, RFC 5321
//     §4.5.5). SMTPUTF8 is offered because DSNs about internationalized mail are sent with it (RFC 6533).
//   - RCPT asks FeedbackService.AcceptsRecipient; everything else is refused at RCPT time, so unknown
//     recipients never cost a DATA transfer.
//   - DATA reads the message (bounded by Config.MaxMessageBytes, advertised as SIZE, RFC 1870), parses it
//     once and calls RecordBounce or RecordComplaint once for each accepted recipient, with Rcpt set to
//     that recipient and ArrivedAt to the time of DATA.
//
// What is read (dsn.go, arf.go, nonstandard.go): an RFC 3464 delivery status notification (the
// message/delivery-status part, or RFC 6533's message/global-delivery-status), an RFC 5965 feedback report
// (message/feedback-report), and three plain-text bounce formats (qmail, Exim, and a generic mailer-daemon
// text with an address and an SMTP reply code; their exact rules are in nonstandard.go). Mail that is none
// of these, above all RFC 3834 auto-replies ("out of office") sent to a return path, is accepted and
// dropped: refusing it could start a loop of notices.
//
// Replies:
//
//	situation                                  SMTP reply   why
//	RCPT: not an address Postmill takes mail   550 5.1.1    the mailbox does not exist (RFC 3463 §3.2)
//	for (AcceptsRecipient false, or
//	invalid_argument/not_found)
//	RCPT: the core failed (internal, ...)      451 4.3.0    try again later
//	DATA: report recorded (nil, or             250 2.0.0    Ok: bounce recorded / Ok: complaint recorded
//	already_exists) for at least one RCPT
//	DATA: neither a report nor a bounce        250 2.0.0    accepted and discarded (RFC 3834 §5)
//	DATA: unparseable report, or the core      550 5.6.0    the report will never map to a message
//	answered invalid_argument, not_found,                   Postmill sent; the sender is <> or a
//	failed_precondition or permission_denied                report mailbox, so no bounce loop starts
//	for every RCPT
//	DATA: the core failed for any RCPT         451 4.3.0    the sender retries the whole message;
//	(internal, resource_exhausted, ...)                     recording a bounce again changes nothing
//	DATA: larger than MaxMessageBytes          552 5.3.4    go-smtp's size limit (RFC 1870)
//	connect: MaxConnections reached            421 4.3.2    try again later; the connection is closed
//	connect: MaxConnectionsPerIP reached       421 4.7.0    likewise, for that client address
//	no command within ReadTimeout              421 4.4.2    idle timeout; the connection is closed
//
// The package imports ports, adapters/smtpd (the listener lifecycle and reply-line helpers it shares with
// SMTP submission) and go-smtp/go-message, never the core (STYLE.md §1).
package inbound
