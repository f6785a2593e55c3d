package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShapingFileIsCheckedAtStartUp: POSTMILL_MTA_SHAPING_FILE is read with the rest of the configuration,
// and a file the MTA would refuse stops the process with the variable's name and the reason.
func TestShapingFileIsCheckedAtStartUp(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"sites": [{"name": "corp", "mx_suffixes": ["mx.corp.example"], "connections": 4}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"sites": [{"name": "corp", "connections": 4}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		wantErr string
	}{{good, ""}, {bad, "no mx_suffixes"}, {filepath.Join(dir, "missing.json"), "no such file"}} {
		env := map[string]string{"POSTMILL_MTA_SHAPING_FILE": tc.path, "POSTMILL_DATA_DIR": t.TempDir()}
		cfg, err := LoadEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MTAShapingFile != tc.path {
			t.Fatalf("MTAShapingFile %q", cfg.MTAShapingFile)
		}
		err = cfg.Validate(Targets{TargetMTA})
		var shapingErr string
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, "POSTMILL_MTA_SHAPING_FILE") {
					shapingErr = line
				}
			}
		}
		if tc.wantErr == "" && shapingErr != "" || tc.wantErr != "" && !strings.Contains(shapingErr, tc.wantErr) {
			t.Errorf("%s: shaping error %q, want %q", filepath.Base(tc.path), shapingErr, tc.wantErr)
		}
	}
}
