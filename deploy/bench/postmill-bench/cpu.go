package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cpuMeter measures the CPU time spent during a run by the Postmill processes, by the PostgreSQL backends
// serving them and by this process (clients and sink) with the backends serving its own queries, from
// /proc: where the two cores went, per message.
type cpuMeter struct {
	url     string
	pids    []int
	start   map[int]time.Duration // postmill pids and PostgreSQL backends at the start
	self    time.Duration
	started time.Time
	machine [2]int64 // busy and total ticks of /proc/stat's cpu line
}

// machineTicks returns the busy and total ticks of all cores since boot.
func machineTicks() [2]int64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]int64{}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	var busy, total int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return [2]int64{busy, total}
}

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times (100 on every Linux build in use).
const clockTick = 100

func procCPU(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / clockTick, true
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchApplication is the application_name of this process's own connections (connect), so that the CPU
// of the backends serving them (the backlog and recipient counts, the wait sampler, the statement listing)
// is counted as the benchmark's and not as PostgreSQL's work for Postmill.
const benchApplication = "postmill-bench"

// connect opens a connection of this process to url, named benchApplication.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = benchApplication
	return pgx.ConnectConfig(ctx, cfg)
}

// backends returns the pids of the PostgreSQL backends connected to the benchmark's database: Postmill's
// and this process's own (connect's).
func (c *cpuMeter) backends(ctx context.Context) (postmill, own []int) {
	conn, err := connect(ctx, c.url)
	if err != nil {
		return nil, nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid, application_name = $1 FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`, benchApplication)
	if err != nil {
		return nil, nil
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var mine bool
		if rows.Scan(&pid, &mine) == nil {
			if mine {
				own = append(own, pid)
			} else {
				postmill = append(postmill, pid)
			}
		}
	}
	return postmill, own
}

func startCPUMeter(ctx context.Context, url string, pids []int) *cpuMeter {
	c := &cpuMeter{url: url, pids: pids, start: map[int]time.Duration{}, started: time.Now()}
	postmill, own := c.backends(ctx)
	for _, pid := range append(append(append([]int{}, pids...), postmill...), own...) {
		if t, ok := procCPU(pid); ok {
			c.start[pid] = t
		}
	}
	c.self = selfCPU()
	c.machine = machineTicks()
	return c
}

// spent is the CPU time the processes of each list used since the meter started (0 for a pid it did not
// see then, so a backend that came later counts from its own start).
func (c *cpuMeter) spent(lists ...[]int) time.Duration {
	var d time.Duration
	for _, pids := range lists {
		for _, pid := range pids {
			if t, ok := procCPU(pid); ok {
				d += t - c.start[pid]
			}
		}
	}
	return d
}

// report prints the CPU time of each part per message and in cores over the run.
func (c *cpuMeter) report(ctx context.Context, messages int64) string {
	wall := time.Since(c.started)
	platform, own := c.backends(ctx)
	postmill, pg, self := c.spent(c.pids), c.spent(platform), selfCPU()-c.self+c.spent(own)
	m := machineTicks()
	busy := float64(m[0]-c.machine[0]) / clockTick
	other := busy - (postmill + pg + self).Seconds()
	per := func(d time.Duration) string {
		if messages == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f ms/msg, %.2f cores", float64(d.Microseconds())/1000/float64(messages), d.Seconds()/wall.Seconds())
	}
	return fmt.Sprintf("  CPU over %.1fs: postmill %s; PostgreSQL backends of this database %s; benchmark clients, sink and their queries %s; the machine %.2f cores busy, of which %.2f outside this run",
		wall.Seconds(), per(postmill), per(pg), per(self), busy/wall.Seconds(), other/wall.Seconds())
}

// perMessage returns the CPU time of the Postmill processes, the database's backends and this process
// per message since the start.
func (c *cpuMeter) perMessage(ctx context.Context, messages int64) time.Duration {
	if messages == 0 {
		return 0
	}
	platform, own := c.backends(ctx)
	total := c.spent(c.pids, platform, own) + selfCPU() - c.self
	return total / time.Duration(messages)
}
