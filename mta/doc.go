// Package mta is Postmill's delivery tier. It receives delivery jobs from the Queue port, loads each
// job's message through the DeliveryService port, builds the RFC 5322 message with go-message, signs it
// with DKIM (RFC 6376, rsa-sha256, relaxed/relaxed) using the sending domain's key and selector, and
// delivers it over SMTP with go-smtp in ONE transaction per job (one MAIL FROM with the VERP return path,
// one RCPT TO per recipient of the job's domain).
//
// Routing follows RFC 5321 §5.1: the recipient domain's MX hosts in preference order, the domain's own
// A/AAAA records when it has no MX (implicit MX), and an immediate bounce for a null MX (RFC 7505); or,
// when a relay is configured, the relay with AUTH PLAIN; before any of these, mail for
// Config.SimulatorDomain goes to the mailbox simulator of this process (mta/simulator). Every MX and
// implicit-MX address passes the forbidden-address rule of ports/netguard first (Config.AllowNets
// exempts; the relay is trusted): a domain whose hosts have only forbidden addresses fails without any
// connection. STARTTLS (RFC 3207) is used whenever offered; a refusal or a failed handshake falls back to
// plaintext, noted in the outcome and counted, unless Config.RequireTLS or Deps.TLSPolicy requires TLS
// for the domain. Deps.Transport (mta/tlspolicy) adds the recipient domain's MTA-STS policy and its MX
// hosts' DANE records: which hosts may be used, and whether and how their certificates are checked, with
// every session under a policy counted for TLS-RPT (security.go); every outcome says which TLS carried it.
// Connections are pooled per destination host:port, capped by Config.Concurrency, and carry one
// transaction after another (RFC 5321 §3.3, RSET in between) until idle for Config.IdleConnTimeout. Destinations
// roll up by MX into sites (site.go), each with its own connection limit, GCRA message rate, messages per
// connection and idle timeout (Config.Shaping), lowered when the site answers 421 and recovered slowly. When the
// server offers PIPELINING (RFC 2920), MAIL, the RCPTs and DATA go in one group and the content in a second
// write: two round trips per message, each recipient still decided by its own RCPT reply. When it offers
// CHUNKING (RFC 3030) as well, as Gmail, Outlook and Postfix do, the content goes in the first write as one
// "BDAT <size> LAST" chunk instead of DATA: one round trip per message (Config.NoChunking turns it off). A
// server that refuses recipients beyond its limit (RFC 5321 §4.5.3.1.8 and §4.5.3.1.10: 452) gets the
// rest in further transactions; every line stays within §4.5.3.1.6's 1000 octets (quoted-printable,
// base64 and folded header fields).
//
// Every recipient's outcome goes back to the core in one DeliveryReport: delivered (250 after DATA or BDAT, with
// the server's reply), deferred (4xx, 421, unreachable, DNS trouble), bounced (5xx, null MX) or failed (a
// domain without any route, a message that cannot be built). Every response is cleaned of control bytes
// and bounded before it is stored. A job accepted by a server is journaled (fsynced) before it is
// reported, so a redelivery after a failed report reports again instead of sending again; a job that
// cannot be settled comes back after an exponential backoff and is dead-lettered at Config.MaxDeliveries.
// The tier imports ports and libraries only.
package mta
