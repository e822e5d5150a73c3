/**
 * Real k0s controllers on lab hosts (test/lab/lab.ts), for the k0s tests, the demo, the campaign
 * and the benchmarks.
 *
 * A root k0s hard-codes its run directory `/run/k0s`, etcd's client URL `https://127.0.0.1:2379`
 * and takes its etcd member name from the hostname, so each k0s host is a network namespace
 * (the lab's), with private `/run/k0s`, `/var/lib/k0s`, `/etc/k0s` and `/etc/join-broker`
 * (`lab.privatePath`: every process on the host sees the same ones) and its own hostname (every
 * process runs in a UTS namespace of its own whose hostname is the host's name).
 *
 * The API, briefly:
 * - `k0sBinaries(version)`: k0s, its etcd and etcdctl, kube-apiserver, already built (or why not).
 * - `K0sLab.create(name, bins, { lab?, hosts })`: the hosts prepared as an operator prepares them
 *   (docs/k0s.md): the cluster's CAs made once with openssl (`/etc/k0s/pki`), a pre-shared
 *   controller token made with `k0s token pre-shared` for the fixed API address (a TCP balancer
 *   on host `lb` in front of every controller's :9443) with its Secret in every host's manifests,
 *   `/etc/k0s/k0s.yaml` with the host's address and reachable etcd client URLs, the agent's etcd
 *   client certificate (`/etc/join-broker/etcd-client.{crt,key}`), and etcd and kube-apiserver
 *   in `/var/lib/k0s/bin` (where a k0s with embedded binaries stages them).
 * - `spawn(host, cmd, args)` / `exec(host, cmd, args)`: run on the host (its namespaces, hostname).
 * - `service(host, cmd, args)`: a systemd-like unit (`Restart=on-failure`, `RestartSec=5`,
 *   `KillMode=mixed`), its output kept across restarts.
 * - `controllerArgs(role)`: `k0s controller …` as the recipe runs it (bootstrap or join).
 * - `tokenCreate(host)`, `status(host)`, `etcdctl(host, args)`, `members(host)`, `clusterId(host)`.
 * - `armEtcdFault()`: the first joiner to start etcd gets an etcd that fails every start under
 *   that k0s process (its first start); the restarted service's etcd starts.
 * - `close()`: stops every service, destroys the lab (when it made it), keeps the logs in
 *   `test-results/lab-k0s/<name>/`.
 * @module
 */
import { execFileSync, type ChildProcess, type SpawnOptions } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { stringify } from "yaml";
import { cachedEtcdPath } from "../../scripts/etcd.mjs";
import { cachedK0sPath, k0sPin, type K0sVersion } from "../../scripts/k0s.mjs";
import { cachedKubePath } from "../../scripts/kube.mjs";
import { ClusterHarness, type AgentRun } from "../support/cluster.ts";
import { joinArgv, ROOT } from "../support/stack.ts";
import { P256_NEW_KEY } from "../support/operator-cas.ts";
import { eventually, Lab, NeedsOperator } from "./lab.ts";

const OUT = resolve(import.meta.dirname, "../../test-results/lab-k0s");
const BALANCER = resolve(import.meta.dirname, "balancer.mjs");

/** What a k0s host runs, already built (never builds). */
export interface K0sBinaries {
  version: K0sVersion;
  /** The patched variant (integrations/k0s/<version>/<variant>/), or null for k0s as tagged. */
  variant: string | null;
  /** The release, "+<variant>" added for a patched one. */
  release: string;
  k0s: string;
  etcd: string;
  etcdctl: string;
  kubeApiserver: string;
}

/**
 * The built binaries of this k0s version (with `variant`, that patched variant: "broker"), or why
 * there are none (`node scripts/k0s.mjs list` and `node scripts/kube.mjs list` build them).
 */
export function k0sBinaries(version: K0sVersion, variant: string | null = null): K0sBinaries | string {
  const pin = k0sPin(version);
  const name = variant ? `${version}+${variant}` : version;
  const release = variant ? `${pin.release} +${variant}` : pin.release;
  const k0s = cachedK0sPath(name);
  const etcd = cachedEtcdPath(pin.etcd);
  const kubeApiserver = cachedKubePath("kube-apiserver");
  const missing = [
    !k0s && `k0s ${release} (node scripts/k0s.mjs path ${name})`,
    !etcd && `etcd ${pin.etcd} (node scripts/etcd.mjs path ${pin.etcd})`,
    !kubeApiserver && "kube-apiserver (node scripts/kube.mjs path kube-apiserver)",
  ].filter(Boolean);
  if (!k0s || !etcd || !kubeApiserver) return `not built: ${missing.join(", ")}`;
  return { version, variant, release, k0s, etcd, etcdctl: join(dirname(etcd), "etcdctl"), kubeApiserver };
}

