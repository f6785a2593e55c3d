//go:build !unix

package react

import (
	"testing"
	"time"
)

// processCPU is -1 where getrusage does not exist: benchmarks then report no CPU time.
func processCPU(testing.TB) time.Duration { return -1 }

// childrenCPU is -1 where getrusage does not exist.
func childrenCPU(testing.TB) time.Duration { return -1 }
