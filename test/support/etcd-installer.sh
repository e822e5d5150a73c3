#!/bin/sh
# A minimal etcd installer in POSIX sh, for gate mode on a node without Node.js: what kubeadm's
# etcd phase does, with etcdctl. `init` starts a new single-member cluster; `join` adds this node
# as a learner, starts its etcd and promotes it once it has caught up. etcd runs detached (its own
# session); the script exits 0 once this node's etcd is healthy (init) or a voter (join).
#
#   etcd-installer.sh init|join NAME DATA_DIR PEER_URL CLIENT_URL ENDPOINTS ETCD ETCDCTL [PKI_DIR]
#
# With PKI_DIR holding the cluster's etcd CA (ca.crt and ca.key, shared by every node as kubeadm
# shares /etc/kubernetes/pki/etcd), etcd runs with TLS and client-certificate auth on both ports:
# this node's peer and server keys and certificates are made there with openssl when missing, and
# etcdctl presents the server certificate (made for clientAuth too).
set -eu
mode=$1 name=$2 data=$3 peer=$4 client=$5 endpoints=$6 etcd=$7 etcdctl=$8 pki=${9:-}
unset ETCDCTL_API
say() { echo "[installer $name] $*" >&2; }

# etcdctl with this node's certificate when there is a PKI_DIR.
tls_ctl() { if [ -n "$pki" ]; then "$@" --cacert="$pki/ca.crt" --cert="$pki/server.crt" --key="$pki/server.key"; else "$@"; fi; }
ctl() { tls_ctl "$etcdctl" --endpoints="$endpoints" --dial-timeout=2s --command-timeout=5s "$@"; }
# The other members' endpoints: once this node's etcd runs as a learner it answers "rpc not
# supported for learner" to a membership change, and etcdctl may send every try to it.
others=$(printf '%s\n' "$endpoints" | tr ',' '\n' | grep -vxF "$client" | paste -sd, -)
ctl_others() { tls_ctl "$etcdctl" --endpoints="${others:-$endpoints}" --dial-timeout=2s --command-timeout=5s "$@"; }

# A URL's host as a subjectAltName entry: IP addresses as IP, names as DNS.
alt_name() {
  host=${1#*://}; host=${host%%/*}
  case "$host" in
    \[*) host=${host#\[}; host=${host%%]*}; echo "IP:$host"; return ;;
  esac
  host=${host%:*}
  case "$host" in *[!0-9.]*) echo "DNS:$host" ;; *) echo "IP:$host" ;; esac
}

