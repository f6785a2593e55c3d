package account

import (
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "zero value uses defaults", cfg: Config{}},
		{name: "admins", cfg: Config{AdminEmails: []string{"Root@Example.com", "ops@example.com"}}},
		{name: "bad admin email", cfg: Config{AdminEmails: []string{"root"}}, wantErr: true},
		{name: "negative access TTL", cfg: Config{AccessTTL: -time.Minute}, wantErr: true},
		{name: "access outlives refresh", cfg: Config{AccessTTL: time.Hour, RefreshTTL: time.Minute}, wantErr: true},
		{name: "negative plan", cfg: Config{DefaultPlan: ports.Plan{MonthlyLimit: -1}}, wantErr: true},
		{name: "port out of range", cfg: Config{SubmissionPort: 70000}, wantErr: true},
		{name: "small test params", cfg: Config{PasswordParams: testPasswordParams}},
		{name: "memory below 8p", cfg: Config{PasswordParams: PasswordParams{Memory: 8, Threads: 2}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	if c.AccessTTL != 15*time.Minute || c.RefreshTTL != 30*24*time.Hour || c.PasswordParams != (PasswordParams{Memory: 19456, Time: 2, Threads: 1}) ||
		c.SubmissionHost != DefaultSubmissionHost || c.SubmissionPort != DefaultSubmissionPort {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestBillingPeriod(t *testing.T) {
	t.Parallel()
	utc := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name      string
		now       time.Time
		wantStart time.Time
		wantEnd   time.Time
	}{
		{"mid month", utc(2026, time.November, 21, 10), utc(2026, time.November, 1, 0), utc(2026, time.December, 1, 0)},
		{"first instant", utc(2026, time.November, 1, 0), utc(2026, time.November, 1, 0), utc(2026, time.December, 1, 0)},
		{"December rolls the year", utc(2026, time.December, 31, 23), utc(2026, time.December, 1, 0), utc(2027, time.January, 1, 0)},
		{"leap February", utc(2028, time.February, 29, 12), utc(2028, time.February, 1, 0), utc(2028, time.March, 1, 0)},
		{"local time is converted to UTC first", time.Date(2026, time.December, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)), utc(2026, time.November, 1, 0), utc(2026, time.December, 1, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start, end := billingPeriod(tt.now)
			if !start.Equal(tt.wantStart) || !end.Equal(tt.wantEnd) || start.Location() != time.UTC {
				t.Fatalf("billingPeriod(%s) = %s, %s", tt.now, start, end)
			}
		})
	}
}
