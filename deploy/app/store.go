package app

import (
	"context"
	"fmt"

	"github.com/grafana/dskit/services"

	"github.com/postmill/postmill/adapters/postgres"
)

// initStore opens (and, when configured, migrates) the PostgreSQL store the core and the PostgreSQL queue
// share; it closes the store when the process stops.
func (a *App) initStore() (services.Service, error) {
	return services.NewIdleService(func(ctx context.Context) error {
		st, err := postgres.Open(ctx, a.cfg.DatabaseURL)
		if err != nil {
			return fmt.Errorf("opening the database: %w", err)
		}
		if err := st.Ping(ctx); err != nil {
			st.Close()
			return fmt.Errorf("database does not answer: %w", err)
		}
		if a.cfg.Migrate {
			if err := postgres.Migrate(ctx, st.Pool()); err != nil {
				st.Close()
				return fmt.Errorf("migrating: %w", err)
			}
		}
		if a.cfg.Queue == "kafka" {
			// The core publishes every event to the Kafka events topic: the events trigger must queue
			// every event for the fan-out, not only those an endpoint subscribes to.
			if err := st.RegisterEventStream(ctx, "kafka"); err != nil {
				st.Close()
				return fmt.Errorf("registering the Kafka events stream: %w", err)
			}
		}
		a.mu.Lock()
		a.store = st
		a.mu.Unlock()
		a.logger.Info("store ready", "migrated", a.cfg.Migrate)
		return nil
	}, func(error) error {
		if st := a.Store(); st != nil {
			st.Close()
		}
		return nil
	}).WithName(moduleStore), nil
}
