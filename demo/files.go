package demo

import "fmt"

// appCompose is the demo application's compose file: one service on the
// demo image, published in host mode (no IPVS needed), with a config from a
// file in the repository.
// The choices keep it working on a one-node swarm without a registry:
// dnsrr and host mode need no routing mesh, and stop-first frees the
// host port before the new task binds it.
func appCompose(port int) string {
	return fmt.Sprintf(`# The demo application Skep deploys. Change it and commit: Skep syncs it.
services:
  web:
    image: ${IMAGE}
    deploy:
      replicas: 1
      endpoint_mode: dnsrr
      update_config:
        order: stop-first
    ports:
      - target: %d
        published: %d
        mode: host
    configs:
      - source: welcome
        target: /welcome.txt
configs:
  welcome:
    file: ./welcome.txt
`, AppPort, port)
}

// appSet is the example app set: the demo application, automated, with
// live drift detection so an out-of-band change is corrected.
// The 10s interval makes a commit show within the showcase's wait.
func appSet(repo string) string {
	return fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: demo
    release: %s
    source:
      repo: %s
      revision: main
    syncPolicy:
      automated: true
      interval: 10s
      resolveImage: never   # the demo image is local; there is no registry to ask
    driftDetection: live    # compare the running service with git, and correct it
`, Release, repo)
}
