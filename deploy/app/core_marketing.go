package app

import "github.com/postmill/postmill/core/marketing"

// coreMarketing builds the marketing audience services (SPEC §4.7-§4.9): contacts, topics, segments and the
// public preference and confirmation pages, whose tokens it seals and opens with the keyring. A double
// opt-in topic's confirmation mails go through the sending area's send path, so this area comes after
// sending.
func (a *App) coreMarketing(env *coreEnv) error {
	svc, err := marketing.New(marketing.Deps{
		Contacts: env.store,
		Topics:   env.store,
		Segments: env.store,
		Keyring:  env.keyring,
		Clock:    env.clock,
		Confirmations: &marketing.Confirmations{
			Domains: env.store,
			Emails:  env.core.Emails,
			BaseURL: a.cfg.BaseURL,
		},
	})
	if err != nil {
		return err
	}
	env.core.Contacts, env.core.Topics, env.core.Segments = svc.Contacts, svc.Topics, svc.Segments
	env.core.Preferences = svc.Public
	return nil
}
