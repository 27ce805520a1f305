package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"enrichd/server"

	"go.yaml.in/yaml/v3"
)

// composeFile is what the test reads of compose.yaml.
type composeFile struct {
	Services map[string]struct {
		Build struct {
			Context string `yaml:"context"`
		} `yaml:"build"`
		Image   string   `yaml:"image"`
		Ports   []string `yaml:"ports"`
		Volumes []string `yaml:"volumes"`
		EnvFile []struct {
			Path     string `yaml:"path"`
			Required *bool  `yaml:"required"`
		} `yaml:"env_file"`
		StopGracePeriod string `yaml:"stop_grace_period"`
		Healthcheck     struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// dockerfile is what the test reads of the Dockerfile's last stage: the instructions
// by name, continuation lines joined, and its ENV.
type dockerfile struct {
	instructions map[string][]string
	env          map[string]string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{instructions: map[string][]string{}, env: map[string]string{}}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		name, rest = strings.ToUpper(name), strings.TrimSpace(rest)
		if name == "FROM" { // a new stage: the image is the last one
			d = dockerfile{instructions: map[string][]string{}, env: map[string]string{}}
		}
		d.instructions[name] = append(d.instructions[name], rest)
		if name == "ENV" {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				d.env[k] = v
			}
		}
	}
	return d
}

// one is the single value of an instruction the image must have once.
func (d dockerfile) one(t *testing.T, name string) string {
	t.Helper()
	if len(d.instructions[name]) != 1 {
		t.Fatalf("the Dockerfile's image has %d %s instructions, want 1", len(d.instructions[name]), name)
	}
	return d.instructions[name][0]
}

// TestComposeFile reads compose.yaml against the Dockerfile it builds (Docker is not
// needed, and not run): the database and the key file beside it are in the named
// volume the image declares, the port published is the one serve listens on in the
// image, on loopback, the health check runs the image's binary, whose wait-ready
// takes its arguments and answers for a serve on the image's address, and the stop
// leaves serve its shutdown grace.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	svc, ok := c.Services["enrichd"]
	if !ok || len(c.Services) != 1 {
		t.Fatalf("compose.yaml has services %v, want enrichd alone", c.Services)
	}
	d := readDockerfile(t)
	if svc.Build.Context != "." {
		t.Errorf("the service builds %q, not the Dockerfile beside compose.yaml", svc.Build.Context)
	}

	// The volume: mounted where the image keeps the database, so the database, its
	// -wal and -shm and the key file beside it outlive the container.
	dataDir := d.one(t, "VOLUME")
	db := d.env["ENRICHD_DB"]
	if path.Dir(db) != dataDir || d.one(t, "WORKDIR") != dataDir {
		t.Errorf("the image keeps its database at %s, works in %s, and declares the volume %s", db, d.one(t, "WORKDIR"), dataDir)
	}
	if len(svc.Volumes) != 1 {
		t.Fatalf("the service mounts %v, want one volume", svc.Volumes)
	}
	name, mount, _ := strings.Cut(svc.Volumes[0], ":")
	if mount != dataDir {
		t.Errorf("the volume is mounted at %s; the database and its key file (%s, %s.secret-key) are in %s", mount, db, db, dataDir)
	}
	if _, ok := c.Volumes[name]; !ok {
		t.Errorf("the volume %s is not a named volume of the file (volumes: %v): a bind of the host's path is not what the docs say", name, c.Volumes)
	}

	// The port: the one serve listens on in the image, published on loopback alone.
	_, port, err := net.SplitHostPort(d.env["ENRICHD_ADDR"])
	if err != nil || d.one(t, "EXPOSE") != port {
		t.Fatalf("the image listens on %q and exposes %q", d.env["ENRICHD_ADDR"], d.one(t, "EXPOSE"))
	}
	if !slices.Contains(svc.Ports, "127.0.0.1:8080:"+port) || len(svc.Ports) != 1 {
		t.Errorf("the service publishes %v, want 127.0.0.1:8080:%s alone", svc.Ports, port)
	}

	// The environment file: optional, and kept out of git.
	if len(svc.EnvFile) != 1 || svc.EnvFile[0].Required == nil || *svc.EnvFile[0].Required {
		t.Errorf("env_file %+v: want one file, required: false", svc.EnvFile)
	} else {
		dir := t.TempDir()
		for name, text := range map[string]string{".gitignore": "", svc.EnvFile[0].Path: "PDL_API_KEY=secret\n"} {
			if name == ".gitignore" {
				b, err := os.ReadFile(filepath.Join("..", ".gitignore"))
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		checkIgnored(t, dir, t.TempDir(), ".gitignore")
	}

	// The stop: serve's shutdown grace and a margin before Docker kills.
	if grace, err := time.ParseDuration(svc.StopGracePeriod); err != nil || grace <= server.DefaultShutdownGrace {
		t.Errorf("stop_grace_period %q: want more than serve's %s", svc.StopGracePeriod, server.DefaultShutdownGrace)
	}

	// The health check: the image's own binary, whose wait-ready, with these
	// arguments and the image's ENRICHD_ADDR, answers for a serve on that port.
	var entrypoint []string
	if err := json.Unmarshal([]byte(d.one(t, "ENTRYPOINT")), &entrypoint); err != nil || len(entrypoint) != 1 {
		t.Fatalf("the image's ENTRYPOINT %s is not one binary", d.one(t, "ENTRYPOINT"))
	}
	check := svc.Healthcheck.Test
	if len(check) < 3 || check[0] != "CMD" || check[1] != entrypoint[0] || check[2] != "wait-ready" {
		t.Fatalf("the health check runs %v, want [CMD %s wait-ready ...]", check, entrypoint[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, done := startServe(t, ctx, "--db", newDB(t))
	defer func() {
		cancel()
		<-done
	}()
	_, served, _ := net.SplitHostPort(strings.TrimPrefix(logField(t, logs, "enrichd listening", "addr"), "http://"))
	host, _, _ := net.SplitHostPort(d.env["ENRICHD_ADDR"])
	args := append(slices.Clone(check[2:]), "--addr", net.JoinHostPort(host, served)) // the image's host, this serve's port
	contains(t, mustCLI(t, args...), "enrichd is ready at http://127.0.0.1:"+served)
}
