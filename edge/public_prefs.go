package edge

import (
	_ "embed"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"strings"

	"github.com/postmill/postmill/ports"
)

// The public preference centre and double opt-in pages (SPEC §4.11), gated only by a sealed token:
//
//   - GET /p/prefs/{token} shows the contact's topics; POST saves {topics: [{key, subscribed}],
//     unsubscribeAll?} (at most 200 topics), as JSON or as the page's form.
//   - GET /p/confirm/{token} shows a confirmation button and changes nothing, so a link scanner confirms
//     no one; POST /p/confirm/{token} confirms the pending subscription.
//
// The core opens the token (ports.PublicPreferenceService); the edge holds no keyring. A bad, altered,
// foreign or stale token gets the same 400 page, revealing nothing. With Accept: application/json every
// route answers JSON. The pages are plain HTML under the strict Content-Security-Policy: no script, one
// embedded stylesheet from the same origin, and forms that work with the keyboard alone.

//go:embed prefsui/prefs.css
var prefsCSS []byte

// prefsCSSPath is where the pages' stylesheet is served.
const prefsCSSPath = "/p/assets/prefs.css"

// Bounds on what the public routes read before the core sees anything.
const (
	maxPublicToken    = 512
	maxPrefsFormBytes = 64 << 10
)

func (s *Server) registerPreferenceRoutes() {
	if s.core.Preferences == nil {
		return
	}
	s.mux.HandleFunc("GET /p/prefs/{token}", s.prefsGet)
	s.mux.HandleFunc("POST /p/prefs/{token}", s.prefsPost)
	s.mux.HandleFunc("GET /p/confirm/{token}", s.confirmGet)
	s.mux.HandleFunc("POST /p/confirm/{token}", s.confirmPost)
	s.mux.HandleFunc("GET "+prefsCSSPath, serveStylesheet(prefsCSS))
}

