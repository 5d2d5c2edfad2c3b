package stack

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/cli/cli/compose/loader"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/google/go-cmp/cmp"
)

// loadYAML loads one inline compose document with docker/cli's loader.
func loadYAML(t *testing.T, doc string) *composetypes.Config {
	t.Helper()
	dict, err := loader.ParseYAML([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loader.Load(composetypes.ConfigDetails{
		WorkingDir:  "/repo",
		ConfigFiles: []composetypes.ConfigFile{{Filename: "compose.yaml", Config: dict}},
		Environment: map[string]string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestHostPathAllowedComparesCleanPathsOnBoundaries(t *testing.T) {
	tests := []struct {
		path    string
		allowed []string
		want    bool
	}{
		{"/data/app", []string{"/data"}, true},
		{"/data", []string{"/data"}, true},
		{"/data2", []string{"/data"}, false},
		{"/data/../etc", []string{"/data"}, false},
		{"/data/app/", []string{"/data/"}, true},
		{"/etc", nil, false},
		{"/etc/passwd", []string{"/"}, true},
		{"/var/run/docker.sock", []string{"/var/lib", "/srv"}, false},
		{"/var/run/docker.sock", []string{"/var/run/docker.sock"}, true},
		{"/var/run/docker.sock", []string{"/var/run"}, true},
		{"/var/run/docker.sock.bak", []string{"/var/run/docker.sock"}, false},
		{"/srv", []string{"srv"}, false},
		{`C:\data`, []string{"/data"}, false},
		{`C:\data`, []string{"/"}, true},
		// Swarm's templates: a name or a slot stays one element; a label
		// could be "../etc".
		{"/data/{{.Task.Slot}}", []string{"/data"}, true},
		{"/data/{{ .Node.Hostname }}/{{.Service.Name}}", []string{"/data"}, true},
		{`/data/{{index .Service.Labels "dir"}}`, []string{"/data"}, false},
		{"/data/{{.Task.Slot}}/../../etc", []string{"/data"}, false},
	}
	for _, tt := range tests {
		if got := hostPathAllowed(tt.path, tt.allowed); got != tt.want {
			t.Errorf("hostPathAllowed(%q, %q) = %v, want %v", tt.path, tt.allowed, got, tt.want)
		}
	}
}

func TestConvertRefusesWhatAllowDoesNotList(t *testing.T) {
	const svc = "services:\n  web:\n    image: busybox\n"
	tests := []struct {
		name    string
		compose string
		allow   Allow
		want    []string // every line must appear in the error; empty means success
	}{
		{
			name:    "host bind mount refused by default",
			compose: svc + "    volumes:\n      - /etc:/host-etc:ro\n",
			want:    []string{"services.web.volumes[0]: host path /etc is not allowed; list it in allow.hostPaths"},
		},
		{
			name:    "host bind mount outside the allowed prefix refused",
			compose: svc + "    volumes:\n      - /data2/x:/x\n",
			allow:   Allow{HostPaths: []string{"/data"}},
			want:    []string{"services.web.volumes[0]: host path /data2/x is not allowed"},
		},
		{
			name:    "host bind mount under an allowed prefix accepted",
			compose: svc + "    volumes:\n      - /data/x:/x\n",
			allow:   Allow{HostPaths: []string{"/data"}},
		},
		{
			name:    "root allows every host path",
			compose: svc + "    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n",
			allow:   Allow{HostPaths: []string{"/"}},
		},
		{
			name:    "docker socket needs its own entry",
			compose: svc + "    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n        target: /var/run/docker.sock\n",
			allow:   Allow{HostPaths: []string{"/var/lib"}},
			want:    []string{"services.web.volumes[0]: host path /var/run/docker.sock is not allowed"},
		},
		{
			name:    "local volume binding a host directory is a host path",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: none\n      o: bind\n      device: /etc\n",
			want:    []string{"volumes.data.driver_opts.device: host path /etc is not allowed"},
		},
		{
			name:    "local volume binding the node's root through rbind is a host path",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: none\n      o: rbind\n      device: /\n",
			want:    []string{"volumes.data.driver_opts.device: host path / is not allowed"},
		},
		{
			name:    "bind among other mount options, spaced and in capitals, is a host path",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver: local\n    driver_opts:\n      type: none\n      o: \"ro, BIND\"\n      device: /etc\n",
			want:    []string{"volumes.data.driver_opts.device: host path /etc is not allowed"},
		},
		{
			name:    "local volume mounting a node's block device is a host path",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: ext4\n      device: /dev/sda1\n",
			want:    []string{"volumes.data.driver_opts.device: host path /dev/sda1 is not allowed"},
		},
		{
			name:    "overlay layers of host directories are host paths",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: overlay\n      device: overlay\n      o: lowerdir=/etc:/root,upperdir=/tmp/u,workdir=/tmp/w\n",
			allow:   Allow{HostPaths: []string{"/tmp"}},
			want: []string{
				"volumes.data.driver_opts.o: host path /etc is not allowed",
				"volumes.data.driver_opts.o: host path /root is not allowed",
			},
		},
		{
			name:    "a bind of an allowed directory is accepted",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: none\n      o: rbind,ro\n      device: /srv/app\n",
			allow:   Allow{HostPaths: []string{"/srv"}},
		},
		{
			name:    "an NFS volume is no host path",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: nfs\n      o: addr=10.0.0.5,rw,nfsvers=4\n      device: \":/export/app\"\n",
		},
		{
			name:    "a tmpfs volume is no host path",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    driver_opts:\n      type: tmpfs\n      o: size=100m,uid=1000\n      device: tmpfs\n",
		},
		{
			name:    "a named volume outside the namespace is another stack's and needs allow.volumes",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    name: victim_data\n",
			want:    []string{`volumes.data: volume "victim_data" is outside release app's namespace; list it in allow.volumes`},
		},
		{
			name:    "a named volume outside the namespace is accepted when listed",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    name: shared_data\n",
			allow:   Allow{Volumes: []string{"shared_data"}},
		},
		{
			name:    "a named volume inside the namespace is the release's own",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    name: app_db\n",
		},
		{
			name:    "a volume named like the namespace without the separator is outside it",
			compose: svc + "    volumes:\n      - data:/d\nvolumes:\n  data:\n    name: application_db\n",
			want:    []string{`volumes.data: volume "application_db" is outside release app's namespace`},
		},
		{
			name:    "an added capability refused by default",
			compose: svc + "    cap_add: [SYS_ADMIN]\n    cap_drop: [ALL]\n",
			want:    []string{"services.web.cap_add[0]: capability SYS_ADMIN is not allowed; list it in allow.capabilities"},
		},
		{
			name:    "a listed capability accepted, with or without CAP_ and in any case",
			compose: svc + "    cap_add: [CAP_NET_ADMIN, net_raw]\n",
			allow:   Allow{Capabilities: []string{"net_admin", "CAP_NET_RAW"}},
		},
		{
			name:    "a capability beside the listed one refused",
			compose: svc + "    cap_add: [NET_ADMIN, SYS_PTRACE]\n",
			allow:   Allow{Capabilities: []string{"NET_ADMIN"}},
			want:    []string{"services.web.cap_add[1]: capability SYS_PTRACE is not allowed"},
		},
		{
			name:    "ALL added needs ALL listed",
			compose: svc + "    cap_add: [ALL]\n",
			allow:   Allow{Capabilities: []string{"NET_ADMIN", "SYS_ADMIN"}},
			want:    []string{"services.web.cap_add[0]: capability ALL is not allowed"},
		},
		{
			name:    "ALL listed allows every capability",
			compose: svc + "    cap_add: [SYS_ADMIN, ALL]\n",
			allow:   Allow{Capabilities: []string{"all"}},
		},
		{
			name:    "external network refused unless listed",
			compose: svc + "    networks: [proxy]\nnetworks:\n  proxy:\n    external: true\n    name: traefik-public\n",
			want:    []string{`networks.proxy: external network "traefik-public" is not allowed; list it in allow.networks`},
		},
		{
			name:    "external network accepted by its real name",
			compose: svc + "    networks: [proxy]\nnetworks:\n  proxy:\n    external: true\n    name: traefik-public\n",
			allow:   Allow{Networks: []string{"traefik-public"}},
		},
		{
			name:    "external config, secret and volume refused unless listed",
			compose: svc + "    configs: [c]\n    secrets: [s]\n    volumes: [v:/v]\nconfigs:\n  c:\n    external: true\nsecrets:\n  s:\n    external: true\n    name: real-s\nvolumes:\n  v:\n    external: true\n",
			want: []string{
				`configs.c: external config "c" is not allowed; list it in allow.configs`,
				`secrets.s: external secret "real-s" is not allowed; list it in allow.secrets`,
				`volumes.v: external volume "v" is not allowed; list it in allow.volumes`,
			},
		},
		{
			name:    "external config, secret and volume accepted when listed",
			compose: svc + "    configs: [c]\n    secrets: [s]\n    volumes: [v:/v]\nconfigs:\n  c:\n    external: true\nsecrets:\n  s:\n    external: true\n    name: real-s\nvolumes:\n  v:\n    external: true\n",
			allow:   Allow{Configs: []string{"c"}, Secrets: []string{"real-s"}, Volumes: []string{"v"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert(loadYAML(t, tt.compose), Options{Owner: testOwner("app"), Allow: tt.allow})
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Convert() = %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Convert() = nil error, want %q", tt.want)
			}
			if !errors.Is(err, ErrNotAllowed) {
				t.Errorf("Convert() error %v does not wrap ErrNotAllowed", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Convert() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestConvertRefusesSkepLabelsFromGit(t *testing.T) {
	const svc = "services:\n  web:\n    image: busybox\n"
	tests := []struct {
		name    string
		compose string
		want    string
	}{
		{"on a config, forging a revision record", svc + "    configs: [rev]\nconfigs:\n  rev:\n    file: ./rev\n    labels:\n      io.skep.kind: revision\n      io.skep.revision: \"99\"\n", "configs.rev.labels: label io.skep.kind is reserved for skep"},
		{"on a secret", svc + "    secrets: [s]\nsecrets:\n  s:\n    file: ./s\n    labels: [io.skep.kind=hold]\n", "secrets.s.labels: label io.skep.kind is reserved for skep"},
		{"on a network", svc + "    networks: [n]\nnetworks:\n  n:\n    labels:\n      io.skep.controller: other\n", "networks.n.labels: label io.skep.controller is reserved for skep"},
		{"on a volume", svc + "    volumes: [v:/v]\nvolumes:\n  v:\n    labels:\n      io.skep.release: other\n", "volumes.v.labels: label io.skep.release is reserved for skep"},
		{"on a service's deploy labels", svc + "    deploy:\n      labels:\n        io.skep.spec-hash: x\n", "services.web.deploy.labels: label io.skep.spec-hash is reserved for skep"},
		{"on a service's container labels, in any case", svc + "    labels:\n      IO.Skep.Kind: hook\n", "services.web.labels: label IO.Skep.Kind is reserved for skep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert(loadYAML(t, tt.compose), Options{Owner: testOwner("app"), Files: map[string][]byte{"/repo/rev": []byte("x"), "/repo/s": []byte("x")}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Convert() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConvertChecksTheAddressesTheEngineConnectsTo(t *testing.T) {
	doc := `services:
  web:
    image: busybox
    volumes: [nfs:/n, share:/s, disk:/d]
    logging:
      driver: syslog
      options:
        syslog-address: "tcp://169.254.169.254:514"
        tag: web
  gelf:
    image: busybox
    logging:
      driver: gelf
      options: {gelf-address: "udp://10.0.0.1:12201"}
  fluent:
    image: busybox
    logging:
      driver: fluentd
      options: {fluentd-address: "fluent.internal:24224"}
  splunk:
    image: busybox
    logging:
      driver: splunk
      options: {splunk-url: "https://[fe80::1]:8088", splunk-token: x}
  local:
    image: busybox
    logging:
      driver: syslog
      options: {syslog-address: "unix:///dev/log"}
volumes:
  nfs:
    driver_opts: {type: nfs, o: "nfsvers=4, ADDR=169.254.1.1,rw", device: ":/export"}
  share:
    driver_opts: {type: cifs, o: "username=u", device: "//files.internal/share"}
  disk:
    driver_opts: {type: tmpfs, device: tmpfs}
`
	var checked []string
	refuse := map[string]bool{"169.254.169.254": true, "169.254.1.1": true, "fe80::1": true}
	_, err := Convert(loadYAML(t, doc), Options{Owner: testOwner("app"), CheckAddress: func(host string) error {
		checked = append(checked, host)
		if refuse[host] {
			return errors.New("address refused: " + host + " is an internal address")
		}
		return nil
	}})
	wantChecked := []string{"fluent.internal", "10.0.0.1", "fe80::1", "169.254.169.254", "169.254.1.1", "files.internal"}
	if diff := cmp.Diff(wantChecked, checked); diff != "" {
		t.Errorf("addresses checked (-want +got):\n%s", diff)
	}
	for _, w := range []string{
		"services.web.logging.options.syslog-address: address refused: 169.254.169.254 is an internal address",
		"services.splunk.logging.options.splunk-url: address refused: fe80::1 is an internal address",
		"volumes.nfs.driver_opts.o: address refused: 169.254.1.1 is an internal address",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Convert() = %v, want a line %q", err, w)
		}
	}
	if !errors.Is(err, ErrNotAllowed) {
		t.Errorf("Convert() error %v does not wrap ErrNotAllowed", err)
	}
}
