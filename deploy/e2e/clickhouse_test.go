package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/clickhouse"
)

// clickHouseServer is Debian's clickhouse-server (deploy/scripts/test-deps.sh installs it).
const clickHouseServer = "/usr/sbin/clickhouse-server"

// mustClickHouse starts a private clickhouse-server on a free loopback port, its data under the test's
// temporary directory, stopped when the test ends, and returns its native-protocol address.
func mustClickHouse(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(clickHouseServer); err != nil {
		t.Skipf("%s is not installed (deploy/scripts/test-deps.sh installs clickhouse-server)", clickHouseServer)
	}
	dir := t.TempDir()
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	tcp, httpPort := port(), port()
	users, config := filepath.Join(dir, "users.xml"), filepath.Join(dir, "config.xml")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(users, []byte(`<yandex><profiles><default></default></profiles>
<users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default></default></quotas></yandex>`), 0o600))
	must(os.WriteFile(config, fmt.Appendf(nil, `<yandex>
<logger><level>warning</level><log>%[1]s/server.log</log><errorlog>%[1]s/error.log</errorlog></logger>
<listen_host>127.0.0.1</listen_host><tcp_port>%[2]d</tcp_port><http_port>%[3]d</http_port>
<path>%[1]s/data/</path><tmp_path>%[1]s/tmp/</tmp_path><users_config>%[4]s</users_config>
<default_profile>default</default_profile><default_database>default</default_database>
<mark_cache_size>5368709</mark_cache_size></yandex>`, dir, tcp, httpPort, users), 0o600))
	cmd := exec.Command(clickHouseServer, "--config-file="+config)
	cmd.Dir = dir
	must(cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", tcp)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		a, err := clickhouse.Open(ctx, addr, "postmill_probe")
		cancel()
		if err == nil {
			_ = a.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("clickhouse-server on %s did not answer within 60s: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