# Makes $pki/KIND.key and KIND.crt (ECDSA P-256, signed by the cluster CA, for serverAuth and
# clientAuth) unless both are there; the key is moved into place before the certificate.
make_certificate() { # KIND SUBJECT_ALT_NAMES
  if [ -f "$pki/$1.crt" ] && [ -f "$pki/$1.key" ]; then return 0; fi
  for f in ca.crt ca.key; do [ -f "$pki/$f" ] || give_up "$pki/$f is missing: PKI_DIR holds the cluster's etcd CA pair"; done
  tmp="$pki/.$1-$$"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=$2" >"$tmp.ext"
  if ! err=$( (umask 077 &&
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp.key" &&
    openssl req -new -key "$tmp.key" -subj "/CN=$name" -out "$tmp.csr" &&
    openssl x509 -req -in "$tmp.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 365 -extfile "$tmp.ext" -out "$tmp.crt") 2>&1 >/dev/null); then
    rm -f "$tmp.ext" "$tmp.csr" "$tmp.key" "$tmp.crt"
    give_up "making the $1 certificate with openssl failed: $err"
  fi
  mv "$tmp.key" "$pki/$1.key" && mv "$tmp.crt" "$pki/$1.crt" && chmod 644 "$pki/$1.crt"
  rm -f "$tmp.ext" "$tmp.csr"
  say "made $pki/$1.crt"
}

etcd_pid=""

# Gives up with the last lines etcd wrote, then why: the reason last, where a summary of the
# output's last lines finds it.
give_up() {
  if [ -f "$data.log" ]; then tail -n 5 "$data.log" | sed "s/^/[installer $name] etcd: /" >&2; fi
  say "gave up: $*"
  exit 1
}

# Retries "$@" every half second for up to two minutes (by the clock, however long each try
# takes); its output goes to $out. Once this script has started etcd, an etcd that exited ends
# the wait at once.
retry() {
  deadline=$(($(date +%s) + 120))
  said=""
  while ! out=$("$@" 2>&1); do
    if [ -n "$etcd_pid" ] && ! kill -0 "$etcd_pid" 2>/dev/null; then give_up "etcd (pid $etcd_pid) exited: $out"; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then give_up "$*: $out"; fi
    # Each new answer once, so a long wait shows what it waited on.
    last_line=$(printf '%s\n' "$out" | tail -n 1)
    if [ "$last_line" != "$said" ]; then say "$1: $last_line; retrying"; said=$last_line; fi
    sleep 0.5
  done
}

start_etcd() { # INITIAL_CLUSTER STATE
  initial=$1 state=$2
  # With a PKI_DIR: TLS and client-certificate auth on both ports.
  set --
  if [ -n "$pki" ]; then
    set -- --cert-file="$pki/server.crt" --key-file="$pki/server.key" --trusted-ca-file="$pki/ca.crt" --client-cert-auth \
      --peer-cert-file="$pki/peer.crt" --peer-key-file="$pki/peer.key" --peer-trusted-ca-file="$pki/ca.crt" --peer-client-cert-auth
  fi
  mkdir -p "$data" && chmod 700 "$data"
  setsid "$etcd" --name="$name" --data-dir="$data" \
    --listen-client-urls="$client" --advertise-client-urls="$client" \
    --listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
    --initial-cluster="$initial" --initial-cluster-state="$state" --initial-cluster-token="$name-cluster" \
    --heartbeat-interval=50 --election-timeout=750 "$@" </dev/null >>"$data.log" 2>&1 &
  etcd_pid=$!
  say "started etcd ($state, pid $etcd_pid)"
}

# Adds this node as a learner. An add whose answer was lost (etcdctl's command timeout on a
# busy machine) leaves the member in place, and etcd refuses the next add for its peer URL: then
# the member list gives its ID and the initial cluster, printed as the add prints them.
add_learner() {
  if added=$(ctl member add "$name" --peer-urls="$peer" --learner 2>&1); then printf '%s\n' "$added"; return 0; fi
  case "$added" in *"already exists"*) ;; *) printf '%s\n' "$added"; return 1 ;; esac
  list=$(ctl member list -w simple 2>&1) || { printf '%s\n' "$list"; return 1; }
  # Lines: ID, STATUS, NAME, PEER ADDRS, CLIENT ADDRS, IS LEARNER; etcdctl 3.6 also logs a warning
  # (into $list) for each endpoint that refused: only the member lines are read.
  list=$(printf '%s\n' "$list" | awk -F', ' 'NF == 6 && $1 ~ /^[0-9a-f]+$/')
  id=$(printf '%s\n' "$list" | awk -F', ' -v p="$peer" '$4 == p { print $1 }')
  [ -n "$id" ] || { printf '%s\n' "$added"; return 1; }
  initial=$(printf '%s\n' "$list" | awk -F', ' -v p="$peer" -v n="$name" '
    $4 == p { out = out sep n "=" p; sep = "," ; next }
    $3 != "" { out = out sep $3 "=" $4; sep = "," }
    END { print out }')
  say "learner $id was already added"
  printf 'Member %s added\nETCD_INITIAL_CLUSTER="%s"\n' "$id" "$initial"
}

# Promotes learner $id. A promote whose answer was lost (etcdctl's command timeout on a busy
# machine) went through all the same, and etcd refuses the next one: then the member list
# decides (this member a voter: done).
promote_learner() {
  if out=$(ctl_others member promote "$id" 2>&1); then return 0; fi
  case "$out" in *"can only promote a learner member"*) ;; *) printf '%s\n' "$out"; return 1 ;; esac
  case "$out" in *"in sync with leader"*) printf '%s\n' "$out"; return 1 ;; esac
  list=$(ctl_others member list -w simple 2>&1) || { printf '%s\n' "$list"; return 1; }
  # Lines: ID, STATUS, NAME, PEER ADDRS, CLIENT ADDRS, IS LEARNER
  voter=$(printf '%s\n' "$list" | awk -F', ' -v id="$id" '$1 == id && $6 == "false" { print "yes" }')
  [ "$voter" = yes ] || { printf '%s\n' "$out"; return 1; }
}

if [ -n "$pki" ]; then
  make_certificate peer "$(alt_name "$peer")"
  server_names=$(alt_name "$client")
  [ "$server_names" = "IP:127.0.0.1" ] || server_names="$server_names,IP:127.0.0.1"
  make_certificate server "$server_names"
fi

case "$mode" in
  init)
    start_etcd "$name=$peer" new
    retry tls_ctl "$etcdctl" --endpoints="$client" --dial-timeout=2s endpoint health
    say "etcd is healthy: a new cluster"
    ;;
  join)
    retry add_learner
    # etcdctl prints the ID with %16x: an ID under 16 hex digits comes padded with spaces.
    id=$(printf '%s\n' "$out" | sed -n 's/^Member  *\([0-9a-f][0-9a-f]*\) added.*/\1/p')
    initial=$(printf '%s\n' "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')
    say "added learner $id"
    start_etcd "$initial" existing
    retry promote_learner
    say "member $id is a voter"
    ;;
  *)
    say "init or join?"
    exit 2
    ;;
esac
