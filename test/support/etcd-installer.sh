#!/bin/sh
# A minimal etcd installer in POSIX sh, for gate mode on a node without Node.js: what kubeadm's
# etcd phase does, with etcdctl. `init` starts a new single-member cluster; `join` adds this node
# as a learner, starts its etcd and promotes it once it has caught up. etcd runs detached (its own
# session); the script exits 0 once this node's etcd is healthy (init) or a voter (join).
#
#   etcd-installer.sh init|join NAME DATA_DIR PEER_URL CLIENT_URL ENDPOINTS ETCD ETCDCTL
set -eu
mode=$1 name=$2 data=$3 peer=$4 client=$5 endpoints=$6 etcd=$7 etcdctl=$8
unset ETCDCTL_API
say() { echo "[installer $name] $*" >&2; }
ctl() { "$etcdctl" --endpoints="$endpoints" --dial-timeout=2s --command-timeout=5s "$@"; }

# Retries "$@" every half second for up to two minutes; its output goes to $out.
retry() {
  tries=240
  while ! out=$("$@" 2>&1); do
    tries=$((tries - 1))
    if [ "$tries" -le 0 ]; then say "gave up: $*: $out"; exit 1; fi
    sleep 0.5
  done
}

start_etcd() { # INITIAL_CLUSTER STATE
  mkdir -p "$data" && chmod 700 "$data"
  setsid "$etcd" --name="$name" --data-dir="$data" \
    --listen-client-urls="$client" --advertise-client-urls="$client" \
    --listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
    --initial-cluster="$1" --initial-cluster-state="$2" --initial-cluster-token="$name-cluster" \
    --heartbeat-interval=50 --election-timeout=750 </dev/null >>"$data.log" 2>&1 &
  say "started etcd ($2, pid $!)"
}

case "$mode" in
  init)
    start_etcd "$name=$peer" new
    retry "$etcdctl" --endpoints="$client" --dial-timeout=2s endpoint health
    say "etcd is healthy: a new cluster"
    ;;
  join)
    retry ctl member add "$name" --peer-urls="$peer" --learner
    id=$(printf '%s\n' "$out" | sed -n 's/^Member \([0-9a-f]*\) added.*/\1/p')
    initial=$(printf '%s\n' "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')
    say "added learner $id"
    start_etcd "$initial" existing
    retry ctl member promote "$id"
    say "member $id is a voter"
    ;;
  *)
    say "init or join?"
    exit 2
    ;;
esac
