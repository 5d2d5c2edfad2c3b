package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/compose/convert"
	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
)

// richCompose uses most of what docker/cli's converter turns into fields
// the Engine fills with defaults of its own.
const richCompose = `version: "3.9"
services:
  web:
    image: IMAGE
    environment: {MODE: prod, EMPTY: ""}
    labels: {tier: front}
    healthcheck: {test: ["CMD", "/testapp", "health"], interval: 5s, timeout: 2s, retries: 3, start_period: 1s}
    stop_grace_period: 5s
    init: true
    working_dir: /
    extra_hosts: ["db.local:127.0.0.1"]
    cap_drop: [NET_RAW]
    ulimits: {nofile: {soft: 1024, hard: 2048}}
    logging: {driver: json-file, options: {max-size: 1m}}
    volumes: ["data:/data", {type: tmpfs, target: /tmp}]
    networks: {front: {aliases: [www]}}
    ports: [{target: 8080, published: PORT, mode: host}]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [token]
    deploy:
      replicas: 1
      endpoint_mode: dnsrr
      labels: {team: shop}
      resources: {limits: {cpus: "0.5", memory: 64M}, reservations: {memory: 16M}}
      restart_policy: {condition: on-failure, delay: 1s, max_attempts: 3, window: 10s}
      update_config: {parallelism: 1, delay: 1s, order: start-first, failure_action: rollback, monitor: 5s}
      rollback_config: {parallelism: 2}
      placement: {constraints: [node.role == manager], preferences: [{spread: node.id}], max_replicas_per_node: 2}
  worker:
    image: IMAGE
    restart: unless-stopped
    networks: [front]
    deploy: {mode: global, endpoint_mode: dnsrr}
networks:
  front: {driver: overlay, attachable: true, labels: {x: y}}
volumes:
  data: {}
configs:
  conf: {file: ./app.conf}
secrets:
  token: {file: ./token}
`

// composeRelease converts compose text with docker/cli's converter, as the
// stack package does offline: references carry names, not ids.
func composeRelease(t *testing.T, ns, text string) stack.Release {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"app.conf": "listen 8080\n", "token": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	parsed, err := loader.ParseYAML([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loader.Load(composetypes.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []composetypes.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml"), Config: parsed}},
		Environment: map[string]string{},
	})
	if err != nil {
		t.Fatalf("load compose: %v", err)
	}
	namespace := convert.NewNamespace(ns)
	rel := stack.Release{Name: ns, Services: map[string]swarm.ServiceSpec{}, Configs: map[string]swarm.ConfigSpec{}, Secrets: map[string]swarm.SecretSpec{}}
	used := map[string]struct{}{}
	for _, s := range cfg.Services {
		if len(s.Networks) == 0 {
			used["default"] = struct{}{}
		}
		for n := range s.Networks {
			used[n] = struct{}{}
		}
	}
	rel.Networks, _ = convert.Networks(namespace, cfg.Networks, used)
	secrets, err := convert.Secrets(namespace, cfg.Secrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		rel.Secrets[s.Name] = s
	}
	configs, err := convert.Configs(namespace, cfg.Configs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs {
		rel.Configs[c.Name] = c
	}
	for _, s := range cfg.Services {
		var secretRefs []*swarm.SecretReference
		for _, r := range s.Secrets {
			target := cmpOr(r.Target, r.Source)
			secretRefs = append(secretRefs, &swarm.SecretReference{
				File:       &swarm.SecretReferenceFileTarget{Name: target, UID: "0", GID: "0", Mode: 0o444},
				SecretName: namespace.Scope(r.Source),
			})
		}
		var configRefs []*swarm.ConfigReference
		for _, r := range s.Configs {
			target := cmpOr(r.Target, r.Source)
			configRefs = append(configRefs, &swarm.ConfigReference{
				File:       &swarm.ConfigReferenceFileTarget{Name: target, UID: "0", GID: "0", Mode: 0o444},
				ConfigName: namespace.Scope(r.Source),
			})
		}
		spec, err := convert.Service("1.41", namespace, s, cfg.Networks, cfg.Volumes, secretRefs, configRefs)
		if err != nil {
			t.Fatalf("convert service %s: %v", s.Name, err)
		}
		rel.Services[spec.Name] = spec
	}
	return rel
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestApplyTwiceWritesNothingForConvertedCompose guards the comparison of
// live and desired specs against the defaults the Engine fills into what
// docker/cli's converter leaves empty.
func TestApplyTwiceWritesNothingForConvertedCompose(t *testing.T) {
	f := newFixture(t)
	image := harness.TestImage(t, f.cli, harness.ImageOptions{})
	text := strings.NewReplacer("IMAGE", image, "PORT", fmt.Sprint(harness.FreePort(t))).Replace(richCompose)
	rel := composeRelease(t, f.ns, text)

	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	before := map[string]swarm.Service{}
	for name := range rel.Services {
		before[name] = f.settled(t, name)
	}
	res := mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	if res.Changed() || res.Revision != 0 {
		t.Errorf("second apply changed %v, wrote revision %d; want nothing written", actions(res), res.Revision)
	}
	for name, svc := range before {
		if got := f.service(t, name); !unwritten(svc, got) {
			t.Errorf("service %s %+v → %+v, want no write", name, svc, got)
		}
	}
}
