package webhook

import (
	"slices"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "zero value uses defaults", cfg: Config{}},
		{name: "fast test loops", cfg: Config{FanOutInterval: time.Millisecond, ClaimInterval: time.Millisecond, FlushInterval: time.Millisecond}},
		{name: "short attempts and lease", cfg: Config{AttemptTimeout: time.Second, Lease: 2 * time.Second}},
		{name: "compressed schedule", cfg: Config{Schedule: []time.Duration{time.Second, time.Second, time.Second, time.Second}}},
		{name: "negative interval", cfg: Config{ClaimInterval: -time.Second}, wantErr: true},
		{name: "batch too large", cfg: Config{FanOutBatch: 10001}, wantErr: true},
		{name: "negative batch", cfg: Config{FlushBatch: -1}, wantErr: true},
		{name: "negative in-flight", cfg: Config{InFlight: -1}, wantErr: true},
		{name: "per endpoint above in-flight", cfg: Config{InFlight: 8, PerEndpoint: 16}, wantErr: true},
		{name: "lease shorter than two attempts", cfg: Config{Lease: 19 * time.Second}, wantErr: true},
		{name: "lease shorter than one attempt", cfg: Config{Lease: 5 * time.Second}, wantErr: true},
		{name: "negative timeout", cfg: Config{AttemptTimeout: -time.Second}, wantErr: true},
		{name: "schedule too short", cfg: Config{Schedule: []time.Duration{time.Minute}}, wantErr: true},
		{name: "empty schedule", cfg: Config{Schedule: []time.Duration{}}, wantErr: true},
		{name: "schedule with a zero wait", cfg: Config{Schedule: []time.Duration{time.Minute, 0, time.Minute, time.Minute}}, wantErr: true},
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
	if c.FanOutInterval != 50*time.Millisecond || c.FanOutBatch != 1000 || c.ClaimInterval != 50*time.Millisecond ||
		c.ClaimBatch != 512 || c.Lease != 60*time.Second || c.InFlight != 256 || c.PerEndpoint != 16 ||
		c.FlushInterval != 50*time.Millisecond || c.FlushBatch != 256 || c.AttemptTimeout != 10*time.Second ||
		!slices.Equal(c.Schedule, []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}) {
		t.Fatalf("defaults = %+v", c)
	}
}

// TestConfigBacklog checks that the deliveries kept per endpoint fit in the lease: rounds of PerEndpoint
// attempts, each at most AttemptTimeout, end at least one AttemptTimeout before the lease does.
func TestConfigBacklog(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		want int
	}{
		{Config{}, 80},
		{Config{Lease: 20 * time.Second}, 16},
		{Config{Lease: 25 * time.Second}, 16},
		{Config{PerEndpoint: 4, Lease: 40 * time.Second}, 12},
		{Config{AttemptTimeout: time.Second, Lease: 2 * time.Second, PerEndpoint: 1}, 1},
	}
	for _, tt := range tests {
		c := tt.cfg.withDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		got := c.backlog()
		if got != tt.want {
			t.Errorf("backlog(%+v) = %d, want %d", tt.cfg, got, tt.want)
		}
		rounds := (got + c.PerEndpoint - 1) / c.PerEndpoint
		if time.Duration(rounds)*c.AttemptTimeout > c.Lease-c.AttemptTimeout {
			t.Errorf("backlog %d takes %d rounds of %s; lease %s", got, rounds, c.AttemptTimeout, c.Lease)
		}
	}
}