var prefsTemplate = template.Must(template.New("prefs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>{{.Title}}</title>
<link rel="stylesheet" href="` + prefsCSSPath + `">
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{- if .Invalid}}
<p>This link is not valid. It may have been copied incompletely.</p>
<p class="note">Use the newest link from one of the emails you received.</p>
{{- else if .Confirm}}
{{- if .Confirmed}}
<p class="saved">Your subscription to “{{.Topic}}” is confirmed.</p>
{{- else}}
<p>Confirm that you want to receive “{{.Topic}}”?</p>
<form method="post" action="">
<button type="submit">Confirm subscription</button>
</form>
<p class="note">Nothing changes until you press the button.</p>
{{- end}}
{{- else}}
{{- if .Saved}}<p class="saved" role="status">Your preferences are saved.</p>{{end}}
<form method="post" action="">
<fieldset>
<legend>Emails you receive</legend>
{{- range .Topics}}
<input type="hidden" name="key" value="{{.Key}}">
<label><input type="checkbox" name="subscribed" value="{{.Key}}"{{if .Subscribed}} checked{{end}}>
<span>{{.Name}}{{if .Description}}<span class="desc">{{.Description}}</span>{{end}}</span></label>
{{- else}}
<p class="note">There are no topics to choose from.</p>
{{- end}}
<label class="all"><input type="checkbox" name="unsubscribeAll" value="true"{{if .AllOff}} checked{{end}}>
<span>Unsubscribe from all marketing emails</span></label>
</fieldset>
<button type="submit">Save preferences</button>
</form>
{{- end}}
</main>
</body>
</html>
`))

type prefsView struct {
	Title                                      string
	Invalid, Saved, Confirm, Confirmed, AllOff bool
	Topic                                      string
	Topics                                     []topicPreferenceResponse
}

type confirmationJSON struct {
	Topic     string `json:"topic"`
	TopicName string `json:"topicName"`
	Status    string `json:"status"`
	Confirmed bool   `json:"confirmed"`
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writePrefsHTML(w http.ResponseWriter, status int, v prefsView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = prefsTemplate.Execute(w, v)
}

// publicFail answers an error of a public route: a validation error keeps its details; a bad token or one
// naming something that is gone is the one "invalid token" 400; anything else is a 500 without detail.
func publicFail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	var problem *errorBody
	e, _ := ports.AsError(err)
	switch {
	case e != nil && e.Code == ports.CodeInvalidArgument && len(e.Details) > 0:
		problem = problemFor(err)
	case e != nil && (e.Code == ports.CodeInvalidArgument || e.Code == ports.CodeNotFound):
		problem = statusProblem(status, "invalid token")
	default:
		logInternal(r.Context(), "public preferences", err)
		status = http.StatusInternalServerError
		problem = statusProblem(status, http.StatusText(status))
	}
	if wantsJSON(r) {
		writeJSON(w, status, problem)
		return
	}
	v := prefsView{Title: "Link not valid", Invalid: true}
	if status == http.StatusInternalServerError {
		v = prefsView{Title: "Something went wrong", Invalid: true}
	} else if problem.Message != "invalid token" {
		v = prefsView{Title: "Those choices could not be saved", Invalid: true}
	}
	writePrefsHTML(w, status, v)
}

// publicToken reads the path's token, refusing an overlong one before the core is asked.
func publicToken(w http.ResponseWriter, r *http.Request) (string, bool) {
	w.Header().Set("Cache-Control", "no-store")
	token := r.PathValue("token")
	if token == "" || len(token) > maxPublicToken {
		publicFail(w, r, ports.Errorf(ports.CodeInvalidArgument, "invalid token"))
		return "", false
	}
	return token, true
}

func (s *Server) prefsAnswer(w http.ResponseWriter, r *http.Request, p ports.Preferences, saved bool) {
	out := toPreferences(p)
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, out)
		return
	}
	writePrefsHTML(w, http.StatusOK, prefsView{Title: "Email preferences", Saved: saved, Topics: out.Topics,
		AllOff: out.ConsentStatus == ports.ConsentUnsubscribed})
}

func (s *Server) prefsGet(w http.ResponseWriter, r *http.Request) {
	token, ok := publicToken(w, r)
	if !ok {
		return
	}
	p, err := s.core.Preferences.PublicPreferences(r.Context(), token)
	if err != nil {
		publicFail(w, r, err)
		return
	}
	s.prefsAnswer(w, r, p, false)
}

func (s *Server) prefsPost(w http.ResponseWriter, r *http.Request) {
	token, ok := publicToken(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxPrefsFormBytes)
	var u ports.PreferenceUpdate
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var req preferencesRequest
		raw, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(raw, &req)
		}
		if err != nil {
			publicFail(w, r, ports.ValidationError(ports.FieldViolation{Message: "body must be {topics: [{key, subscribed}], unsubscribeAll?}"}))
			return
		}
		u = req.update()
	} else {
		if err := r.ParseForm(); err != nil {
			publicFail(w, r, ports.ValidationError(ports.FieldViolation{Message: "the form could not be read"}))
			return
		}
		// The form lists every topic shown (key) and the ones ticked (subscribed).
		on := map[string]bool{}
		for _, k := range r.PostForm["subscribed"] {
			on[k] = true
		}
		for _, k := range r.PostForm["key"] {
			u.Topics = append(u.Topics, ports.TopicChoice{Key: k, Subscribed: on[k]})
		}
		u.UnsubscribeAll = r.PostForm.Get("unsubscribeAll") == "true"
	}
	u.IP = s.clientIP(r).String()
	p, err := s.core.Preferences.UpdatePublicPreferences(r.Context(), token, u)
	if err != nil {
		publicFail(w, r, err)
		return
	}
	s.prefsAnswer(w, r, p, true)
}

func (s *Server) confirmAnswer(w http.ResponseWriter, r *http.Request, c ports.PublicConfirmation) {
	confirmed := c.Status == ports.ConsentSubscribed
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, confirmationJSON{Topic: c.TopicKey, TopicName: c.TopicName, Status: c.Status, Confirmed: confirmed})
		return
	}
	title := "Confirm your subscription"
	if confirmed {
		title = "Subscription confirmed"
	}
	writePrefsHTML(w, http.StatusOK, prefsView{Title: title, Confirm: true, Confirmed: confirmed, Topic: c.TopicName})
}

func (s *Server) confirmGet(w http.ResponseWriter, r *http.Request) {
	token, ok := publicToken(w, r)
	if !ok {
		return
	}
	c, err := s.core.Preferences.GetConfirmation(r.Context(), token)
	if err != nil {
		publicFail(w, r, err)
		return
	}
	s.confirmAnswer(w, r, c)
}

func (s *Server) confirmPost(w http.ResponseWriter, r *http.Request) {
	token, ok := publicToken(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	_, _ = io.Copy(io.Discard, r.Body)
	c, err := s.core.Preferences.ConfirmTopic(r.Context(), token, s.clientIP(r).String())
	if err != nil {
		publicFail(w, r, err)
		return
	}
	s.confirmAnswer(w, r, c)
}
