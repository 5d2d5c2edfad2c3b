# Sourced by cluster-up, cluster-down and cluster-node: the test cluster's
# layout and how one node's engine is started, stopped and cut off.
#
# Five Docker Engines, three managers (m1-m3) and two workers (w1, w2), each
# in its own network namespace skep-cl-NODE, on a veth pair whose host end
# (skcl-NODE) sits on the bridge skepcl0 (10.232.0.1/24). Each dockerd also
# has its own UTS namespace (so its own hostname, skep-NODE, which is the
# swarm node's name) and its own mount namespace, private to it and its
# containerd: the container mounts die with them, and the small worker's
# /proc/meminfo can be replaced for it alone.

cluster_state=${SKEP_CLUSTER_STATE_DIR:-/tmp/skep-cluster}
cluster_run=${SKEP_CLUSTER_RUN_DIR:-/run/skep-cluster}
cluster_bridge=skepcl0
cluster_gw=10.232.0.1
cluster_prefix=24
cluster_nodes=(m1 m2 m3 w1 w2)
cluster_tcp_port=2376
# Overlay networks take their subnets from here, away from the bridge's.
cluster_addr_pool=10.240.0.0/12
cluster_registry_port=${SKEP_CLUSTER_REGISTRY_PORT:-5055}

# node_addr NODE: its address on the bridge.
node_addr() {
  case "$1" in
    m1) echo 10.232.0.11 ;; m2) echo 10.232.0.12 ;; m3) echo 10.232.0.13 ;;
    w1) echo 10.232.0.21 ;; w2) echo 10.232.0.22 ;;
    *) return 1 ;;
  esac
}
node_role() { case "$1" in m*) echo manager ;; *) echo worker ;; esac; }
# node_zone NODE: the zone label; a and b each hold a manager and a worker.
node_zone() { case "$1" in m1 | m3 | w1) echo a ;; *) echo b ;; esac; }
node_host() { echo "skep-$1"; }
node_netns() { echo "skep-cl-$1"; }
node_if() { echo "skcl-$1"; }
node_sock() { echo "$cluster_run/$1/docker.sock"; }
node_pidfile() { echo "$cluster_run/$1/dockerd.pid"; }
node_exec() { echo "$cluster_run/$1/exec"; }
node_cgroup() { echo "skep-cluster-$1"; }
is_node() { node_addr "$1" >/dev/null 2>&1; }

# The small worker announces one CPU (dockerd counts the CPUs it may run
# on) and 1 GiB of memory (dockerd reads /proc/meminfo, replaced in its
# mount namespace): what Engine 20.10 reports as a node's resources.
small_node=w2
small_mem_kib=1048576
# SKEP_CLUSTER_SMALL_ARCH=i686 makes the small worker announce another
# architecture too (setarch changes what uname tells its dockerd): the
# scheduler then keeps tasks of amd64-pinned images off it ("unsupported
# platform"). Off by default, since every image here is amd64.
small_arch=${SKEP_CLUSTER_SMALL_ARCH:-}

