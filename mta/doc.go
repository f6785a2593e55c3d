// Package mta is Postmill's delivery tier. It receives delivery jobs from the Queue port, loads each
// job's message through the DeliveryService port, builds the RFC 5322 message with go-message, signs it
// with DKIM (RFC 6376, rsa-sha256, relaxed/relaxed) using the sending domain's key and selector, and
// delivers it over SMTP with go-smtp in ONE transaction per job (one MAIL FROM with the VERP return path,
// one RCPT TO per recipient of the job's domain).
//
// Routing follows RFC 5321 §5.1: the recipient domain's MX hosts in preference order, the domain's own
// A/AAAA records when it has no MX (implicit MX), and an immediate bounce for a null MX (RFC 7505); or,
// when a relay is configured, the relay with AUTH PLAIN. STARTTLS (RFC 3207) is used whenever offered.
// Connections are pooled per destination host:port, capped by Config.Concurrency, and carry one
// transaction after another (RFC 5321 §3.3, RSET in between) until idle for Config.IdleConnTimeout. A
// server that refuses recipients beyond its limit (RFC 5321 §4.5.3.1.8 and §4.5.3.1.10: 452) gets the
// rest in further transactions; every line stays within §4.5.3.1.6's 1000 octets (quoted-printable,
// base64 and folded header fields).
//
// Every recipient's outcome goes back to the core in one DeliveryReport: delivered (250 after DATA, with
// the server's reply), deferred (4xx, 421, unreachable, DNS trouble), bounced (5xx, null MX) or failed (a
// domain without any route, a message that cannot be built). The tier imports ports and libraries only.
package mta
