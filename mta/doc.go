// Package mta is Postmill's delivery tier: it will consume delivery work, build and DKIM-sign MIME, and
// deliver over SMTP with per-destination limits. Until the sending work lands, the composition root runs
// the tier as an idle service so that `--target=mta` starts and stops cleanly.
package mta
