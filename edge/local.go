package edge

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/postmill/postmill/ports"
)

// Local mode's routes: the mail catcher's page and its JSON API. They exist only once ServeLocal added them
// (POSTMILL_LOCAL=true); otherwise /local/* falls through to the usual 404. They take no credentials: local
// mode runs on one developer's machine, on loopback, like the catchers developers already use.
//
//	GET    /local/mail                                   the list page, newest first
//	GET    /local/mail/{id}                              one message: headers, HTML, text, attachments, raw, DKIM
//	GET    /local/mail/{id}/html                         the HTML part alone, for the page's sandboxed iframe
//	GET    /local/assets/{file}                          the page's stylesheet and script
//	GET    /local/api/messages                           JSON list, newest first
//	GET    /local/api/messages/{id}                      JSON message
//	GET    /local/api/messages/{id}/raw                  message/rfc822, as received
//	GET    /local/api/messages/{id}/attachments/{index}  one attachment, as a download
//	DELETE /local/api/messages                           delete every message
const localPrefix = "/local"

// htmlPartPolicy is the Content-Security-Policy of a message's HTML part. The part is whatever the sender
// wrote, so it runs nothing: sandbox (no scripts, no forms, no plugins, an opaque origin even when opened on
// its own), no requests beyond inline images (remote images and fonts stay unloaded, as a privacy-minded
// mail client shows them), and framing only by the edge's own page.
const htmlPartPolicy = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

// downloadPolicy is the policy of an attachment: a sandboxed document that loads nothing, should a
// browser render it despite Content-Disposition.
const downloadPolicy = "sandbox; default-src 'none'"

// ServeLocal adds local mode's routes over catcher, the mail catcher running in this process (a split
// deployment, whose catcher would live in another process, does not show one). The composition root calls
// it right after New, before the handler serves; without it the routes do not exist.
func (s *Server) ServeLocal(catcher ports.MailCatcher) error {
	if catcher == nil {
		return errors.New("edge: ServeLocal needs a mail catcher")
	}
	ui, err := newLocalUI()
	if err != nil {
		return fmt.Errorf("edge: loading the local mail pages: %w", err)
	}
	l := &localRoutes{catcher: catcher, ui: ui}
	s.mux.HandleFunc("GET "+localPrefix+"/mail", l.listPage)
	s.mux.HandleFunc("GET "+localPrefix+"/mail/{id}", l.messagePage)
	s.mux.HandleFunc("GET "+localPrefix+"/mail/{id}/html", l.htmlPart)
	s.mux.HandleFunc("GET "+localPrefix+"/assets/{file}", ui.serveAsset)
	s.mux.HandleFunc("GET "+localPrefix+"/api/messages", l.listJSON)
	s.mux.HandleFunc("DELETE "+localPrefix+"/api/messages", l.clear)
	s.mux.HandleFunc("GET "+localPrefix+"/api/messages/{id}", l.messageJSON)
	s.mux.HandleFunc("GET "+localPrefix+"/api/messages/{id}/raw", l.raw)
	s.mux.HandleFunc("GET "+localPrefix+"/api/messages/{id}/attachments/{index}", l.attachment)
	return nil
}

type localRoutes struct {
	catcher ports.MailCatcher
	ui      *localUI
}

// caughtJSON is a message in the JSON API.
type caughtJSON struct {
	ID           string           `json:"id"`
	ReceivedAt   time.Time        `json:"receivedAt"`
	EnvelopeFrom string           `json:"envelopeFrom"`
	EnvelopeTo   []string         `json:"envelopeTo"`
	Size         int64            `json:"size"`
	From         string           `json:"from"`
	To           []string         `json:"to"`
	Subject      string           `json:"subject"`
	DKIM         dkimJSON         `json:"dkim"`
	Headers      []headerJSON     `json:"headers,omitempty"`
	Text         *string          `json:"text,omitempty"`
	HTML         *string          `json:"html,omitempty"`
	Attachments  []attachmentJSON `json:"attachments,omitempty"`
}

