// Package inbound is Postmill's MX tier: it will accept mail for customer inbound domains, bounces (VERP
// return paths), complaints (ARF) and DMARC reports. Until that work lands, the composition root runs the
// tier as an idle service so that `--target=inbound` starts and stops cleanly.
package inbound
