package app

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/ports"
)

// AnalyticsTierConfig is the analytics tier's retention and Kafka consumer group (docs/analytics.md). Zero
// fields keep the defaults.
type AnalyticsTierConfig struct {
	// RequestDays and EventDays are how many days request logs and message events are kept
	// (POSTMILL_ANALYTICS_REQUEST_DAYS, default 30; POSTMILL_ANALYTICS_EVENT_DAYS, default 90), 1-3650.
	RequestDays int
	EventDays   int
	// KafkaGroup is the consumer group the tier reads the Kafka events topic as
	// (POSTMILL_ANALYTICS_KAFKA_GROUP, default kafka.DefaultAnalyticsGroup). Every analytics process of a
	// deployment names the same group, so the topic's partitions are shared among them.
	KafkaGroup string
}

// loadAnalyticsTierEnv reads the variables of AnalyticsTierConfig; validate checks them.
func loadAnalyticsTierEnv(getenv Getenv) (AnalyticsTierConfig, error) {
	c := AnalyticsTierConfig{KafkaGroup: strings.TrimSpace(getenv("POSTMILL_ANALYTICS_KAFKA_GROUP"))}
	var errs []error
	for _, v := range []struct {
		name string
		into *int
	}{{"POSTMILL_ANALYTICS_REQUEST_DAYS", &c.RequestDays}, {"POSTMILL_ANALYTICS_EVENT_DAYS", &c.EventDays}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 3650 {
			errs = append(errs, fmt.Errorf("%s: %q is not a number of days between 1 and 3650", v.name, s))
			continue
		}
		*v.into = n
	}
	return c, errors.Join(errs...)
}

// retention is how long request logs and events are kept.
func (c AnalyticsTierConfig) retention() (ports.AnalyticsRetention, error) {
	r := ports.DefaultAnalyticsRetention
	for _, v := range []struct {
		name string
		days int
		into *time.Duration
	}{{"POSTMILL_ANALYTICS_REQUEST_DAYS", c.RequestDays, &r.Requests}, {"POSTMILL_ANALYTICS_EVENT_DAYS", c.EventDays, &r.Events}} {
		switch {
		case v.days == 0:
		case v.days < 1 || v.days > 3650:
			return r, fmt.Errorf("%s: %d is not a number of days between 1 and 3650", v.name, v.days)
		default:
			*v.into = time.Duration(v.days) * 24 * time.Hour
		}
	}
	return r, nil
}

// kafkaGroup is the consumer group of the Kafka events topic.
func (c AnalyticsTierConfig) kafkaGroup() string {
	if c.KafkaGroup != "" {
		return c.KafkaGroup
	}
	return kafka.DefaultAnalyticsGroup
}
