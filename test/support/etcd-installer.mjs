#!/usr/bin/env node
// An installer that knows nothing of the join broker, for the gate-mode tests. It does what
// kubeadm's etcd phase does, with the real etcdctl:
//
//   init: start etcd with --initial-cluster-state new (kubeadm init), wait until it is healthy.
//   join: `etcdctl member add --learner` (reusing a member that already has this peer URL, as
//         kubeadm does since #92118), start etcd with --initial-cluster-state existing, then
//         `etcdctl member promote` until the member is a voter. An add or promote etcd refuses
//         "for now" (too many learners, unhealthy cluster, learner not in sync) is retried every
//         500 ms for up to 2 minutes, kubeadm's EtcdAPICallRetryInterval and EtcdAPICallTimeout.
//
// By default etcd is left running in a session of its own and the installer exits 0 once the
// node is a voter (kubeadm: the kubelet runs etcd). With --foreground it stays, etcd as its
// child, until a signal, like `k0s controller` or `k3s server`. A data dir that holds a member is
// started first, before any question to the cluster; one whose member is gone is wiped (what
// `kubeadm reset` does). With --pki-dir DIR holding the cluster's etcd CA
// (ca.crt and ca.key, shared by every node as kubeadm shares /etc/kubernetes/pki/etcd), etcd runs
// with TLS and client-certificate auth on both ports: the installer makes this node's peer and
// server keys and certificates there with openssl when they are missing, and etcdctl presents
// the server certificate (made for clientAuth too). --fail-once-after add|start FILE exits 1 at that
// point the first time (when FILE does not exist yet), leaving the learner behind.
// --catch-up MS waits that long between the learner's start (etcd lists it with its name) and the
// first promote, as a learner that has a large snapshot to receive would.
//
// Usage: node etcd-installer.mjs init|join --name N --data-dir D --peer-url P --client-url C
//          --endpoints URL[,URL…] --etcd-bin PATH --etcdctl PATH [--token T] [--foreground]
//          [--pki-dir DIR] [--max-learners N] [--catch-up MS]
//          [--fail-once-after add|start --fail-once-file FILE [--fail-once-when FILE2]]
// (with --fail-once-when it fails only once FILE2 exists, else 2 s after that point)
import { execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { positionals, values: o } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: "string" },
    "data-dir": { type: "string" },
    "peer-url": { type: "string" },
    "client-url": { type: "string" },
    endpoints: { type: "string" },
    "etcd-bin": { type: "string" },
    etcdctl: { type: "string" },
    token: { type: "string", default: "installer-cluster" },
    foreground: { type: "boolean", default: false },
    "pki-dir": { type: "string" },
    "fail-once-after": { type: "string" },
    "fail-once-file": { type: "string" },
    "fail-once-when": { type: "string" },
    "max-learners": { type: "string" },
    "catch-up": { type: "string" },
  },
});
const mode = positionals[0];
for (const k of ["name", "data-dir", "peer-url", "client-url", "endpoints", "etcd-bin", "etcdctl"]) if (!o[k]) usage(`--${k} is required`);
if (mode !== "init" && mode !== "join") usage("init or join?");

const dataDir = o["data-dir"];
const pidFile = `${dataDir}.pid`;
const logFile = `${dataDir}.log`;
const RETRY_MS = 500;
const TIMEOUT_MS = 120_000;

function usage(why) {
  console.error(`etcd-installer: ${why}`);
  process.exit(2);
}

function say(line) {
  console.error(`[installer ${o.name}] ${line}`);
}

/** The files of a node's PKI directory, named as the agent's own mode names them. */
const pki = o["pki-dir"]
  ? Object.fromEntries(["ca.crt", "ca.key", "peer.crt", "peer.key", "server.crt", "server.key"].map((f) => [f, join(o["pki-dir"], f)]))
  : null;

/** A URL's host as a subjectAltName entry: IP addresses as IP, names as DNS. */
function altName(url) {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  return /^[\d.]+$|:/.test(host) ? `IP:${host}` : `DNS:${host}`;
}

/**
 * Makes `kind`.key and `kind`.crt (ECDSA P-256, signed by the cluster CA, for serverAuth and
 * clientAuth) unless both are there. The key is written before the certificate, each under a
 * temporary name first, so that an interrupted run leaves no certificate without its key.
 */
