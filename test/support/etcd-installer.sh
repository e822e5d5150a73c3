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

etcd_pid=""

# Gives up with the last lines etcd wrote, so a failed run says why.
give_up() {
  say "gave up: $*"
  if [ -f "$data.log" ]; then tail -n 5 "$data.log" | sed "s/^/[installer $name] etcd: /" >&2; fi
  exit 1
}

# Retries "$@" every half second for up to two minutes (by the clock, however long each try
# takes); its output goes to $out. Once this script has started etcd, an etcd that exited ends
# the wait at once.
retry() {
  deadline=$(($(date +%s) + 120))
  while ! out=$("$@" 2>&1); do
    if [ -n "$etcd_pid" ] && ! kill -0 "$etcd_pid" 2>/dev/null; then give_up "etcd (pid $etcd_pid) exited: $out"; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then give_up "$*: $out"; fi
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
  etcd_pid=$!
  say "started etcd ($2, pid $etcd_pid)"
}

# Adds this node as a learner. An add whose answer was lost (etcdctl's command timeout on a
# busy machine) leaves the member in place, and etcd refuses the next add for its peer URL: then
# the member list gives its ID and the initial cluster, printed as the add prints them.
add_learner() {
  if added=$(ctl member add "$name" --peer-urls="$peer" --learner 2>&1); then printf '%s\n' "$added"; return 0; fi
  case "$added" in *"already exists"*) ;; *) printf '%s\n' "$added"; return 1 ;; esac
  list=$(ctl member list -w simple 2>&1) || { printf '%s\n' "$list"; return 1; }
  # Lines: ID, STATUS, NAME, PEER ADDRS, CLIENT ADDRS, IS LEARNER
  id=$(printf '%s\n' "$list" | awk -F', ' -v p="$peer" '$4 == p { print $1 }')
  [ -n "$id" ] || { printf '%s\n' "$added"; return 1; }
  initial=$(printf '%s\n' "$list" | awk -F', ' -v p="$peer" -v n="$name" '
    $4 == p { out = out sep n "=" p; sep = "," ; next }
    $3 != "" { out = out sep $3 "=" $4; sep = "," }
    END { print out }')
  say "learner $id was already added"
  printf 'Member %s added\nETCD_INITIAL_CLUSTER="%s"\n' "$id" "$initial"
}

case "$mode" in
  init)
    start_etcd "$name=$peer" new
    retry "$etcdctl" --endpoints="$client" --dial-timeout=2s endpoint health
    say "etcd is healthy: a new cluster"
    ;;
  join)
    retry add_learner
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