/** The private directories of a k0s host. */
export const K0S_PATHS = ["/run/k0s", "/var/lib/k0s", "/etc/k0s", "/etc/join-broker"];
/** The port of k0s's join API (`k0s api`), which joiners reach through the fixed API address. */
export const K0S_API_PORT = 9443;

export interface MemberList {
  header: { cluster_id: string; member_id: string };
  members: { ID: string; name?: string; peerURLs?: string[]; clientURLs?: string[]; isLearner?: boolean }[];
}

/** Started (named) voters in a member list. */
export const startedVoters = (list: MemberList) => list.members.filter((m) => m.name && !m.isLearner);

/** etcdctl's JSON with its 64-bit IDs as strings (JSON.parse would round them). */
export function parseEtcdctlJson<T>(text: string): T {
  return JSON.parse(text.replace(/("(?:ID|cluster_id|member_id|id)"\s*:\s*)(\d+)/g, '$1"$2"')) as T;
}

/** An ID as etcd writes it in its logs and `member list` tables: hex. */
export const hexId = (id: string) => BigInt(id).toString(16);

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * The cluster's two CAs and the agent's etcd client certificate, made once with openssl as an
 * operator would: `ca.crt`/`ca.key` (Kubernetes, which k0s's join tokens pin), `etcd/ca.crt`/
 * `etcd/ca.key`, and `etcd-client.crt`/`etcd-client.key` (clientAuth, signed by the etcd CA).
 */
export function makeClusterPki(dir: string): void {
  mkdirSync(join(dir, "etcd"), { recursive: true });
  const ca = (name: string, cn: string) =>
    openssl(
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        `${name}.key`,
        "-out",
        `${name}.crt`,
        "-days",
        "3650",
        "-subj",
        `/CN=${cn}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature,keyEncipherment",
      ],
      dir,
    );
  ca("ca", "kubernetes-ca");
  ca("etcd/ca", "etcd-ca");
  openssl(["req", "-new", ...P256_NEW_KEY, "-keyout", "etcd-client.key", "-out", "etcd-client.csr", "-subj", "/CN=join-broker-agent"], dir);
  writeFileSync(join(dir, "etcd-client.ext"), "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n");
  openssl(
    [
      "x509",
      "-req",
      "-in",
      "etcd-client.csr",
      "-CA",
      "etcd/ca.crt",
      "-CAkey",
      "etcd/ca.key",
      "-CAcreateserial",
      "-days",
      "3650",
      "-out",
      "etcd-client.crt",
      "-extfile",
      "etcd-client.ext",
    ],
    dir,
  );
  for (const f of ["ca.key", "etcd/ca.key", "etcd-client.key"]) chmodSync(join(dir, f), 0o600);
}

/** `/etc/k0s/k0s.yaml` for a controller at `address`: its API and etcd peer on that address, etcd's client port reachable there too. */
export function k0sConfig(address: string, apiAddress: string): string {
  return stringify({
    apiVersion: "k0s.k0sproject.io/v1beta1",
    kind: "ClusterConfig",
    metadata: { name: "k0s" },
    spec: {
      api: { address, sans: [address, apiAddress] },
      storage: { type: "etcd", etcd: { peerAddress: address, extraArgs: { "listen-client-urls": `https://127.0.0.1:2379,https://${address}:2379` } } },
      telemetry: { enabled: false },
    },
  });
}

/** The script that stands in for etcd on a host whose etcd the lab makes fail (see `armEtcdFault`). */
function faultyEtcd(claimDir: string, host: string): string {
  return `#!/bin/sh
# The lab's fault: the first joiner to start etcd fails every etcd start of that k0s process.
claim='${claimDir}'
case " $* " in *" --initial-cluster-state=existing "*) if mkdir "$claim/taken" 2>/dev/null; then echo "${host} $PPID" > "$claim/taken/by"; fi ;; esac
if [ "$(cat "$claim/taken/by" 2>/dev/null)" = "${host} $PPID" ]; then
  echo "lab fault: etcd on ${host} fails every start under k0s process $PPID" >&2
  exit 1
fi
exec /var/lib/k0s/bin/etcd.real "$@"
`;
}

/** One run of a service: its process and what it printed. */
export interface ServiceRun {
  proc: ChildProcess;
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * A systemd unit's behaviour for one command: `Restart=on-failure` (a non-zero exit or a signal
 * other than the stop's starts it again `restartSec` later), `KillMode=mixed` on stop (SIGTERM
 * to the main process, SIGKILL to what is left of its group after the timeout).
 */
export class Service {
  readonly runs: ServiceRun[] = [];
  #stopped = false;
  #timer: NodeJS.Timeout | null = null;
  readonly #listeners: ((run: ServiceRun, n: number) => void)[] = [];

  constructor(
    readonly name: string,
    private readonly launch: () => ChildProcess,
    private readonly logPath: string,
    readonly restartSec = 5,
  ) {}

