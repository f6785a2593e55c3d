package s3_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/s3"
	"github.com/postmill/postmill/ports"
	"github.com/postmill/postmill/ports/porttest"
)

// newStore opens a Store on a bucket no other test uses; New creates it.
func newStore(tb testing.TB, g gateway) *s3.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := s3.New(ctx, config(g, "postmill-test-"+randomHex(tb, 4)))
	if err != nil {
		tb.Fatalf("s3.New: %v", err)
	}
	return s
}

func config(g gateway, bucket string) s3.Config {
	return s3.Config{Endpoint: g.Endpoint, Bucket: bucket, AccessKey: g.AccessKey, SecretKey: g.SecretKey}
}

func TestBlobStoreContract(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	porttest.ExerciseBlobStore(t, func(t *testing.T) ports.BlobStore { return newStore(t, g) })
}

func TestNewCreatesTheBucketOnceAndReusesIt(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := config(g, "postmill-reuse-"+randomHex(t, 4))
	first, err := s3.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New on a missing bucket: %v", err)
	}
	if err := first.Put(ctx, "att/o/m/a", []byte("kept"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	// A second process starting later finds the bucket and its objects.
	cfg.Endpoint = "http://" + cfg.Endpoint // the URL form works too
	second, err := s3.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New on an existing bucket: %v", err)
	}
	got, err := second.Get(ctx, "att/o/m/a")
	if err != nil || string(got) != "kept" {
		t.Fatalf("Get through a second Store = %q, %v; want %q", got, err, "kept")
	}
}

func TestNewFailsWithWrongCredentials(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := config(g, "postmill-denied-"+randomHex(t, 4))
	cfg.SecretKey = "not-" + cfg.SecretKey
	if _, err := s3.New(ctx, cfg); err == nil {
		t.Fatal("New with a wrong secret key succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	full := s3.Config{Endpoint: "127.0.0.1:9000", Bucket: "b", AccessKey: "a", SecretKey: "s"}
	if err := full.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", full, err)
	}
	empty := s3.Config{}
	err := empty.Validate()
	if err == nil {
		t.Fatal("Validate of an empty Config succeeded")
	}
	for _, want := range []string{"endpoint", "bucket", "access key", "secret key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q does not name the %s", err, want)
		}
	}
	if _, err := s3.New(context.Background(), s3.Config{Endpoint: "http://h/x", Bucket: "b", AccessKey: "a", SecretKey: "s"}); err == nil {
		t.Error("New accepted an endpoint URL with a path")
	}
}
