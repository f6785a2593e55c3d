// Package s3 is the ports.BlobStore on an S3-compatible object store (AWS S3, MinIO, versitygw, Ceph RGW,
// ...) through minio-go, for deployments where several machines share attachment bytes and raw mail.
//
// Requests use path-style addressing (http://host/bucket/key), which every S3-compatible server accepts
// without wildcard DNS for bucket names, and region us-east-1 unless configured, the region S3-compatible
// servers answer to by default.
package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/postmill/postmill/ports"
)

// DefaultRegion is the region used when Config.Region is empty.
const DefaultRegion = "us-east-1"

// Config locates the bucket. Endpoint is host:port (or a URL, whose scheme then decides UseSSL).
type Config struct {
	Endpoint  string
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string // default DefaultRegion
	UseSSL    bool
}

// Validate reports what is missing, so that a misconfigured deployment fails at start, not at the first
// attachment.
func (c Config) Validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"endpoint", c.Endpoint}, {"bucket", c.Bucket}, {"access key", c.AccessKey}, {"secret key", c.SecretKey},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("s3: missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// Store keeps blobs as objects of one bucket. It is safe for concurrent use.
type Store struct {
	client *minio.Client
	core   minio.Core
	bucket string
}

var _ ports.BlobStore = (*Store)(nil)

// New connects to the endpoint and creates the bucket if it does not exist yet, so that a fresh object
// store needs no manual step. Several processes starting at once are fine: a bucket created by another one
// in the meantime counts as existing.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	endpoint, secure := cfg.Endpoint, cfg.UseSSL
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("s3: endpoint %q is neither host:port nor a URL without a path", cfg.Endpoint)
		}
		endpoint, secure = u.Host, u.Scheme == "https"
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       secure,
		Region:       region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: client for %s: %w", endpoint, err)
	}
	exists, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("s3: bucket %s: %w", cfg.Bucket, err)
	}
	if !exists {
		err := client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: region})
		if code := minio.ToErrorResponse(err).Code; err != nil && code != minio.BucketAlreadyOwnedByYou && code != minio.BucketAlreadyExists {
			return nil, fmt.Errorf("s3: create bucket %s: %w", cfg.Bucket, err)
		}
	}
	return &Store{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket}, nil
}

// Put stores data under key with its content type (application/octet-stream when empty). S3 replaces an
// object atomically: readers see the old bytes or the new ones.
func (s *Store) Put(ctx context.Context, key string, data []byte, contentType string) error {
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	_, err := s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType})
	if err != nil {
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	return nil
}

// Get returns the object's bytes. Errors: not_found.
//
// It issues one GET (minio-go's Core): the lazy minio.Object would issue a HEAD and then a GET conditional
// on the ETag, which fails with PreconditionFailed when a concurrent Put replaces the object in between.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	body, info, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.getError(key, err)
	}
	defer body.Close()
	if info.Size < 0 {
		data, err := io.ReadAll(body)
		if err != nil {
			return nil, s.getError(key, err)
		}
		return data, nil
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(body, data); err != nil {
		return nil, s.getError(key, err)
	}
	return data, nil
}

func (s *Store) getError(key string, err error) error {
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return ports.NotFound("blob %s not found", key)
	}
	return fmt.Errorf("s3: get %s: %w", key, err)
}

// Delete removes the object. S3 answers 204 for a missing key; a server that answers NoSuchKey instead is
// treated the same, as the port wants.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return fmt.Errorf("s3: delete %s: %w", key, err)
	}
	return nil
}