  /** Called on every start (the first and each restart). */
  onStart(listener: (run: ServiceRun, n: number) => void): void {
    this.#listeners.push(listener);
  }

  start(): ServiceRun {
    const proc = this.launch();
    const n = this.runs.length + 1;
    writeFileSync(this.logPath, `--- start ${n} at ${new Date().toISOString()} (pid ${proc.pid})\n`, { flag: "a" });
    const append = (chunk: Buffer) => writeFileSync(this.logPath, chunk, { flag: "a" });
    proc.stdout?.on("data", append);
    proc.stderr?.on("data", append);
    const run: ServiceRun = {
      proc,
      exit: null,
      exited: new Promise((ok) => proc.once("close", (code, signal) => ok({ code, signal }))),
    };
    void run.exited.then((x) => {
      run.exit = x;
      writeFileSync(this.logPath, `--- exit ${n}: ${x.code ?? x.signal} at ${new Date().toISOString()}\n`, { flag: "a" });
      if (!this.#stopped && (x.code !== 0 || x.signal))
        this.#timer = setTimeout(() => ((this.#timer = null), this.#stopped || this.start()), this.restartSec * 1000);
    });
    this.runs.push(run);
    for (const l of this.#listeners) l(run, n);
    return run;
  }

  get current(): ServiceRun | undefined {
    return this.runs[this.runs.length - 1];
  }

  /** Everything the service printed, every run. */
  output(): string {
    return existsSync(this.logPath) ? readFileSync(this.logPath, "utf8") : "";
  }

  async stop(timeoutMs = 30_000): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    const run = this.current;
    if (!run || run.exit) return;
    run.proc.kill("SIGTERM");
    const timer = setTimeout(() => killGroup(run.proc.pid!, "SIGKILL"), timeoutMs);
    await run.exited;
    clearTimeout(timer);
    killGroup(run.proc.pid!, "SIGKILL");
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    /* gone */
  }
}

export interface K0sLabOptions {
  /** Hosts in this lab (not destroyed by `close()`), else a lab of its own. */
  lab?: Lab;
  /** The k0s hosts, added to the lab when it has none of that name. */
  hosts: string[];
  /** Where logs go (default test-results/lab-k0s/<name>). */
  outDir?: string;
}

export class K0sLab {
  readonly services = new Map<string, Service>();
  /** Where the etcd fault's claim is made, once armed. */
  #faultDir: string | null = null;

  private constructor(
    readonly lab: Lab,
    readonly bins: K0sBinaries,
    readonly hosts: string[],
    readonly out: string,
    /** Where the cluster's PKI was made (the operator's workstation). */
    readonly pki: string,
    /** The fixed API address joiners reach k0s's join API at (the balancer's host). */
    readonly apiAddress: string,
    readonly ownsLab: boolean,
  ) {}

  static async create(name: string, bins: K0sBinaries, options: K0sLabOptions): Promise<K0sLab> {
    const out = options.outDir ?? join(OUT, name);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    const lab = options.lab ?? (await Lab.create());
    try {
      for (const h of options.hosts) if (!lab.hosts.has(h)) lab.addHost(h);
      const lb = lab.addHost("lb");
      const pki = join(lab.dir, "k0s-pki");
      makeClusterPki(pki);
      // The pre-shared controller token and the Secret that makes it valid (k0s applies the manifests it finds).
      const tokens = join(lab.dir, "k0s-token");
      mkdirSync(tokens, { recursive: true });
      execFileSync(
        bins.k0s,
        ["token", "pre-shared", "--role", "controller", "--cert", join(pki, "ca.crt"), "--url", `https://${lb.ip}:${K0S_API_PORT}`, "--out", tokens],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
      const k = new K0sLab(lab, bins, options.hosts, out, pki, lb.ip, !options.lab);
      for (const h of options.hosts) k.#prepareHost(h, tokens);
      await k.#startBalancer();
      return k;
    } catch (e) {
      if (!options.lab) lab.destroy();
      throw e;
    }
  }

  /** Every path a host needs, as docs/k0s.md's operator provisions it. */
  #prepareHost(host: string, tokens: string): void {
    const { lab, bins } = this;
    const dirs = Object.fromEntries(K0S_PATHS.map((p) => [p, lab.host(host).mounts.get(p) ?? lab.privatePath(host, p)]));
    const etc = dirs["/etc/k0s"]!;
    const data = dirs["/var/lib/k0s"]!;
    writeFileSync(join(etc, "k0s.yaml"), k0sConfig(lab.host(host).ip, this.apiAddress));
    // The cluster's CAs: k0s uses those it finds in its pki/ (the recipe copies them on the bootstrap node).
    mkdirSync(join(etc, "pki", "etcd"), { recursive: true });
    for (const f of ["ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key"]) copyFileSync(join(this.pki, f), join(etc, "pki", f));
    chmodSync(join(etc, "pki", "ca.key"), 0o600);
    chmodSync(join(etc, "pki", "etcd", "ca.key"), 0o600);
    // `k0s token pre-shared` writes token_<id> (the join token) and bootstrap-token-<id>.yaml (its Secret).
    const made = readdirSync(tokens);
    copyFileSync(join(tokens, made.find((f) => f.startsWith("token_"))!), join(etc, "controller-token"));
    mkdirSync(join(data, "manifests", "join-broker"), { recursive: true });
    copyFileSync(join(tokens, made.find((f) => f.startsWith("bootstrap-token-"))!), join(data, "manifests", "join-broker", "controller-token.yaml"));
    copyFileSync(join(this.pki, "etcd/ca.crt"), join(dirs["/etc/join-broker"]!, "etcd-ca.crt"));
    copyFileSync(join(this.pki, "etcd-client.crt"), join(dirs["/etc/join-broker"]!, "etcd-client.crt"));
    copyFileSync(join(this.pki, "etcd-client.key"), join(dirs["/etc/join-broker"]!, "etcd-client.key"));
    // Where a k0s with embedded binaries stages them. k0s runs etcd as the `etcd` user when the
    // machine has one: a copy it can read, not a link into root's cache.
    mkdirSync(join(data, "bin"), { recursive: true });
    copyFileSync(bins.etcd, join(data, "bin", "etcd"));
    chmodSync(join(data, "bin", "etcd"), 0o755);
    symlinkSync(bins.kubeApiserver, join(data, "bin", "kube-apiserver"));
  }

