package edge

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// localFiles are the mail catcher's page templates, stylesheet and script, compiled in so the page works
// with no network; the edge's policy (script-src 'self'; style-src 'self') allows them because they are
// served from /local/assets rather than inlined.
//
//go:embed localui
var localFiles embed.FS

// maxRawShown bounds the raw source printed on a message's page; the whole message is one click away.
const maxRawShown = 256 << 10

// localUI holds the parsed templates and the assets.
type localUI struct {
	list    *template.Template
	message *template.Template
	assets  map[string]*docsAsset
}

func newLocalUI() (*localUI, error) {
	funcs := template.FuncMap{
		"dkim":  dkimLine,
		"when":  func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05 MST") },
		"join":  strings.Join,
		"bytes": humanBytes,
		"attachmentURL": func(id string, index int) string {
			return attachmentURL(id, index)
		},
	}
	list, err := template.New("list.html").Funcs(funcs).ParseFS(localFiles, "localui/layout.html", "localui/list.html")
	if err != nil {
		return nil, err
	}
	message, err := template.New("message.html").Funcs(funcs).ParseFS(localFiles, "localui/layout.html", "localui/message.html")
	if err != nil {
		return nil, err
	}
	ui := &localUI{list: list, message: message, assets: map[string]*docsAsset{}}
	for _, name := range []string{"local.css", "local.js"} {
		body, err := localFiles.ReadFile("localui/" + name)
		if err != nil {
			return nil, err
		}
		ui.assets[name] = localAsset(name, body)
	}
	return ui, nil
}

// dkimLine is how a verification result reads on the page: "DKIM: pass", "DKIM: fail: body hash did not
// verify", "DKIM: none".
func dkimLine(d ports.DKIMResult) string {
	line := "DKIM: " + d.Result
	if d.Reason != "" && d.Result != ports.DKIMPass && d.Result != ports.DKIMNone {
		line += ": " + d.Reason
	}
	return line
}

// humanBytes is a size the way the page shows it: "512 B", "3.4 KiB", "12.0 MiB".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// localAsset is an embedded file of the page, served like the API reference's assets (ETag, gzip).
func localAsset(name string, body []byte) *docsAsset {
	sum := sha256.Sum256(body)
	return &docsAsset{name: name, contentType: docsContentTypes[path.Ext(name)], body: body,
		etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func (u *localUI) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := u.assets[r.PathValue("file")]
	if !ok {
		notFound(w, r)
		return
	}
	a.serve(w, r)
}

// render writes a page, or a logged 500 when the template fails (before anything is sent).
func render(w http.ResponseWriter, r *http.Request, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		logInternal(r.Context(), "local page", err)
		writeJSONError(w, statusProblem(http.StatusInternalServerError, ""))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_, _ = buf.WriteTo(w)
}

func (l *localRoutes) listPage(w http.ResponseWriter, r *http.Request) {
	list, err := l.catcher.ListCaught(r.Context())
	if err != nil {
		l.fail(w, r, err)
		return
	}
	render(w, r, l.ui.list, map[string]any{"Title": "Caught mail", "Messages": list})
}

func (l *localRoutes) messagePage(w http.ResponseWriter, r *http.Request) {
	c, err := l.catcher.Caught(r.Context(), r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	raw, err := l.catcher.CaughtRaw(r.Context(), c.ID)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	shown, cut := raw, false
	if len(shown) > maxRawShown {
		shown, cut = shown[:maxRawShown], true
	}
	render(w, r, l.ui.message, map[string]any{
		"Title": c.Subject, "M": c, "Raw": strings.ToValidUTF8(string(shown), "\uFFFD"), "RawCut": cut,
		"HTMLURL": localPrefix + "/mail/" + c.ID + "/html", "RawURL": localPrefix + "/api/messages/" + c.ID + "/raw",
	})
}
