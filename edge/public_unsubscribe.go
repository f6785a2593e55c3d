package edge

import (
	_ "embed"
	"html/template"
	"net/http"
	"strings"

	"github.com/postmill/postmill/ports"
)

// The one-click unsubscribe pages (SPEC §4.10, §4.11; RFC 8058). Every broadcast message carries
// List-Unsubscribe: <{base_url}/p/u/<token>> and List-Unsubscribe-Post: List-Unsubscribe=One-Click.
//
//   - GET /p/u/{token} shows a confirmation page with one button and changes nothing, so a mail scanner
//     that prefetches links unsubscribes no one.
//   - POST /p/u/{token} unsubscribes: the page's button, and the mailbox provider's one-click POST with
//     the form body List-Unsubscribe=One-Click (RFC 8058 §3.2). Repeating it is harmless.
//
// The token is opened in the core (ports.PublicUnsubscribeService): the edge holds no keyring. A bad,
// stale or foreign token gets the same 400 page whatever the reason. With Accept: application/json both
// routes answer JSON instead of HTML. The pages are plain server-rendered HTML under the edge's strict
// Content-Security-Policy: no script, and one embedded stylesheet served from the same origin.

//go:embed publicui/unsubscribe.css
var unsubscribeCSS []byte

// unsubscribeCSSPath is where the page's stylesheet is served.
const unsubscribeCSSPath = "/p/assets/unsubscribe.css"

// maxUnsubscribeToken bounds the token read from the path before the core opens it.
const maxUnsubscribeToken = 512

func (s *Server) registerUnsubscribeRoutes() {
	if s.core.Unsubscribe == nil {
		return
	}
	s.mux.HandleFunc("GET /p/u/{token}", s.unsubscribePage)
	s.mux.HandleFunc("POST /p/u/{token}", s.unsubscribePost)
	s.mux.HandleFunc("GET "+unsubscribeCSSPath, serveStylesheet(unsubscribeCSS))
}

// serveStylesheet serves one of the public pages' embedded stylesheets, cacheable for a day.
func serveStylesheet(css []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/css; charset=utf-8")
		h.Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write(css)
	}
}

var unsubscribeTemplate = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{{.Title}}</title>
<link rel="stylesheet" href="` + unsubscribeCSSPath + `">
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{- if .Invalid}}
<p>This unsubscribe link is not valid. It may have been copied incompletely.</p>
<p class="note">If you keep receiving mail you did not ask for, reply to the sender or use your mail app's unsubscribe option.</p>
{{- else if .Done}}
<p>Done. <span class="addr">{{.Email}}</span> will no longer receive {{if .Topic}}“{{.Topic}}”{{else}}these emails{{end}}.</p>
{{- if .Prefs}}
<p class="note"><a href="/p/prefs/{{.Prefs}}">Choose which emails you get</a></p>
{{- end}}
{{- else}}
<p>Stop sending {{if .Topic}}“{{.Topic}}”{{else}}these emails{{end}} to <span class="addr">{{.Email}}</span>?</p>
<form method="post" action="">
<button type="submit" name="List-Unsubscribe" value="One-Click">Unsubscribe</button>
</form>
<p class="note">Nothing changes until you press the button.{{if .Prefs}} Or <a href="/p/prefs/{{.Prefs}}">choose which emails you get</a>.{{end}}</p>
{{- end}}
</main>
</body>
</html>
`))

type unsubscribeView struct {
	Title, Email, Topic string
	Prefs               string // the preference page's token
	Done, Invalid       bool
}

type unsubscribeJSON struct {
	Unsubscribed bool   `json:"unsubscribed"`
	Email        string `json:"email"`
	Topic        string `json:"topic,omitempty"`
	// PreferencesURL is the same contact's preference page, relative to this server.
	PreferencesURL string `json:"preferencesUrl,omitempty"`
}

func (s *Server) unsubscribePage(w http.ResponseWriter, r *http.Request) {
	s.unsubscribe(w, r, false)
}

func (s *Server) unsubscribePost(w http.ResponseWriter, r *http.Request) {
	// The form body is List-Unsubscribe=One-Click (RFC 8058) or the page's button; its content changes
	// nothing, so it is read only to bound it.
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	_ = r.ParseForm()
	s.unsubscribe(w, r, true)
}

func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request, perform bool) {
	token := r.PathValue("token")
	var (
		v   ports.UnsubscribeView
		err error
	)
	if len(token) > maxUnsubscribeToken {
		err = ports.Errorf(ports.CodeInvalidArgument, "invalid token")
	} else if perform {
		v, err = s.core.Unsubscribe.Unsubscribe(r.Context(), token)
	} else {
		v, err = s.core.Unsubscribe.PreviewUnsubscribe(r.Context(), token)
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	wantJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	if err != nil {
		status := http.StatusBadRequest
		if ports.ErrorCode(err) != ports.CodeInvalidArgument {
			logInternal(r.Context(), "unsubscribe", err)
			status = http.StatusInternalServerError
		}
		if wantJSON {
			writeJSON(w, status, statusProblem(status, "invalid token"))
			return
		}
		view := unsubscribeView{Title: "Link not valid", Invalid: true}
		if status != http.StatusBadRequest {
			view.Title = "Something went wrong"
		}
		writeUnsubscribeHTML(w, status, view)
		return
	}
	if wantJSON {
		out := unsubscribeJSON{Unsubscribed: perform, Email: v.MaskedEmail, Topic: v.TopicName}
		if v.PreferencesToken != "" {
			out.PreferencesURL = "/p/prefs/" + v.PreferencesToken
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	view := unsubscribeView{Title: "Unsubscribe", Email: v.MaskedEmail, Topic: v.TopicName, Prefs: v.PreferencesToken, Done: perform}
	if perform {
		view.Title = "You are unsubscribed"
	}
	writeUnsubscribeHTML(w, http.StatusOK, view)
}

func writeUnsubscribeHTML(w http.ResponseWriter, status int, v unsubscribeView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = unsubscribeTemplate.Execute(w, v)
}
