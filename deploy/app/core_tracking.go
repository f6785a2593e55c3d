package app

import "github.com/postmill/postmill/core/tracking"

// coreTracking builds the tracker that signs open-pixel and click links (sending uses it) and the service
// that answers them.
func (a *App) coreTracking(env *coreEnv) error {
	tracker, err := tracking.NewTracker(env.keyring, a.cfg.TrackingScheme)
	if err != nil {
		return err
	}
	tracker.PublicBaseURL = a.cfg.BaseURL
	track, err := tracking.NewService(tracker, env.store, env.clock, env.logger)
	if err != nil {
		return err
	}
	env.tracker = tracker
	env.core.Tracking = track
	return nil
}