function ensureCertificate(kind, altNames) {
  if (existsSync(pki[`${kind}.crt`]) && existsSync(pki[`${kind}.key`])) return;
  for (const f of ["ca.crt", "ca.key"]) if (!existsSync(pki[f])) usage(`${pki[f]} is missing: --pki-dir holds the cluster's etcd CA pair`);
  const base = join(o["pki-dir"], `.${kind}-${process.pid}`);
  const ext = [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature",
    "extendedKeyUsage=serverAuth,clientAuth",
    `subjectAltName=${[...new Set(altNames)].join(",")}`,
  ].join("\n");
  // openssl signs on the clock etcd checks it against. In the lab a skewed agent's children
  // inherit libfaketime, which moves openssl's clock but never a Go program's (etcd and etcdctl
  // read the kernel's clock directly): a certificate dated minutes ahead would be "not yet
  // valid" to this node's own etcd. So openssl runs on the real clock, as etcd does.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "LD_PRELOAD" && !k.startsWith("FAKETIME")));
  const openssl = (...args) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"], env });
  try {
    writeFileSync(`${base}.ext`, `${ext}\n`);
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${base}.key`);
    openssl("req", "-new", "-key", `${base}.key`, "-subj", `/CN=${o.name}`, "-out", `${base}.csr`);
    const serial = `0x${execFileSync("openssl", ["rand", "-hex", "16"], { encoding: "utf8", env }).trim()}`;
    openssl(
      "x509",
      "-req",
      "-in",
      `${base}.csr`,
      "-CA",
      pki["ca.crt"],
      "-CAkey",
      pki["ca.key"],
      "-set_serial",
      serial,
      "-days",
      "365",
      "-extfile",
      `${base}.ext`,
      "-out",
      `${base}.crt`,
    );
    renameSync(`${base}.key`, pki[`${kind}.key`]);
    renameSync(`${base}.crt`, pki[`${kind}.crt`]);
  } catch (e) {
    say(`making the ${kind} certificate with openssl failed: ${e.stderr?.toString().trim() || e.message}`);
    process.exit(1);
  } finally {
    for (const f of [".ext", ".csr", ".key", ".crt"]) rmSync(`${base}${f}`, { force: true });
  }
  say(`made ${pki[`${kind}.crt`]}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The line of etcdctl's stderr that carries etcd's own error: its last "Error: …" line, not the
 * log lines before it (an "unrecognized environment variable" warning, a retry notice); when
 * etcdctl itself crashed (seen with 3.4's member promote), its crash report's first line
 * ("panic: …", "fatal error: …"), not the last line of the stack trace.
 */
function etcdctlError(stderr) {
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  return lines.findLast((l) => l.startsWith("Error:")) ?? lines.find((l) => /^(panic|fatal error):/.test(l)) ?? lines.at(-1) ?? "";
}

const tlsArgs = pki ? [`--cacert=${pki["ca.crt"]}`, `--cert=${pki["server.crt"]}`, `--key=${pki["server.key"]}`] : [];

/**
 * The other members' endpoints: this node's etcd, once it runs as a learner, answers "rpc not
 * supported for learner" to a membership change, and etcdctl may send every try to it.
 */
const otherEndpoints =
  o.endpoints
    .split(",")
    .filter((u) => u !== o["client-url"])
    .join(",") || o.endpoints;

/** etcdctl with its JSON output; uint64 IDs kept as decimal strings (JSON numbers would round them). */
function etcdctl(args, endpoints = o.endpoints) {
  // Every etcdctl from 3.4 on speaks v3 by default, and 3.6 warns about ETCDCTL_API: leave it unset.
  const { ETCDCTL_API: _, ...env } = process.env;
  return new Promise((resolve) => {
    execFile(
      o.etcdctl,
      [`--endpoints=${endpoints}`, ...tlsArgs, "--dial-timeout=2s", "--command-timeout=5s", "-w", "json", ...args],
      { env, timeout: 15_000 },
      (error, stdout, stderr) => {
        if (error) return resolve({ ok: false, error: etcdctlError(stderr) || error.message.trim() });
        try {
          resolve({ ok: true, value: JSON.parse(stdout.replace(/"(ID|cluster_id|member_id|revision|raft_term)":(\d+)/g, '"$1":"$2"')) });
        } catch {
          resolve({ ok: true, value: {} });
        }
      },
    );
  });
}

const hex = (id) => BigInt(id).toString(16);
const own = (members) => (members ?? []).find((m) => (m.peerURLs ?? []).some((u) => u.replace(/\/$/, "") === o["peer-url"]));

function hasData() {
  try {
    return readdirSync(join(dataDir, "member", "wal")).some((f) => f.endsWith(".wal"));
  } catch {
    return false;
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function runningEtcd() {
  try {
    const pid = Number(readFileSync(pidFile, "utf8"));
    return pid > 1 && alive(pid) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(`--data-dir=${dataDir}`) ? pid : null;
  } catch {
    return null;
  }
}

async function stopEtcd() {
  const pid = runningEtcd();
  if (!pid) return;
  process.kill(pid, "SIGTERM");
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(100);
  if (alive(pid)) process.kill(pid, "SIGKILL");
  for (let i = 0; i < 50 && alive(pid); i++) await sleep(100);
}

let child = null;
function startEtcd(initialCluster, state) {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const args = [
    `--name=${o.name}`,
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${o["client-url"]}`,
    `--advertise-client-urls=${o["client-url"]}`,
    `--listen-peer-urls=${o["peer-url"]}`,
    `--initial-advertise-peer-urls=${o["peer-url"]}`,
    `--initial-cluster=${initialCluster.join(",")}`,
    `--initial-cluster-state=${state}`,
    ...(state === "new" ? [`--initial-cluster-token=${o.token}`] : []),
    // etcd 3.6+: more than one learner at a time (kubeadm: etcd.local.extraArgs).
    ...(o["max-learners"] ? [`--max-learners=${o["max-learners"]}`] : []),
    "--heartbeat-interval=50",
    "--election-timeout=750",
    ...(pki
      ? [
          `--cert-file=${pki["server.crt"]}`,
          `--key-file=${pki["server.key"]}`,
          `--trusted-ca-file=${pki["ca.crt"]}`,
          "--client-cert-auth",
          `--peer-cert-file=${pki["peer.crt"]}`,
          `--peer-key-file=${pki["peer.key"]}`,
          `--peer-trusted-ca-file=${pki["ca.crt"]}`,
          "--peer-client-cert-auth",
        ]
      : []),
  ];
  const log = openSync(logFile, "a");
  child = spawn(o["etcd-bin"], args, { stdio: ["ignore", log, log], detached: !o.foreground });
  writeFileSync(pidFile, `${child.pid}\n`);
  say(`started etcd (${state}, pid ${child.pid})`);
  if (!o.foreground) child.unref();
}

/** Retries `call` while etcd says "not now", like kubeadm's etcd client. */
async function retry(what, call, done) {
  // Waits are measured on the monotonic clock, as Go's are in kubeadm: a wall clock that jumps
  // (a skewed host put right) must not end them early (campaign seed 90).
  const deadline = performance.now() + TIMEOUT_MS;
  let last = "";
  while (performance.now() < deadline) {
    const r = await call();
    if (r.ok) return r.value;
    const finished = done?.(r.error);
    if (finished) return finished;
    if (r.error !== last) say(`${what}: ${r.error}; retrying`);
    last = r.error;
    await sleep(RETRY_MS);
  }
  say(`${what}: timed out after ${TIMEOUT_MS / 1000} s: ${last}`);
  process.exit(1);
}

async function failOnce(point) {
  if (o["fail-once-after"] !== point || !o["fail-once-file"] || existsSync(o["fail-once-file"])) return;
  writeFileSync(o["fail-once-file"], `failed once after ${point}\n`);
  // Not at once: when the test says so (the nodes behind it are queued then), else after 2 s.
  if (o["fail-once-when"]) await waitUntil(`${o["fail-once-when"]} to exist`, () => existsSync(o["fail-once-when"]));
  else await sleep(2_000);
  say(`failing on purpose after ${point}`);
  process.exit(1);
}

async function waitUntil(what, check) {
  const deadline = performance.now() + TIMEOUT_MS;
  while (performance.now() < deadline) {
    if (await check()) return;
    await sleep(RETRY_MS);
  }
  say(`timed out waiting for ${what}`);
  process.exit(1);
}

async function init() {
  if (!runningEtcd()) startEtcd([`${o.name}=${o["peer-url"]}`], "new");
  await waitUntil("etcd to be healthy", async () => (await etcdctl(["endpoint", "health"], o["client-url"])).ok);
  say("etcd is healthy: a new cluster");
}

async function joinCluster() {
  // A member with data restarts from it before asking anything (as a supervisor restarts etcd):
  // the cluster may need this very member for a quorum before it can answer a member list.
  if (hasData() && !runningEtcd()) {
    startEtcd([`${o.name}=${o["peer-url"]}`], "existing");
    say("restarted etcd from its data dir");
  }
  const list = await retry("listing members", () => etcdctl(["member", "list"]));
  let member = own(list.members);
  let members = list.members;
  if (!member) {
    if (existsSync(dataDir)) {
      await stopEtcd();
      renameSync(dataDir, `${dataDir}.reset-${Date.now()}`);
      say("reset: this node's member is gone, its old data moved aside");
    }
    // Like kubeadm: "Peer URLs already exists" counts as done (an add whose answer was lost, a
    // timeout say, went through), and the member list then names this node's member.
    const added = await retry(
      "adding a learner",
      () => etcdctl(["member", "add", o.name, `--peer-urls=${o["peer-url"]}`, "--learner"]),
      (error) => (/peer ?urls already exists|member id already exist/i.test(error) ? { lost: true } : null),
    );
    if (added.lost) {
      // An endpoint that has not applied the add yet lists no such member: ask again.
      const again = await retry("finding this node's member", async () => {
        const r = await etcdctl(["member", "list"]);
        return !r.ok || own(r.value.members) ? r : { ok: false, error: "etcd says this peer URL exists, but lists no member with it yet" };
      });
      member = own(again.members);
      members = again.members;
      say(`added learner ${hex(member.ID)} (the add's answer was lost; found in the member list)`);
    } else {
      member = added.member;
      members = added.members;
      say(`added learner ${hex(member.ID)}`);
    }
  } else {
    say(`reusing member ${hex(member.ID)} (${member.isLearner ? "learner" : "voter"})`);
  }
  await failOnce("add");
  const initial = [
    ...members.filter((m) => m.name && m.ID !== member.ID).flatMap((m) => m.peerURLs.map((u) => `${m.name}=${u}`)),
    `${o.name}=${o["peer-url"]}`,
  ];
  // Like the kubelet with kubeadm's static pod: an etcd that exits (a peer it asked had not heard
  // of this member yet, "member count is unequal") is started again, a few seconds apart.
  let startedAt = -Infinity;
  const keepEtcdRunning = () => {
    if (runningEtcd() || performance.now() - startedAt < 3_000) return;
    if (startedAt !== -Infinity) say("etcd is not running: starting it again");
    startEtcd(initial, "existing");
    startedAt = performance.now();
  };
  keepEtcdRunning();
  await failOnce("start");
  if (o["catch-up"]) {
    await waitUntil("the learner to start", async () => {
      keepEtcdRunning();
      const r = await etcdctl(["member", "list"]);
      return r.ok && !!own(r.value.members)?.name;
    });
    say(`learner ${hex(member.ID)} started: catching up for ${o["catch-up"]} ms before the promote`);
    await sleep(Number(o["catch-up"]));
  }
  await retry(
    `promoting ${hex(member.ID)}`,
    () => {
      keepEtcdRunning();
      return etcdctl(["member", "promote", hex(member.ID)], otherEndpoints);
    },
    // A voter already (an earlier attempt went through, and etcdctl's retry asked again).
    (error) => (/can only promote a learner member(?! which is in sync)|not a learner/i.test(error) ? {} : null),
  );
  await waitUntil("the member to be a started voter", async () => {
    keepEtcdRunning();
    const r = await etcdctl(["member", "list"]);
    const m = r.ok && own(r.value.members);
    return !!m && !m.isLearner && !!m.name;
  });
  say(`member ${hex(member.ID)} is a voter`);
}

if (pki) {
  ensureCertificate("peer", [altName(o["peer-url"])]);
  ensureCertificate("server", [altName(o["client-url"]), "IP:127.0.0.1"]);
}
await (mode === "init" ? init() : joinCluster());
if (o.foreground) {
  if (!child) {
    say("etcd was already running; staying in the foreground");
    child = { pid: runningEtcd() };
  }
  const stop = (signal) => {
    try {
      process.kill(child.pid, signal);
    } catch {
      process.exit(0);
    }
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  if (child.once) child.once("exit", (code) => process.exit(code ?? 0));
  else setInterval(() => alive(child.pid) || process.exit(0), 500);
}