type dkimJSON struct {
	Result   string `json:"result"`
	Domain   string `json:"domain,omitempty"`
	Selector string `json:"selector,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

type headerJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type attachmentJSON struct {
	Index       int    `json:"index"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	ContentID   string `json:"contentId,omitempty"`
	Inline      bool   `json:"inline"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
}

func summaryJSON(m ports.CaughtMessage) caughtJSON {
	to, envTo := m.To, m.EnvelopeTo
	if to == nil {
		to = []string{}
	}
	if envTo == nil {
		envTo = []string{}
	}
	return caughtJSON{
		ID: m.ID, ReceivedAt: m.ReceivedAt, EnvelopeFrom: m.EnvelopeFrom, EnvelopeTo: envTo, Size: m.Size,
		From: m.From, To: to, Subject: m.Subject,
		DKIM: dkimJSON{Result: m.DKIM.Result, Domain: m.DKIM.Domain, Selector: m.DKIM.Selector, Reason: m.DKIM.Reason},
	}
}

func contentJSON(c ports.CaughtContent) caughtJSON {
	out := summaryJSON(c.CaughtMessage)
	out.Text, out.HTML = &c.Text, &c.HTML
	out.Headers = make([]headerJSON, len(c.Headers))
	for i, h := range c.Headers {
		out.Headers[i] = headerJSON{Name: h.Name, Value: h.Value}
	}
	out.Attachments = make([]attachmentJSON, len(c.Attachments))
	for i, a := range c.Attachments {
		out.Attachments[i] = attachmentJSON{Index: a.Index, Filename: a.Filename, ContentType: a.ContentType,
			ContentID: a.ContentID, Inline: a.Inline, Size: a.Size, URL: attachmentURL(c.ID, a.Index)}
	}
	return out
}

func attachmentURL(id string, index int) string {
	return localPrefix + "/api/messages/" + id + "/attachments/" + strconv.Itoa(index)
}

func (l *localRoutes) listJSON(w http.ResponseWriter, r *http.Request) {
	list, err := l.catcher.ListCaught(r.Context())
	if err != nil {
		l.fail(w, r, err)
		return
	}
	out := make([]caughtJSON, len(list))
	for i, m := range list {
		out[i] = summaryJSON(m)
	}
	writeJSON(w, http.StatusOK, out)
}

func (l *localRoutes) messageJSON(w http.ResponseWriter, r *http.Request) {
	c, err := l.catcher.Caught(r.Context(), r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, contentJSON(c))
}

func (l *localRoutes) clear(w http.ResponseWriter, r *http.Request) {
	if err := l.catcher.ClearCaught(r.Context()); err != nil {
		l.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
}

// raw answers the message as received (RFC 2046 §5.2.1's message/rfc822); mail clients open the file.
func (l *localRoutes) raw(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	raw, err := l.catcher.CaughtRaw(r.Context(), id)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "message/rfc822")
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": id + ".eml"}))
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	_, _ = w.Write(raw)
}

// attachment answers one attachment as a download, whatever type it claims: its bytes are the sender's.
func (l *localRoutes) attachment(w http.ResponseWriter, r *http.Request) {
	index, err := strconv.Atoi(r.PathValue("index"))
	if err != nil || index < 0 {
		notFound(w, r)
		return
	}
	a, body, err := l.catcher.CaughtAttachment(r.Context(), r.PathValue("id"), index)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	name := a.Filename
	if name == "" {
		name = "attachment-" + strconv.Itoa(index)
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Content-Security-Policy", downloadPolicy)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// htmlPart answers a message's HTML part under htmlPartPolicy, for the iframe of the message page.
func (l *localRoutes) htmlPart(w http.ResponseWriter, r *http.Request) {
	c, err := l.catcher.Caught(r.Context(), r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", htmlPartPolicy)
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(c.HTML))
}

// fail answers a catcher error: not_found as 404, anything else as a logged 500.
func (l *localRoutes) fail(w http.ResponseWriter, r *http.Request, err error) {
	if ports.ErrorCode(err) != ports.CodeNotFound {
		logInternal(r.Context(), "mail catcher", err)
	}
	writeJSONError(w, problemFor(err))
}
