package submission

import (
	"errors"

	"github.com/emersion/go-sasl"
)

// loginServer is the server side of AUTH LOGIN (draft-murchison-sasl-login), which go-sasl implements only
// as a client. It is obsolete but still what many mail clients and libraries send: the server prompts
// "Username:" and "Password:", the client answers each, and the pair is checked like PLAIN's.
type loginServer struct {
	step         int
	username     string
	authenticate func(username, password string) error
}

func newLoginServer(authenticate func(username, password string) error) sasl.Server {
	return &loginServer{authenticate: authenticate}
}

var (
	loginUsernamePrompt = []byte("Username:")
	loginPasswordPrompt = []byte("Password:")
)

// Next implements sasl.Server. A client may send the username as the initial response (AUTH LOGIN
// <base64 username>), which skips the first prompt.
func (l *loginServer) Next(response []byte) (challenge []byte, done bool, err error) {
	switch l.step {
	case 0:
		l.step = 1
		if response == nil {
			return loginUsernamePrompt, false, nil
		}
		fallthrough
	case 1:
		l.username = string(response)
		l.step = 2
		return loginPasswordPrompt, false, nil
	case 2:
		l.step = 3
		return nil, true, l.authenticate(l.username, string(response))
	}
	return nil, false, errors.New("sasl: unexpected client response")
}
