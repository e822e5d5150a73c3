/**
 * The lab: hosts on this machine, each a Linux network namespace with an address of its own in
 * the lab's subnet (a /24 of 10.77.0.0/16, its own among the labs running on the machine), joined
 * by a bridge that lives in a namespace of its own with no uplink and no route out, so nothing a
 * run sends leaves the namespaces it created. Processes run inside a
 * host (`ip netns exec`); faults are nftables rules inside the hosts' namespaces (partitions,
 * loss), a link set down and up again (flap), SIGSTOP/SIGCONT, SIGKILL, and a host's clock
 * moved by libfaketime (read from a file per host, so it can jump during a run).
 *
 * The test process stays outside: it reaches a host's port through `reach()`, a loopback port
 * forwarded over a Unix socket to a gateway process inside the lab's probe host, which no
 * partition ever touches (the control node of a Jepsen run).
 *
 * Every namespace carries the lab's prefix `jbl<pid>x<n>-`; `destroy()` removes them and
 * `Lab.create` first reaps what a crashed run (a prefix whose pid is gone) left behind. Labs of
 * test files running at once never share a name or an address: the prefix is the process's own,
 * and the subnet (10.77.<slot>.0/24) is claimed machine-wide (scripts/claims.mjs) until `destroy()`.
 */
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { claim, release, withMachineLock } from "../../scripts/claims.mjs";
import { machineTmpdir } from "../../scripts/step-tmp.mjs";

const TOOLS_MODULE = pathToFileURL(resolve(import.meta.dirname, "../../scripts/tools.mjs")).href;
const GATEWAY = resolve(import.meta.dirname, "gateway.mjs");
const DELAY_PROXY = resolve(import.meta.dirname, "delay-proxy.mjs");
/** Namespaces of a lab: `jbl<pid>x<n>-<host>`; the bridge's is `…-br`, the probe's `…-probe`. */
const PREFIX_RE = /^jbl(\d+)x\d+-/;
/** Every lab's subnet is a /24 of this /16: 10.77.<slot>.0/24, the slot claimed machine-wide. */
const LAB_NET = "10.77";
const SLOTS = 256;
/** The claims (scripts/claims.mjs) of the labs' subnets, and the lock around the mount points labs make. */
const SUBNET_CLAIMS = "lab-subnets";
const MOUNT_POINTS_LOCK = "lab-mount-points";
let labsInProcess = 0;
/** The slots of this process's labs: a claim is a process's, and one process may run several labs at once. */
const slotsInProcess = new Set<number>();

/** A subnet slot no live lab on the machine holds, claimed for this process; a random start spreads concurrent claimants. */
function claimSlot(): number {
  const start = Math.floor(Math.random() * SLOTS);
  for (let i = 0; i < SLOTS; i++) {
    const slot = (start + i) % SLOTS;
    if (!slotsInProcess.has(slot) && claim(SUBNET_CLAIMS, slot)) {
      slotsInProcess.add(slot);
      return slot;
    }
  }
  throw new Error(`every lab subnet (${LAB_NET}.0.0/16, ${SLOTS} of them) is held by a running lab`);
}

export interface LabHost {
  name: string;
  /** The host's network namespace. */
  ns: string;
  /** Its address on the lab's bridge. */
  ip: string;
  /** The file libfaketime reads this host's clock offset from (FAKETIME_TIMESTAMP_FILE). */
  clockFile: string;
  /** Its private paths: the path its processes see → the directory that backs it (see `privatePath`). */
  mounts: Map<string, string>;
}

/** Why the lab cannot run here, or null when it can (root, `ip`, `nft`, libfaketime). */
export async function labUnavailable(): Promise<string | null> {
  if (process.platform !== "linux") return "the lab needs Linux network namespaces";
  if (process.getuid?.() !== 0) return "the lab needs root (network namespaces, nftables)";
  try {
    const tools = (await import(TOOLS_MODULE)) as { ensureTool(name: string): string };
    tools.ensureTool("nft");
    tools.ensureTool("faketime");
    execFileSync("ip", ["-V"], { stdio: "ignore" });
  } catch (e) {
    return `the lab's tools are missing: ${(e as Error).message}`;
  }
  return null;
}