engine() { local n=$1; shift; docker -H "unix://$(node_sock "$n")" "$@"; }
engine_answers() { engine "$1" info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

. "${BASH_SOURCE[0]%/*}/pidfile.sh"

# node_network NODE: its namespace, veth pair, address and routes, and the
# NAT that sends TCP to 127.0.0.1 inside it (but its engine's own ports) to
# the host's 127.0.0.1, where registries listen. Idempotent.
node_network() {
  local n=$1 ns addr hif
  ns=$(node_netns "$n") addr=$(node_addr "$n") hif=$(node_if "$n")
  [ -e "/run/netns/$ns" ] || ip netns add "$ns"
  if ! ip link show "$hif" >/dev/null 2>&1; then
    ip netns exec "$ns" ip link del eth0 >/dev/null 2>&1 || true
    ip link add "$hif" type veth peer name eth0 netns "$ns"
  fi
  ip link set "$hif" master "$cluster_bridge"
  ip link set "$hif" up
  ip netns exec "$ns" sh -e -c "
    ip link set lo up
    ip -4 -o addr show dev eth0 | grep -q ' $addr/' || ip addr add $addr/$cluster_prefix dev eth0
    ip link set eth0 up
    ip route replace default via $cluster_gw dev eth0
    sysctl -qw net.ipv4.conf.eth0.route_localnet=1
    iptables -t nat -N SKEP-CLUSTER 2>/dev/null || true
    iptables -t nat -C SKEP-CLUSTER -p tcp -m multiport ! --dports 2375:2377,7946 -j DNAT --to-destination $cluster_gw 2>/dev/null ||
      iptables -t nat -A SKEP-CLUSTER -p tcp -m multiport ! --dports 2375:2377,7946 -j DNAT --to-destination $cluster_gw
    iptables -t nat -C OUTPUT -o lo -d 127.0.0.1/32 -j SKEP-CLUSTER 2>/dev/null ||
      iptables -t nat -A OUTPUT -o lo -d 127.0.0.1/32 -j SKEP-CLUSTER
    iptables -t nat -C POSTROUTING -s 127.0.0.1/32 -o eth0 -j SNAT --to-source $addr 2>/dev/null ||
      iptables -t nat -A POSTROUTING -s 127.0.0.1/32 -o eth0 -j SNAT --to-source $addr
  "
}

# node_start NODE: start its dockerd unless one runs; it does not wait.
node_start() {
  local n=$1 dir run pidfile execroot launcher
  dir=$cluster_state/$n run=$cluster_run/$n
  pidfile=$(node_pidfile "$n") execroot=$(node_exec "$n")
  if pidfile_has "$pidfile" "$execroot"; then return 0; fi
  mkdir -p "$dir/data" "$execroot"
  rm -f "$pidfile" "$(node_sock "$n")"
  # dockerd takes a live pid in its containerd's pid file for its
  # containerd; after a kill the pid may be any process's.
  local cpid=$execroot/containerd/containerd.pid
  pidfile_has "$cpid" "$execroot/containerd" || rm -f "$cpid"
  local labels='"skep.node='"$n"'"' taskset=
  if [ "$n" = "$small_node" ]; then
    labels+=', "skep.size=small"'
    taskset="taskset -c 0"
    [ -z "$small_arch" ] || taskset="setarch $small_arch $taskset"
    awk -v kib="$small_mem_kib" '
      $1 == "MemTotal:" { printf "MemTotal:       %d kB\n", kib; next }
      $1 == "MemFree:" || $1 == "MemAvailable:" { printf "%-16s%d kB\n", $1, kib / 2; next }
      { print }' /proc/meminfo >"$dir/meminfo"
  fi
  cat >"$dir/daemon.json" <<EOF
{
  "deprecated-key-path": "$dir/key.json",
  "labels": [$labels]
}
EOF
  launcher=$dir/start.sh
  {
    echo '#!/bin/sh'
    echo "# Written by scripts/cluster-up: node $n's dockerd, in its own UTS and mount namespaces."
    echo 'set -e'
    echo "hostname $(node_host "$n")"
    [ "$n" != "$small_node" ] || echo "mount --bind $dir/meminfo /proc/meminfo"
    echo "exec $taskset dockerd \\"
    echo "  --config-file $dir/daemon.json \\"
    echo "  --data-root $dir/data \\"
    echo "  --exec-root $execroot \\"
    echo "  --pidfile $pidfile \\"
    echo "  --cgroup-parent /$(node_cgroup "$n") \\"
    echo "  --shutdown-timeout 3 \\"
    echo "  --containerd-namespace skep-cl-$n \\"
    echo "  --containerd-plugins-namespace skep-cl-$n-plugins \\"
    echo "  -H unix://$(node_sock "$n") \\"
    echo "  -H tcp://$(node_addr "$n"):$cluster_tcp_port \\"
    echo "  --tlsverify --tlscacert $cluster_state/tls/server/ca.pem \\"
    echo "  --tlscert $cluster_state/tls/server/cert.pem --tlskey $cluster_state/tls/server/key.pem"
  } >"$launcher"
  chmod 755 "$launcher"
  nohup nsenter --net="/run/netns/$(node_netns "$n")" \
    unshare --uts --mount --propagation slave "$launcher" >>"$dir/dockerd.log" 2>&1 </dev/null &
  echo $! >"$run/launcher.pid"
}

# node_wait NODE SECONDS: wait until its engine answers.
node_wait() {
  local n=$1 wait=$2 i
  for ((i = 0; i < wait * 4; i++)); do
    engine_answers "$n" && return 0
    if [ -f "$cluster_run/$n/launcher.pid" ] && ! kill -0 "$(cat "$cluster_run/$n/launcher.pid")" 2>/dev/null; then
      tail -n 20 "$cluster_state/$n/dockerd.log" >&2 || true
      echo "node $n: dockerd exited during start; see $cluster_state/$n/dockerd.log" >&2
      return 1
    fi
    sleep 0.25
  done
  echo "node $n: dockerd did not answer within ${wait}s; see $cluster_state/$n/dockerd.log" >&2
  return 1
}

# node_stop NODE SIGNAL WAIT: stop its dockerd. TERM is a clean stop (its
# containers stopped); KILL is a crash: dockerd, its containerd, the shims
# and the containers all die at once, as on a machine that lost power.
node_stop() {
  local n=$1 sig=$2 wait=$3 pidfile execroot pid proc
  pidfile=$(node_pidfile "$n") execroot=$(node_exec "$n")
  if pidfile_has "$pidfile" "$execroot"; then
    pid=$(cat "$pidfile")
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < wait * 4; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "node $n: dockerd still running after ${wait}s; sending KILL" >&2
      kill -9 "$pid" 2>/dev/null || true
      sig=KILL
    fi
  fi
  rm -f "$pidfile"
  # After a KILL (or a TERM that needed one) its containerd and shims
  # outlive it: they name its exec root.
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    cmdline_has "$pid" "$execroot/containerd" && kill -9 "$pid" 2>/dev/null || true
  done
  # Containers whose shim was killed live on in the node's cgroup, which
  # holds nothing else.
  local cg
  cg=$(node_cgroup "$n")
  for pid in $(cat /sys/fs/cgroup/*/"$cg"/*/cgroup.procs /sys/fs/cgroup/"$cg"/*/cgroup.procs 2>/dev/null | sort -u); do
    kill -9 "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 40; i++)); do
    [ -z "$(cat /sys/fs/cgroup/*/"$cg"/*/cgroup.procs /sys/fs/cgroup/"$cg"/*/cgroup.procs 2>/dev/null)" ] && break
    sleep 0.25
  done
  rm -f "$(node_sock "$n")"
}

# node_cut NODE / node_heal NODE: take its link to the bridge down and up;
# its engine runs on, cut off from the others and from the host's network.
node_cut() { ip link set "$(node_if "$1")" down; }
node_heal() { ip link set "$(node_if "$1")" up; }
