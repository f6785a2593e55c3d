package postgres

import "context"

// MessageDimensionsPlan returns the generic plan PostgreSQL makes for MessageDimensions' statement, with
// ProbePlans' settings first when probe is set (inside a transaction that is rolled back).
func (s *Store) MessageDimensionsPlan(ctx context.Context, probe bool) (string, error) {
	plans, err := s.genericPlans(ctx, probe, messageDimensionsSQL)
	if err != nil {
		return "", err
	}
	return plans[0], nil
}