/**
 * For a test file: the reason to skip the lab tests, or null to run them. Under CI=true a lab that
 * cannot run is a failure, never a skip.
 */
export async function labSkipReason(): Promise<string | null> {
  const reason = await labUnavailable();
  if (reason && process.env.CI === "true") throw new Error(`CI=true and the lab cannot run: ${reason}`);
  if (reason) console.warn(`[lab] skipped: ${reason}`);
  return reason;
}

function sh(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: "utf8", input, stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
}

function inNs(ns: string, cmd: string, args: string[], input?: string): string {
  return sh("ip", ["netns", "exec", ns, cmd, ...args], input);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Kills every process inside these namespaces and deletes them. */
function removeNamespaces(names: string[]): void {
  for (const ns of names) {
    try {
      for (const pid of sh("ip", ["netns", "pids", ns]).split(/\s+/).filter(Boolean)) {
        try {
          process.kill(Number(pid), "SIGKILL");
        } catch {
          /* gone */
        }
      }
    } catch {
      /* already gone */
    }
  }
  for (const ns of names) {
    try {
      sh("ip", ["netns", "delete", ns]);
    } catch {
      /* already gone */
    }
  }
}

/**
 * Mount points some lab had to make on the machine, one empty file each (its path, URI-encoded):
 * shared by every lab on the machine, since another lab may be using a mount point one lab made.
 */
const MADE_MOUNT_POINTS = join(machineTmpdir(), "join-broker-lab-mount-points");

/** Whether a lab other than `prefix` still has namespaces and a live process. */
function otherLabsLive(prefix: string): boolean {
  return sh("ip", ["netns", "list"])
    .split("\n")
    .map((l) => l.trim().split(/\s+/)[0] ?? "")
    .some((ns) => {
      const m = PREFIX_RE.exec(ns);
      return m !== null && !ns.startsWith(prefix) && alive(Number(m[1]));
    });
}

/**
 * Removes the (empty) mount points labs made, once no lab runs: removing one while another lab's
 * processes have it bind-mounted would detach their mounts (Linux detaches the mounts of a
 * directory removed in another mount namespace).
 */
function removeMadeMountPoints(): void {
  let made: string[];
  try {
    made = readdirSync(MADE_MOUNT_POINTS);
  } catch {
    return;
  }
  for (const name of made) {
    const path = decodeURIComponent(name);
    try {
      if (readdirSync(path).length === 0) rmdirSync(path);
    } catch {
      /* gone already, or not empty: the machine's now */
    }
    rmSync(join(MADE_MOUNT_POINTS, name), { force: true });
  }
}

/** Removes the namespaces of labs whose process is gone (a crashed run); never another live run's. */
export function reapStaleLabs(): string[] {
  const stale = sh("ip", ["netns", "list"])
    .split("\n")
    .map((l) => l.trim().split(/\s+/)[0] ?? "")
    .filter((ns) => {
      const m = PREFIX_RE.exec(ns);
      return m !== null && Number(m[1]) !== process.pid && !alive(Number(m[1]));
    });
  removeNamespaces(stale);
  return stale;
}

interface Delay {
  id: number;
  host: string;
  port: number;
  proxyPort: number;
  proc: ChildProcess;
}

interface Cut {
  id: number;
  from: string;
  to: string;
}

export class Lab {
  readonly hosts = new Map<string, LabHost>();
  readonly #cuts: Cut[] = [];
  readonly #loss = new Map<string, number>();
  readonly #delays: Delay[] = [];
  readonly #forwards = new Map<string, Promise<string>>();
  readonly #servers: Server[] = [];
  readonly #timers = new Set<NodeJS.Timeout>();
  #nextCut = 1;
  #gateway: ChildProcess | null = null;
  /** Everything this lab did, for a run's timeline: `{ t, kind, ... }`. */
  readonly events: { t: number; kind: string; [k: string]: unknown }[] = [];
  readonly startedAt = Date.now();

  private constructor(
    readonly prefix: string,
    readonly dir: string,
    /** Which /24 of 10.77.0.0/16 is this lab's (claimed machine-wide until `destroy()`). */
    readonly slot: number,
  ) {}

  get bridgeNs(): string {
    return `${this.prefix}br`;
  }

  /** The lab's subnet, `10.77.<slot>.0/24`: its hosts are .10, .11, …, its probe .254. */
  get subnet(): string {
    return `${LAB_NET}.${this.slot}.0/24`;
  }

  /** A new lab (reaping a crashed run's first), with its bridge and probe host. */
  static async create(): Promise<Lab> {
    reapStaleLabs();
    const lab = new Lab(`jbl${process.pid}x${++labsInProcess}-`, mkdtempSync(join(tmpdir(), "join-broker-lab-")), claimSlot());
    try {
      sh("ip", ["netns", "add", lab.bridgeNs]);
      inNs(lab.bridgeNs, "ip", ["link", "set", "lo", "up"]);
      inNs(lab.bridgeNs, "ip", ["link", "add", "br0", "type", "bridge"]);
      inNs(lab.bridgeNs, "ip", ["link", "set", "br0", "up"]);
      // The probe: where the gateway runs; its address is outside every partition.
      const probe = lab.#attach("probe", `${LAB_NET}.${lab.slot}.254`);
      await lab.#startGateway(probe);
    } catch (e) {
      lab.destroy();
      throw e;
    }
    return lab;
  }

  #note(kind: string, detail: Record<string, unknown> = {}): void {
    this.events.push({ t: Date.now() - this.startedAt, kind, ...detail });
  }

  #attach(name: string, ip: string): LabHost {
    if (!/^[a-z0-9-]{1,20}$/.test(name)) throw new Error(`lab host names are [a-z0-9-]{1,20}, not ${name}`);
    if (this.hosts.has(name)) throw new Error(`the lab already has a host ${name}`);
    const ns = `${this.prefix}${name}`;
    const port = `p${this.hosts.size}`;
    sh("ip", ["netns", "add", ns]);
    // Created inside the bridge's namespace, the veth's names never meet the machine's own.
    inNs(this.bridgeNs, "ip", ["link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns]);
    inNs(this.bridgeNs, "ip", ["link", "set", port, "master", "br0", "up"]);
    inNs(ns, "ip", ["link", "set", "lo", "up"]);
    inNs(ns, "ip", ["addr", "add", `${ip}/24`, "dev", "eth0"]);
    inNs(ns, "ip", ["link", "set", "eth0", "up"]);
    const host: LabHost = { name, ns, ip, clockFile: join(this.dir, `${name}.clock`), mounts: new Map() };
    writeFileSync(host.clockFile, "+0\n");
    this.hosts.set(name, host);
    this.#applyRules(host);
    return host;
  }

  /** Adds a host with the next free address of the lab's subnet (10.77.<slot>.10, .11, …). */
  addHost(name: string): LabHost {
    const last = 10 + this.hosts.size - 1;
    if (last > 253) throw new Error(`a lab holds at most ${253 - 10 + 1} hosts`);
    return this.#attach(name, `${LAB_NET}.${this.slot}.${last}`);
  }

  host(name: string): LabHost {
    const h = this.hosts.get(name);
    if (!h) throw new Error(`the lab has no host ${name}`);
    return h;
  }

  /**
   * Gives the host a private `path` (an absolute directory such as `/etc/kubernetes` or
   * `/var/lib/etcd`): every process started on it afterwards sees its own directory there, kept
   * in the lab's directory, and no other host or the machine sees it. Each process gets a mount
   * namespace of its own (`unshare --mount --propagation private`) with the host's directories
   * bind-mounted, so mounts never leak out. The mount point is made (empty) where it is missing,
   * and removed by the last lab to be destroyed (see `removeMadeMountPoints`). Returns the backing directory.
   */
  privatePath(host: string, path: string): string {
    if (!path.startsWith("/") || path.split("/").includes("..")) throw new Error(`a private path is absolute, without '..': ${path}`);
    const h = this.host(host);
    const backing = join(this.dir, "hosts", host, path);
    mkdirSync(backing, { recursive: true });
    // This lab's namespaces exist already, so the last lab's `destroy()` leaves the mount point
    // alone from now on; the lock keeps one it is removing from being counted on meanwhile.
    withMachineLock(MOUNT_POINTS_LOCK, () => {
      if (!existsSync(path)) {
        mkdirSync(path, { recursive: true });
        mkdirSync(MADE_MOUNT_POINTS, { recursive: true });
        writeFileSync(join(MADE_MOUNT_POINTS, encodeURIComponent(path)), "");
      }
    });
    h.mounts.set(path, backing);
    return backing;
  }

  /** The command line that runs `command` on the host: in its network namespace, with its private paths. */
  #command(host: string, command: string, args: string[]): string[] {
    const h = this.host(host);
    if (h.mounts.size === 0) return ["netns", "exec", h.ns, command, ...args];
    const binds = [...h.mounts].flatMap(([path, backing]) => [backing, path]);
    const script = 'while [ "$1" != "--" ]; do mount --bind "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"';
    return ["netns", "exec", h.ns, "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", ...binds, "--", command, ...args];
  }

  /** Runs `command` inside the host; the returned process's pid is the command's own (ip, unshare and sh exec it). */
  spawn(host: string, command: string, args: string[], options: SpawnOptions = {}): ChildProcess {
    return spawn("ip", this.#command(host, command, args), options);
  }

  /** Runs a short command inside the host and returns its stdout. */
  exec(host: string, command: string, args: string[]): string {
    return sh("ip", this.#command(host, command, args));
  }

  /**
   * Environment that puts a process on the host's clock: libfaketime preloaded, reading the
   * offset from the host's clock file (again every second), so `skew()` moves it while it runs.
   * The monotonic clock stays real (timers keep their length).
   */
  clockEnv(host: string): Record<string, string> {
    return {
      LD_PRELOAD: "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
      FAKETIME_TIMESTAMP_FILE: this.host(host).clockFile,
      FAKETIME_CACHE_DURATION: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    };
  }

  /** Moves the host's clock (for processes started with `clockEnv`) `seconds` from real time; 0 puts it back. */
  skew(host: string, seconds: number): void {
    writeFileSync(this.host(host).clockFile, `${seconds >= 0 ? "+" : ""}${Math.round(seconds)}\n`);
    this.#note("skew", { host, seconds });
  }

  /**
   * Drops every packet from each host of `from` to each host of `to` (and back, unless `oneWay`).
   * Returns an id for `heal(id)`.
   */
  partition(from: string[], to: string[], options: { oneWay?: boolean } = {}): number {
    const id = this.#nextCut++;
    for (const a of from)
      for (const b of to) {
        this.#cuts.push({ id, from: a, to: b });
        if (!options.oneWay) this.#cuts.push({ id, from: b, to: a });
      }
    for (const h of new Set([...from, ...to])) this.#applyRules(this.host(h));
    this.#note("partition", { id, from, to, oneWay: !!options.oneWay });
    return id;
  }

  /** Cuts `host` off from every other host (not the probe). */
  isolate(host: string): number {
    return this.partition(
      [host],
      [...this.hosts.keys()].filter((h) => h !== host && h !== "probe"),
    );
  }

  /** Drops `percent` % of the packets a host receives (nftables `numgen random`); 0 ends it. */
  loss(host: string, percent: number): void {
    if (percent > 0) this.#loss.set(host, Math.min(100, Math.round(percent)));
    else this.#loss.delete(host);
    this.#applyRules(this.host(host));
    this.#note("loss", { host, percent });
  }

  /** Ends one partition (by id), or every partition and loss when no id is given. */
  heal(id?: number): void {
    const touched = new Set<string>();
    for (let i = this.#cuts.length - 1; i >= 0; i--) {
      const c = this.#cuts[i]!;
      if (id === undefined || c.id === id) {
        touched.add(c.from);
        touched.add(c.to);
        this.#cuts.splice(i, 1);
      }
    }
    if (id === undefined) {
      for (const h of this.#loss.keys()) touched.add(h);
      this.#loss.clear();
    }
    for (const h of touched) this.#applyRules(this.host(h));
    this.#note("heal", { id: id ?? "all" });
  }

  /**
   * Latency on what other hosts send to `host`'s TCP `port`: new connections go through a proxy
   * in the host (nftables redirect, prerouting) that holds every chunk, each way, `ms` ± `jitterMs`.
   * Connections open before stay as they are. Returns an id for `undelay(id)`.
   */
  async delay(host: string, port: number, ms: number, jitterMs = 0): Promise<number> {
    const h = this.host(host);
    const id = this.#nextCut++;
    const proxyPort = 40_000 + id;
    const proc = this.spawn(host, process.execPath, [DELAY_PROXY, String(proxyPort), h.ip, String(port), String(ms), String(jitterMs)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((ok, fail) => {
      const timer = setTimeout(() => fail(new Error("the delay proxy did not start within 30 s")), 30_000);
      proc.stdout!.once("data", () => (clearTimeout(timer), ok()));
      proc.once("exit", (code) => (clearTimeout(timer), fail(new Error(`the delay proxy exited with ${code}`))));
    });
    this.#delays.push({ id, host, port, proxyPort, proc });
    this.#applyDelays(h);
    this.#note("delay", { id, host, port, ms, jitterMs });
    return id;
  }

  /** Ends one latency (by id), or all of them. */
  undelay(id?: number): void {
    for (let i = this.#delays.length - 1; i >= 0; i--) {
      const d = this.#delays[i]!;
      if (id !== undefined && d.id !== id) continue;
      this.#delays.splice(i, 1);
      this.#applyDelays(this.host(d.host));
      d.proc.kill("SIGKILL");
    }
    this.#note("undelay", { id: id ?? "all" });
  }

  #applyDelays(host: LabHost): void {
    const redirects = this.#delays.filter((d) => d.host === host.name).map((d) => `    iifname "eth0" tcp dport ${d.port} redirect to :${d.proxyPort}`);
    const rules = [
      "table ip labdelay",
      "delete table ip labdelay",
      "table ip labdelay {",
      "  chain prerouting {",
      "    type nat hook prerouting priority dstnat; policy accept;",
      ...redirects,
      "  }",
      "}",
      "",
    ].join("\n");
    inNs(host.ns, "nft", ["-f", "-"], rules);
  }

  /** Sets the host's link down for `downMs`, then up again; resolves once it is back up. */
  async flap(host: string, downMs: number): Promise<void> {
    this.linkDown(host);
    await new Promise<void>((r) => {
      const t = setTimeout(() => (this.#timers.delete(t), r()), downMs);
      this.#timers.add(t);
    });
    this.linkUp(host);
  }

  linkDown(host: string): void {
    this.exec(host, "ip", ["link", "set", "eth0", "down"]);
    this.#note("link-down", { host });
  }

  linkUp(host: string): void {
    this.exec(host, "ip", ["link", "set", "eth0", "up"]);
    this.#note("link-up", { host });
  }

  /** SIGSTOP to a process group (a paused VM stops all of it); `resume` continues it. */
  pause(pgid: number): void {
    signalGroup(pgid, "SIGSTOP");
    this.#note("pause", { pgid });
  }

  resume(pgid: number): void {
    signalGroup(pgid, "SIGCONT");
    this.#note("resume", { pgid });
  }

  /** The host's nftables rules, rebuilt from the lab's state in one atomic `nft -f`. */
  #applyRules(host: LabHost): void {
    const out = this.#cuts.filter((c) => c.from === host.name).map((c) => `    ip daddr ${this.host(c.to).ip} drop`);
    const inp = this.#cuts.filter((c) => c.to === host.name).map((c) => `    ip saddr ${this.host(c.from).ip} drop`);
    const loss = this.#loss.get(host.name);
    if (loss) inp.push(`    ip saddr ${this.subnet} ${loss < 100 ? `numgen random mod 100 < ${loss} ` : ""}drop`);
    const rules = [
      "table inet lab",
      "delete table inet lab",
      "table inet lab {",
      "  chain input {",
      "    type filter hook input priority 0; policy accept;",
      ...inp,
      "  }",
      "  chain output {",
      "    type filter hook output priority 0; policy accept;",
      ...out,
      "  }",
      "}",
      "",
    ].join("\n");
    inNs(host.ns, "nft", ["-f", "-"], rules);
  }

  /**
   * A loopback URL on this side that reaches `url` (an `http://10.77.…:PORT` address in the lab)
   * through the probe's gateway. The same URL gives the same forward.
   */
  reach(url: string): Promise<string> {
    const u = new URL(url);
    const target = `${u.hostname}:${u.port || (u.protocol === "https:" ? 443 : 80)}`;
    let forward = this.#forwards.get(target);
    if (!forward) {
      forward = this.#forward(target).then((port) => `${u.protocol}//127.0.0.1:${port}`);
      this.#forwards.set(target, forward);
    }
    return forward;
  }

  #forward(target: string): Promise<number> {
    const socketPath = join(this.dir, "gateway.sock");
    const server = createServer((client) => {
      const upstream = connect(socketPath, () => {
        upstream.write(`${target}\n`);
        client.pipe(upstream).pipe(client);
      });
      // pipe() ends each side when the other ends; an error ends both.
      const end = () => (client.destroy(), upstream.destroy());
      upstream.on("error", end);
      client.on("error", end);
    });
    this.#servers.push(server);
    return new Promise((ok, fail) => {
      server.once("error", fail);
      server.listen(0, "127.0.0.1", () => ok((server.address() as { port: number }).port));
    });
  }

  async #startGateway(probe: LabHost): Promise<void> {
    const socketPath = join(this.dir, "gateway.sock");
    const proc = spawn("ip", ["netns", "exec", probe.ns, process.execPath, GATEWAY, socketPath], { stdio: ["ignore", "pipe", "inherit"] });
    this.#gateway = proc;
    await new Promise<void>((ok, fail) => {
      const timer = setTimeout(() => fail(new Error("the lab's gateway did not start within 30 s")), 30_000);
      proc.stdout!.once("data", () => (clearTimeout(timer), ok()));
      proc.once("exit", (code) => (clearTimeout(timer), fail(new Error(`the lab's gateway exited with ${code}`))));
    });
  }

  /** Kills everything still running inside the lab's hosts and removes its namespaces. */
  destroy(): void {
    for (const t of this.#timers) clearTimeout(t);
    for (const s of this.#servers) s.close();
    for (const d of this.#delays) d.proc.kill("SIGKILL");
    this.#gateway?.kill("SIGKILL");
    const mine = sh("ip", ["netns", "list"])
      .split("\n")
      .map((l) => l.trim().split(/\s+/)[0] ?? "")
      .filter((ns) => ns.startsWith(this.prefix));
    removeNamespaces(mine);
    rmSync(this.dir, { recursive: true, force: true });
    slotsInProcess.delete(this.slot);
    release(SUBNET_CLAIMS, this.slot);
    // Under the lock that `privatePath` makes them under: no lab can start using one in between.
    withMachineLock(MOUNT_POINTS_LOCK, () => {
      if (!otherLabsLive(this.prefix)) removeMadeMountPoints();
    });
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    try {
      process.kill(pgid, signal);
    } catch {
      /* gone: nothing left to pause or resume */
    }
  }
}

/** What `eventually` does not wait out: the run cannot get there by itself. */
export class NeedsOperator extends Error {
  override readonly name = "NeedsOperator";
}

/** Waits for what is eventually true (polled every second); the last problem goes into the error. */
export async function eventually<T>(what: string, attempt: () => T | null | Promise<T | null>, budgetMs: number): Promise<T> {
  const deadline = Date.now() + budgetMs;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await attempt();
      if (v !== null) return v;
    } catch (e) {
      if (e instanceof NeedsOperator) throw new Error(`${what}: ${e.message}`);
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${Math.round(budgetMs / 1000)} s${last ? ` (last: ${String(last)})` : ""}`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
