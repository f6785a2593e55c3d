package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"sync"
	"testing"
)

// TestInboundConcurrentRepliesFollowTheStore: messages from concurrent SMTP sessions, whose blobs and rows
// are written in shared groups, are each stored once with their own bytes, and every 250 is given only
// once the message is stored: the session that got it finds the received email in the API, its raw bytes
// and its attachment right away. (That the group is on disk before the 250 is shown where the groups are
// made: adapters/fs and adapters/postgres hold a group up and watch the replies wait.)
func TestInboundConcurrentRepliesFollowTheStore(t *testing.T) {
	t.Parallel()
	w := mustInboundWorld(t)
	expect(t, w.post("/v1/inbound/routes", w.owner.access, map[string]any{"inboundDomainId": w.domID,
		"matchType": "catch_all", "action": "store"}), 201)
	rcpt := "group@" + w.domain
	get := func(path string) (int, []byte, error) {
		r, err := http.NewRequest("GET", w.base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		r.Header.Set("Authorization", "Bearer "+w.key)
		res, err := w.http.Do(r)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	// check finds the message by subject right after its 250 and compares what is stored with what was sent.
	check := func(subject, raw, attachment string) error {
		code, b, err := get("/v1/received-emails?limit=100")
		if err != nil || code != 200 {
			return fmt.Errorf("list: %d %s %v", code, b, err)
		}
		var l struct {
			Data []struct {
				ID      string `json:"id"`
				Subject string `json:"subject"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		id := ""
		for _, d := range l.Data {
			if d.Subject == "Café "+subject {
				if id != "" {
					return fmt.Errorf("%s listed twice", subject)
				}
				id = d.ID
			}
		}
		if id == "" {
			return fmt.Errorf("%s answered 250 but is not listed", subject)
		}
		if code, b, err := get("/v1/received-emails/" + id + "/raw"); err != nil || code != 200 || string(b) != raw {
			return fmt.Errorf("%s raw: %d %v (%d bytes, sent %d)", subject, code, err, len(b), len(raw))
		}
		code, b, err = get("/v1/received-emails/" + id)
		var det struct {
			Attachments []struct {
				ID string `json:"id"`
			} `json:"attachments"`
		}
		if err != nil || code != 200 || json.Unmarshal(b, &det) != nil || len(det.Attachments) != 1 {
			return fmt.Errorf("%s detail: %d %s %v", subject, code, b, err)
		}
		code, b, err = get("/v1/received-emails/" + id + "/attachments/" + det.Attachments[0].ID)
		if err != nil || code != 200 || string(b) != attachment {
			return fmt.Errorf("%s attachment: %d %q %v", subject, code, b, err)
		}
		return nil
	}
	const sessions, each = 6, 4 // within the listener's default connections per address
	errs := make(chan error, sessions*each)
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				subject := fmt.Sprintf("group %d-%d", s, n)
				attachment := "attachment of " + subject + "\n"
				raw := inboundMessage(rcpt, subject, base64.StdEncoding.EncodeToString([]byte(attachment)))
				if err := smtp.SendMail(w.app.InboundAddr(), nil, "s@sender.example", []string{rcpt}, []byte(raw)); err != nil {
					errs <- fmt.Errorf("%s: %w", subject, err)
					continue
				}
				errs <- check(subject, raw, attachment)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	l := expect(t, w.get("/v1/received-emails?limit=100", w.key), 200)
	if n := len(l.body["data"].([]any)); n != sessions*each {
		t.Fatalf("%d received emails, want %d", n, sessions*each)
	}
}