  async #startBalancer(): Promise<void> {
    const backends = this.hosts.map((h) => `${this.lab.host(h).ip}:${K0S_API_PORT}`).join(",");
    const proc = this.lab.spawn("lb", process.execPath, [BALANCER, String(K0S_API_PORT), backends, "tcp"], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise<void>((ok, fail) => {
      const timer = setTimeout(() => fail(new Error("the balancer did not start within 30 s")), 30_000);
      proc.stdout!.once("data", () => (clearTimeout(timer), ok()));
      proc.once("exit", (code) => (clearTimeout(timer), fail(new Error(`the balancer exited with ${code}`))));
    });
  }

  /**
   * The first joiner to start etcd (k0s starts it with `--initial-cluster-state=existing`) gets
   * an etcd that fails every start under that k0s process: k0s gives up on it (its 2-minute
   * health check) and exits; the service's next k0s process starts etcd normally.
   */
  armEtcdFault(): void {
    // Outside the lab's directory (0700): etcd runs as the `etcd` user when the machine has one.
    const claim = (this.#faultDir ??= mkdtempSync(join(tmpdir(), "k0s-lab-fault-")));
    chmodSync(claim, 0o1777);
    for (const h of this.hosts) {
      const bin = join(this.lab.host(h).mounts.get("/var/lib/k0s")!, "bin");
      if (!existsSync(join(bin, "etcd.real"))) copyFileSync(join(bin, "etcd"), join(bin, "etcd.real"));
      chmodSync(join(bin, "etcd.real"), 0o755);
      writeFileSync(join(bin, "etcd"), faultyEtcd(claim, h), { mode: 0o755 });
    }
  }

  /** The host that got the etcd fault, once one did. */
  faultedHost(): string | null {
    if (!this.#faultDir) return null;
    try {
      return readFileSync(join(this.#faultDir, "taken", "by"), "utf8").split(" ")[0] ?? null;
    } catch {
      return null;
    }
  }

  /** Runs `command` on the host, in its namespaces and with its hostname; the process's pid is the command's. */
  spawn(host: string, command: string, args: string[], options: SpawnOptions = {}): ChildProcess {
    return this.lab.spawn(host, "unshare", ["--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, command, ...args], options);
  }

  /** Runs a short command on the host and returns its stdout. */
  exec(host: string, command: string, args: string[]): string {
    return this.lab.exec(host, "unshare", ["--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, command, ...args]);
  }

  /** The environment a host's k0s and agent get: k0s on the PATH. */
  env(): NodeJS.ProcessEnv {
    return { ...process.env, PATH: `${dirname(this.bins.k0s)}:${process.env.PATH ?? "/usr/bin:/bin"}` };
  }

  /** A systemd-like unit on `host` running `command` (see `Service`); not started. */
  service(host: string, command: string, args: string[], name = "k0scontroller"): Service {
    const s = new Service(
      `${name}@${host}`,
      () => this.spawn(host, command, args, { stdio: ["ignore", "pipe", "pipe"], detached: true, env: this.env() }),
      join(this.out, `${name}-${host}.log`),
    );
    this.services.set(`${name}@${host}`, s);
    return s;
  }

  /** `k0s token create --role=controller` on a running controller. */
  tokenCreate(host: string, role: "controller" | "worker" = "controller"): string {
    return this.exec(host, this.bins.k0s, ["token", "create", `--role=${role}`]).trim();
  }

  /** `k0s status -o json` on the host, or null when k0s does not answer. */
  status(host: string): Record<string, unknown> | null {
    try {
      return JSON.parse(this.exec(host, this.bins.k0s, ["status", "-o", "json"])) as Record<string, unknown>;
    } catch {
      return null;
    }
  }

  /** etcdctl on the host against its own etcd (127.0.0.1:2379), with the agent's client certificate. */
  etcdctl(host: string, args: string[]): string {
    return this.exec(host, this.bins.etcdctl, [
      "--endpoints=https://127.0.0.1:2379",
      "--cacert=/etc/join-broker/etcd-ca.crt",
      "--cert=/etc/join-broker/etcd-client.crt",
      "--key=/etc/join-broker/etcd-client.key",
      "--command-timeout=3s",
      ...args,
    ]);
  }

  /** The host's etcd member list (its own view), or null when its etcd does not answer. */
  members(host: string): MemberList | null {
    try {
      return parseEtcdctlJson<MemberList>(this.etcdctl(host, ["member", "list", "-w", "json"]));
    } catch {
      return null;
    }
  }

  /** The cluster ID the host's etcd answers with (hex; `endpoint status`, which a member without quorum answers too), or null. */
  clusterId(host: string): string | null {
    try {
      const [status] = parseEtcdctlJson<{ Status: { header: { cluster_id: string } } }[]>(this.etcdctl(host, ["endpoint", "status", "-w", "json"]));
      return status ? hexId(status.Status.header.cluster_id) : null;
    } catch {
      return null;
    }
  }

  /** Each host's cluster ID (hex), null where etcd does not answer. */
  clusterIds(): Record<string, string | null> {
    return Object.fromEntries(this.hosts.map((h) => [h, this.clusterId(h)]));
  }

  async close(): Promise<void> {
    await Promise.all([...this.services.values()].map((s) => s.stop(10_000)));
    if (this.ownsLab) this.lab.destroy();
    if (this.#faultDir) rmSync(this.#faultDir, { recursive: true, force: true });
  }
}

/** The components a controller-only node disables (no kubelet, containerd or cgroups needed). */
export function disabledComponents(version: K0sVersion): string {
  return k0sPin(version).disable.join(",");
}

// --- the recipe (docs/k0s.md) ---------------------------------------------------------------------

const DOCS = resolve(import.meta.dirname, "../../docs");

/** The systemd unit docs/k0s.md gives (the ```ini block whose ExecStart runs `join-broker join`), as written. */
export function k0sUnitFromDocs(file = join(DOCS, "k0s.md")): string {
  const text = readFileSync(file, "utf8");
  const block = [...text.matchAll(/```ini\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => /^ExecStart=\S*join-broker join/m.test(b));
  if (!block) throw new Error(`${file} has no \`\`\`ini block with ExecStart=…join-broker join`);
  return block;
}

/** Shell words of a command line with '…' and "…" quoting and backslash-newline continuations (what systemd's ExecStart takes here). */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  const text = line.replace(/\\\n/g, " ");
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) throw new Error(`unterminated ${c} in ${line}`);
      word = (word ?? "") + text.slice(i + 1, end);
      i = end;
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else word = (word ?? "") + c;
  }
  if (word !== null) words.push(word);
  return words;
}

export interface K0sRecipe {
  /** The unit's `join-broker join` flags, name → value (true for a flag without one), in order. */
  flags: [string, string | true][];
  /** The unit's Environment= assignments. */
  environment: Record<string, string>;
}

/** docs/k0s.md's unit, read: its ExecStart's flags and its environment. */
export function k0sRecipe(unit = k0sUnitFromDocs()): K0sRecipe {
  const exec = /^ExecStart=((?:.*\\\n)*.*)$/m.exec(unit)?.[1];
  if (!exec) throw new Error("the unit has no ExecStart=");
  const [, sub, ...rest] = shellWords(exec);
  if (sub !== "join") throw new Error(`ExecStart runs join-broker ${sub}, not join`);
  const flags: [string, string | true][] = [];
  for (let i = 0; i < rest.length; i++) {
    const name = rest[i]!.replace(/^--/, "");
    const next = rest[i + 1];
    if (next !== undefined && !next.startsWith("--")) {
      flags.push([name, next]);
      i++;
    } else flags.push([name, true]);
  }
  const environment: Record<string, string> = {};
  for (const m of unit.matchAll(/^Environment=(.*)$/gm)) {
    const [assignment] = shellWords(m[1]!);
    const eq = assignment!.indexOf("=");
    environment[assignment!.slice(0, eq)] = assignment!.slice(eq + 1);
  }
  return { flags, environment };
}

/** The flags that name the node, its broker and its peers: each host's own, not the recipe's. */
const IDENTITY_FLAGS = ["broker", "cluster", "token", "token-file", "node", "peer-url", "etcd", "state-dir"];

/**
 * The agent's command line for `node`: the recipe's flags as docs/k0s.md writes them (the
 * installer command, clean-up, TLS files, rescue, --service), with this lab's broker, cluster,
 * token, node name, addresses and state dir in place of the example's.
 */
export function recipeArgs(
  recipe: K0sRecipe,
  own: { broker: string; cluster: string; token: string; node: string; peerURL: string; etcd: string[]; stateDir: string },
): string[] {
  const flags: string[] = [];
  for (const [name, value] of recipe.flags) {
    if (IDENTITY_FLAGS.includes(name)) continue;
    flags.push(`--${name}`, ...(value === true ? [] : [value]));
  }
  return joinArgv({ ...own, extra: [...flags, "--log-format", "json"] });
}

// --- through the broker ---------------------------------------------------------------------------

/**
 * The recipe's hosts behind the broker: `join-broker serve` on host `broker` (the harness's),
 * k0s hosts prepared as `K0sLab` does, each running docs/k0s.md's unit (the agent in the host's
 * namespaces with its hostname, k0s on its PATH, `K0S_FLAGS` as the lab needs them), restarted
 * as systemd would (`Restart=on-failure`, `RestartSec=5`).
 */
export class BrokeredK0sLab {
  readonly #restarts = new Map<string, NodeJS.Timeout>();
  #stopping = false;

  private constructor(
    readonly h: ClusterHarness,
    readonly k: K0sLab,
    readonly recipe: K0sRecipe,
  ) {}

  static async create(
    name: string,
    bins: K0sBinaries,
    hosts: string[],
    options: { outDir?: string; log?: (line: string) => void } = {},
  ): Promise<BrokeredK0sLab> {
    const lab = await Lab.create();
    let h: ClusterHarness | null = null;
    try {
      const recipe = k0sRecipe();
      const env = { ...recipe.environment, K0S_FLAGS: `--disable-components=${disabledComponents(bins.version)}` };
      const path = `PATH=${dirname(bins.k0s)}:${process.env.PATH ?? "/usr/bin:/bin"}`;
      h = await ClusterHarness.start({
        scenario: `lab-k0s-${name}`,
        seed: 0,
        nodes: hosts,
        lab,
        ...(options.log ? { log: options.log } : {}),
        // The agent as the unit runs it: on its host with the host's name (k0s names its etcd member after it).
        agentCommand: (args) => {
          const node = args[args.indexOf("--node") + 1]!;
          const envArgs = [path, ...Object.entries(env).map(([k, v]) => `${k}=${v}`)];
          return {
            command: "unshare",
            args: ["--uts", "sh", "-c", 'hostname "$0" && exec "$@"', node, "env", ...envArgs, process.execPath, join(ROOT, "bin/join-broker"), ...args],
            cwd: ROOT,
          };
        },
      });
      const k = await K0sLab.create(name, bins, { lab, hosts, ...(options.outDir ? { outDir: options.outDir } : {}) });
      return new BrokeredK0sLab(h, k, recipe);
    } catch (e) {
      await h?.cleanup();
      lab.destroy();
      throw e;
    }
  }

  get lab(): Lab {
    return this.k.lab;
  }

  /** The agent's flags for `node`: docs/k0s.md's unit with this lab's names and addresses. */
  agentArgs(node: string): string[] {
    const { h } = this;
    const n = h.node(node);
    return recipeArgs(this.recipe, {
      broker: h.broker.url,
      cluster: h.cluster,
      token: h.token,
      node,
      peerURL: n.peerURL,
      etcd: h.nodes.map((x) => x.clientURL),
      stateDir: n.stateDir,
    });
  }

  /** Starts the node's unit; every failure of its agent starts it again 5 s later (Restart=on-failure). */
  startService(node: string): AgentRun {
    const run = this.h.startAgent(node, { args: this.agentArgs(node) });
    // Everything the unit printed, every run, as a journal keeps it (the harness keeps only the last lines).
    const journal = this.journalPath(node);
    writeFileSync(journal, `--- run ${run.run} at ${new Date().toISOString()}\n`, { flag: "a" });
    run.proc.stderr?.on("data", (chunk: Buffer) => writeFileSync(journal, chunk, { flag: "a" }));
    void run.exited.then((x) => {
      if (this.#stopping || (x.code === 0 && !x.signal)) return;
      this.#restarts.set(
        node,
        setTimeout(() => !this.#stopping && this.startService(node), 5_000),
      );
    });
    return run;
  }

  /** Where the node's unit output goes, whole: `<out>/unit-<node>.log`. */
  journalPath(node: string): string {
    return join(this.k.out, `unit-${node}.log`);
  }

  /** Everything the node's unit printed (the agent's JSON progress, k0s's and its components' lines), every run, whole. */
  journal(node: string): string {
    return existsSync(this.journalPath(node)) ? readFileSync(this.journalPath(node), "utf8") : "";
  }

  /** Each agent's output (its JSON progress and the last 200 of k0s's own lines), every run. */
  output(node: string): string {
    return (this.h.runs.get(node) ?? [])
      .map(
        (r, i) =>
          `--- run ${i + 1}${r.exit ? `: exit ${r.exit.code ?? r.exit.signal}` : ""}\n${r.events.map((e) => JSON.stringify(e)).join("\n")}\n${r.otherOutput.join("\n")}`,
      )
      .join("\n");
  }

  async close(): Promise<void> {
    this.#stopping = true;
    for (const t of this.#restarts.values()) clearTimeout(t);
    for (const n of this.k.hosts) writeFileSync(join(this.k.out, `agent-${n}.log`), this.output(n));
    this.h.writeTimeline({ lab: this.lab.events });
    await this.h.cleanup();
    await this.k.close();
    this.lab.destroy();
  }
}

// --- the seed's scenario: a leader and three joiners at once, the first joiner's etcd failing ---------

/** The scenario's hosts: the first is the leader when there is no broker to pick one. */
export const K0S_HOSTS = ["k0s-1", "k0s-2", "k0s-3", "k0s-4"];

export interface SeedReport {
  version: K0sVersion;
  release: string;
  /** The joiner whose first k0s process's etcd failed. */
  faulted: string;
  /** Each host's etcd cluster ID (hex), null where its etcd does not answer. */
  clusterIds: Record<string, string | null>;
  /** The distinct cluster IDs among them. */
  clusters: string[];
  /** Each host's own member list, null where its etcd does not answer. */
  views: Record<string, MemberList | null>;
  seconds: number;
}

const describeMember = (m: MemberList["members"][number]) => `${hexId(m.ID)} ${m.name || "(never started)"} ${m.isLearner ? "learner" : "voter"}`;

function snapshot(k: K0sLab, version: K0sVersion, faulted: string, started: number): SeedReport {
  const clusterIds = k.clusterIds();
  const clusters = [...new Set(Object.values(clusterIds).filter((c): c is string => c !== null))];
  const views = Object.fromEntries(k.hosts.map((h) => [h, k.members(h)]));
  return { version, release: k.bins.release, faulted, clusterIds, clusters, views, seconds: Math.round((Date.now() - started) / 1000) };
}

/** One line per host: its cluster ID and what its etcd lists. */
export function describeReport(r: SeedReport): string[] {
  return Object.entries(r.clusterIds).map(([h, id]) => {
    const view = r.views[h];
    return `${h}${h === r.faulted ? " (etcd failed its first start)" : ""}: ${id ? `cluster ${id}` : "no etcd answering"}${view ? `; members: ${view.members.map(describeMember).join(", ")}` : ""}`;
  });
}

/**
 * k0s as its documentation runs it, without the broker: the leader (`k0s controller`, the CAs
 * copied in) and three joiners (`--token-file`) started at once as systemd units, the first
 * joiner's etcd failing every start of its first k0s process. Ends once that joiner's unit was
 * restarted and its second k0s either runs etcd (1.28: of a cluster of its own) or is back at
 * k0s's join (1.36: refused while its learner is there), and reports each host's cluster ID.
 */
export async function seedWithoutBroker(
  bins: K0sBinaries,
  options: { name?: string; log?: (line: string) => void; budgetMs?: number } = {},
): Promise<SeedReport> {
  const log = options.log ?? (() => undefined);
  const k = await K0sLab.create(options.name ?? `seed-without-broker-${bins.version}`, bins, { hosts: K0S_HOSTS });
  const started = Date.now();
  try {
    k.armEtcdFault();
    const flags = ["controller", "--config", "/etc/k0s/k0s.yaml", `--disable-components=${disabledComponents(bins.version)}`];
    const [leader, ...joiners] = K0S_HOSTS as [string, ...string[]];
    k.exec(leader, "sh", ["-c", "mkdir -p /var/lib/k0s && cp -a /etc/k0s/pki /var/lib/k0s/"]);
    k.service(leader, "k0s", flags).start();
    for (const h of joiners) k.service(h, "k0s", [...flags, "--token-file", "/etc/k0s/controller-token"]).start();
    log(
      `k0s ${bins.release}: ${leader} starts the cluster, ${joiners.join(", ")} join at once; the first joiner to start etcd gets an etcd that fails every start of its first k0s process`,
    );
    const faulted = await eventually("a joiner's etcd to fail", () => k.faultedHost(), 300_000);
    log(`${faulted}'s etcd fails; its k0s gives up after its etcd health check (2 minutes) and systemd starts it again`);
    const unit = k.services.get(`k0scontroller@${faulted}`)!;
    await eventually(`${faulted}'s unit to be restarted`, () => (unit.runs.length >= 2 ? true : null), options.budgetMs ?? 420_000);
    log(`${faulted}'s k0s restarted (it exited: ${lastError(unit.output())})`);
    await eventually(
      `${faulted}'s second k0s to run etcd or to ask k0s's join API again`,
      () => (k.clusterId(faulted) !== null || /Synchronizing etcd config/.test(unit.output().split("--- start 2")[1] ?? "") ? true : null),
      180_000,
    );
    const report = snapshot(k, bins.version, faulted, started);
    for (const line of describeReport(report)) log(line);
    return report;
  } finally {
    await k.close();
  }
}

/** The last error line k0s printed. */
export function lastError(output: string): string {
  return output.match(/^Error: .*$/gm)?.at(-1) ?? "(no error line)";
}

export interface BrokeredReport extends SeedReport {
  /** Each host's agent runs: exit code (null: still running) and the steps it reported. */
  agents: Record<string, { code: number | null; steps: { step: string; msg: string }[] }[]>;
  /** The broker's status for the cluster. */
  status: Record<string, unknown>;
  audit: { action: string; detail: Record<string, unknown> }[];
}

/**
 * The same through the broker: every host runs docs/k0s.md's unit (`join-broker join … --exec
 * 'k0s controller …'`), all started at once, the first joiner's etcd failing every start of its
 * first k0s process, a failed unit restarted 5 s later. Ends once every host's etcd answers
 * with one cluster ID and lists the four hosts as started voters and nothing else.
 */
export async function seedThroughBroker(
  bins: K0sBinaries,
  options: { name?: string; log?: (line: string) => void; budgetMs?: number } = {},
): Promise<BrokeredReport> {
  const log = options.log ?? (() => undefined);
  const b = await BrokeredK0sLab.create(options.name ?? `seed-through-broker-${bins.version}`, bins, K0S_HOSTS, { log });
  const started = Date.now();
  try {
    b.k.armEtcdFault();
    b.h.onEvent((run, e) => {
      if (["admitted", "gave-up", "joined", "rescue", "stuck", "cleanup"].includes(e.step) || (e.step === "etcd-exit" && /removed|gone/.test(e.msg)))
        log(`${run.node.name} (run ${run.run}): ${e.step}: ${e.msg}`);
    });
    for (const h of K0S_HOSTS) b.startService(h);
    log(
      `k0s ${bins.release}: ${K0S_HOSTS.join(", ")} start docs/k0s.md's unit at once; the broker picks who bootstraps; the first joiner to start etcd gets an etcd that fails every start of its first k0s process`,
    );
    const done = (views: Record<string, MemberList | null>) =>
      K0S_HOSTS.every((h) => {
        const v = views[h];
        return (
          v !== null &&
          v !== undefined &&
          v.members.length === K0S_HOSTS.length &&
          startedVoters(v).length === K0S_HOSTS.length &&
          v.members.every((m) => K0S_HOSTS.includes(m.name ?? ""))
        );
      });
    await eventually(
      "four started voters of one cluster in every host's view, nothing else, and every agent's word that its node joined",
      () => {
        // A cluster left to an operator does not get there by itself: say so at once.
        const stuck = K0S_HOSTS.flatMap((h) => (b.h.runs.get(h) ?? []).flatMap((r) => r.events.filter((e) => e.step === "stuck")));
        if (stuck.length) throw new NeedsOperator(`a node left its member to an operator: ${stuck.map((e) => `${e.node}: ${e.msg}`).join("; ")}`);
        if (!K0S_HOSTS.every((h) => b.h.current(h)?.events.some((e) => e.step === "joined"))) return null;
        const views = Object.fromEntries(K0S_HOSTS.map((h) => [h, b.k.members(h)]));
        return done(views) && new Set(K0S_HOSTS.map((h) => views[h]!.header.cluster_id)).size === 1 ? true : null;
      },
      options.budgetMs ?? 720_000,
    );
    const report = snapshot(b.k, bins.version, b.k.faultedHost() ?? "(none)", started);
    const agents = Object.fromEntries(
      K0S_HOSTS.map((h) => [
        h,
        (b.h.runs.get(h) ?? []).map((r) => ({
          code: r.exit?.code ?? null,
          steps: r.events.filter((e) => e.step !== "retry").map((e) => ({ step: e.step, msg: e.msg })),
        })),
      ]),
    );
    const status = (await b.h.client.admin(b.h.cluster).status()).body as unknown as Record<string, unknown>;
    const audit = (await b.h.audit()).map((a) => ({ action: a.action, detail: a.detail }));
    log(`done in ${report.seconds} s`);
    for (const line of describeReport(report)) log(line);
    return { ...report, agents, status, audit };
  } finally {
    await b.close();
  }
}
