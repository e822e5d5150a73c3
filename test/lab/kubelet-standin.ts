/**
 * @module A stand-in for the kubelet on a lab host: just enough of one for kubeadm to deploy
 * etcd and kube-apiserver as static pods, and nothing more. It is not a kubelet.
 *
 * What it does, per host:
 * - watches the host's own `/etc/kubernetes/manifests` (its private path, see `lab.privatePath`)
 *   and, for each static-pod manifest kubeadm writes there, runs the first container's
 *   `command` + `args` as a process on the host, the binary replaced by a local build
 *   (`etcd`, `kube-apiserver` → the paths given); the process runs in the host's network and
 *   mount namespace, so the manifest's paths (`/etc/kubernetes/pki/…`, `/var/lib/etcd`) are the
 *   host's own directories;
 * - restarts a process that exits (backoff 0.5 s doubling to 5 s, reset after 10 s of running)
 *   and replaces it when its manifest changes; stops it when the manifest goes; stops
 *   everything on `close()`;
 * - for a test, holds a pod back (`hold`, `release`): a kubelet slow to start it;
 * - creates each static pod's mirror pod in the API server (`<name>-<node>` in the manifest's
 *   namespace, its labels and annotations, `kubernetes.io/config.mirror`, `spec.nodeName`),
 *   with the client certificate of the host's `super-admin.conf` or `admin.conf`, retried until
 *   the API server takes it. kubeadm finds etcd's endpoints only through these mirror pods
 *   (`component=etcd,tier=control-plane` with `kubeadm.kubernetes.io/etcd.advertise-client-urls`).
 *
 * What a real kubelet does that this does not: containers, images, cgroups and resource limits,
 * volumes (hostPath mounts are taken as the host's own paths), probes (liveness, readiness,
 * startup) and pod status (a mirror pod has no status, so it is never Ready), a Node object and
 * its lease, TLS bootstrap and its own kubeconfig (`kubelet.conf`), the kubelet's healthz port,
 * a CRI socket, pods from the API server, eviction, and the controller-manager and scheduler
 * (their manifests get a mirror pod, but nothing runs them: no binary is given for them).
 */
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, watch, type FSWatcher } from "node:fs";
import { basename, join } from "node:path";
import { parse } from "yaml";
import { kubeRequest, readKubeconfig, type KubeCredentials } from "./kube-client.ts";
import type { Lab } from "./lab.ts";

export interface KubeletStandInOptions {
  lab: Lab;
  host: string;
  /** The node name kubeadm was given (`nodeRegistration.name`): the mirror pods' suffix and `spec.nodeName`. */
  nodeName: string;
  /** A manifest's binary name → the local path to run instead (`etcd`, `kube-apiserver`). */
  binaries: Record<string, string>;
  /** Where each pod's output goes (`<host>-<pod>.log`). */
  logDir: string;
  /** Each thing it does, as one line (also kept in `events`). */
  onEvent?: (line: string) => void;
}

interface Manifest {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { containers?: { command?: string[]; args?: string[]; env?: { name: string; value?: string }[] }[]; [k: string]: unknown };
}

interface Pod {
  file: string;
  hash: string;
  manifest: Manifest;
  /** The mirror pod's name: `<manifest name>-<node>`, as a kubelet names it. */
  name: string;
  namespace: string;
  proc: ChildProcess | null;
  startedAt: number;
  restarts: number;
  timer: NodeJS.Timeout | null;
  gone: boolean;
  mirrored: boolean;
}

const KUBELET_BACKOFF_MIN_MS = 500;
const KUBELET_BACKOFF_MAX_MS = 5_000;
const STOP_GRACE_MS = 5_000;

export class KubeletStandIn {
  readonly events: string[] = [];
  readonly #pods = new Map<string, Pod>();
  readonly #manifestDir: string;
  readonly #etcKubernetes: string;
  #watcher: FSWatcher | null = null;
  #poll: NodeJS.Timeout | null = null;
  #scanTimer: NodeJS.Timeout | null = null;
  #closed = false;
  /** Pods not to start until released: a kubelet slow to start one (an image pull, a busy node). */
  readonly #held = new Set<string>();

  constructor(readonly options: KubeletStandInOptions) {
    const { lab, host } = options;
    const mounts = lab.host(host).mounts;
    this.#etcKubernetes = mounts.get("/etc/kubernetes") ?? lab.privatePath(host, "/etc/kubernetes");
    if (!mounts.has("/var/lib/etcd")) lab.privatePath(host, "/var/lib/etcd");
    this.#manifestDir = join(this.#etcKubernetes, "manifests");
    mkdirSync(this.#manifestDir, { recursive: true });
    mkdirSync(options.logDir, { recursive: true });
    // inotify sees what kubeadm writes through the bind mount; the poll is a safety net.
    this.#watcher = watch(this.#manifestDir, () => this.#scheduleScan());
    this.#poll = setInterval(() => this.#scan(), 2_000);
    this.#scan();
  }

  /**
   * The pods it runs now: mirror name, the manifest's hash (the mirror pod's `kubernetes.io/config.mirror`),
   * pid (null while waiting to restart), restarts since it last ran 10 s, whether its mirror pod exists.
   */
  pods(): { name: string; hash: string; pid: number | null; restarts: number; mirrored: boolean }[] {
    return [...this.#pods.values()].map((p) => ({ name: p.name, hash: p.hash, pid: p.proc?.pid ?? null, restarts: p.restarts, mirrored: p.mirrored }));
  }

  /**
   * The hash a pod of manifest `file` would have, from the file as it is on disk now (null when
   * there is none): what the host's installer last wrote, whether or not a scan has seen it yet.
   */
  manifestOnDisk(file: string): string | null {
    try {
      return manifestHash(readFileSync(join(this.#manifestDir, file), "utf8"));
    } catch {
      return null;
    }
  }

  /**
   * Holds a pod (by its mirror name, `etcd-cp-2`): it is not started, now or later, until
   * `release`. A process already running is left alone.
   */
  hold(podName: string): void {
    this.#held.add(podName);
    this.#event(`holding ${podName}`);
  }

  /** Ends a hold: the pod starts if its manifest is there. */
  release(podName: string): void {
    this.#held.delete(podName);
    this.#event(`releasing ${podName}`);
    for (const pod of this.#pods.values()) if (pod.name === podName && !pod.proc && !pod.timer) this.#run(pod);
  }

  /** Where a pod's output goes. */
  logPath(podName: string): string {
    return join(this.options.logDir, `${this.options.host}-${podName}.log`);
  }

  /** Stops every process (SIGTERM, SIGKILL after 5 s) and stops watching. Mirror pods stay. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#watcher?.close();
    if (this.#poll) clearInterval(this.#poll);
    if (this.#scanTimer) clearTimeout(this.#scanTimer);
    await Promise.all([...this.#pods.values()].map((p) => this.#stop(p)));
  }

  #event(line: string): void {
    const text = `[kubelet-standin ${this.options.host}] ${line}`;
    this.events.push(text);
    this.options.onEvent?.(text);
  }

  #scheduleScan(): void {
    if (this.#closed || this.#scanTimer) return;
    // A manifest is written in more than one write: read it once the writes have settled.
    this.#scanTimer = setTimeout(() => ((this.#scanTimer = null), this.#scan()), 150);
  }

  #scan(): void {
    if (this.#closed) return;
    const seen = new Set<string>();
    for (const file of readdirSync(this.#manifestDir).filter((f) => /\.(ya?ml|json)$/.test(f) && !f.startsWith("."))) {
      let text: string;
      try {
        text = readFileSync(join(this.#manifestDir, file), "utf8");
      } catch {
        continue; // removed between the listing and the read
      }
      const hash = manifestHash(text);
      seen.add(file);
      const current = this.#pods.get(file);
      if (current?.hash === hash) continue;
      let manifest: Manifest;
      try {
        manifest = parse(text) as Manifest;
      } catch {
        continue; // half written: the next event or poll reads it whole
      }
      if (!manifest?.metadata?.name || !manifest.spec?.containers?.length) continue;
      // The old process lets go of its ports before the new one starts.
      this.#add(file, hash, manifest, current ? this.#replace(current) : Promise.resolve());
    }
    for (const [file, pod] of this.#pods)
      if (!seen.has(file)) {
        this.#pods.delete(file);
        this.#event(`manifest ${file} removed: stopping ${pod.name}`);
        void this.#stop(pod).then(() => this.#deleteMirror(pod));
      }
  }

  async #replace(old: Pod): Promise<void> {
    this.#event(`manifest ${old.file} changed: replacing ${old.name}`);
    await this.#stop(old);
  }

  #add(file: string, hash: string, manifest: Manifest, after: Promise<void>): void {
    const pod: Pod = {
      file,
      hash,
      manifest,
      name: `${manifest.metadata!.name}-${this.options.nodeName}`,
      namespace: manifest.metadata!.namespace ?? "kube-system",
      proc: null,
      startedAt: 0,
      restarts: 0,
      timer: null,
      gone: false,
      mirrored: false,
    };
    this.#pods.set(file, pod);
    void after.then(() => this.#run(pod));
    void this.#mirror(pod);
  }

  #run(pod: Pod): void {
    if (pod.gone || this.#closed) return;
    if (this.#held.has(pod.name)) return void this.#event(`${pod.name}: held, not started`);
    const container = pod.manifest.spec!.containers![0]!;
    const argv = [...(container.command ?? []), ...(container.args ?? [])];
    const bin = argv[0] ? this.options.binaries[basename(argv[0])] : undefined;
    if (!bin) {
      if (pod.restarts === 0 && !pod.startedAt) this.#event(`${pod.name}: not run (no local binary for ${argv[0] ?? "an empty command"})`);
      pod.startedAt = Date.now();
      return;
    }
    const env: Record<string, string> = { ...(process.env as Record<string, string>) };
    for (const e of container.env ?? []) env[e.name] = e.value ?? "";
    const out = openSync(this.logPath(pod.name), "a");
    try {
      // Its own process group: a stop reaches whatever it started.
      pod.proc = this.options.lab.spawn(this.options.host, bin, argv.slice(1), { stdio: ["ignore", out, out], detached: true, cwd: "/", env });
    } finally {
      closeSync(out);
    }
    pod.startedAt = Date.now();
    const proc = pod.proc;
    this.#event(`started ${pod.name} (pid ${proc.pid}${pod.restarts ? `, restart ${pod.restarts}` : ""})`);
    proc.once("exit", (code, signal) => {
      if (pod.proc !== proc) return;
      pod.proc = null;
      if (pod.gone || this.#closed) return;
      const ranMs = Date.now() - pod.startedAt;
      if (ranMs > 10_000) pod.restarts = 0;
      const delay = Math.min(KUBELET_BACKOFF_MAX_MS, KUBELET_BACKOFF_MIN_MS * 2 ** pod.restarts);
      pod.restarts++;
      this.#event(`${pod.name} exited (${code ?? signal}) after ${Math.round(ranMs / 100) / 10} s; restarting in ${delay} ms`);
      pod.timer = setTimeout(() => ((pod.timer = null), this.#run(pod)), delay);
    });
  }

  async #stop(pod: Pod): Promise<void> {
    pod.gone = true;
    if (pod.timer) clearTimeout(pod.timer);
    const proc = pod.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((r) => proc.once("exit", () => r()));
    signal(proc.pid!, "SIGTERM");
    const timer = setTimeout(() => signal(proc.pid!, "SIGKILL"), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  /** The admin credentials kubeadm wrote on this host: super-admin.conf (init host) first, then admin.conf. */
  #credentials(): KubeCredentials | null {
    for (const f of ["super-admin.conf", "admin.conf"]) {
      const path = join(this.#etcKubernetes, f);
      if (!existsSync(path)) continue;
      try {
        return readKubeconfig(path);
      } catch {
        /* half written */
      }
    }
    return null;
  }

  /** Creates the pod's mirror pod, retried until the API server takes it or the pod goes. */
  async #mirror(pod: Pod): Promise<void> {
    const { lab, nodeName } = this.options;
    const m = pod.manifest.metadata!;
    const body = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: pod.name,
        namespace: pod.namespace,
        labels: m.labels ?? {},
        annotations: {
          ...(m.annotations ?? {}),
          "kubernetes.io/config.mirror": pod.hash,
          "kubernetes.io/config.hash": pod.hash,
          "kubernetes.io/config.source": "file",
        },
      },
      spec: { ...pod.manifest.spec, nodeName },
    };
    const base = `/api/v1/namespaces/${pod.namespace}/pods`;
    let lastProblem = "";
    while (!pod.gone && !this.#closed) {
      const creds = this.#credentials();
      let problem = "no admin kubeconfig yet";
      if (creds) {
        try {
          const created = await kubeRequest(lab, creds, "POST", base, body);
          if (created.status === 201) {
            pod.mirrored = true;
            this.#event(`mirror pod ${pod.namespace}/${pod.name} created`);
            return;
          }
          problem = `${created.status}`;
          if (created.status === 409) {
            // One from an earlier manifest: a kubelet replaces a mirror pod whose hash differs.
            const existing = await kubeRequest(lab, creds, "GET", `${base}/${pod.name}`);
            const hash = existing.status === 200 ? (JSON.parse(existing.body) as Manifest).metadata?.annotations?.["kubernetes.io/config.mirror"] : undefined;
            if (hash === pod.hash) {
              pod.mirrored = true;
              return;
            }
            await kubeRequest(lab, creds, "DELETE", `${base}/${pod.name}?gracePeriodSeconds=0`);
          }
        } catch (e) {
          problem = (e as NodeJS.ErrnoException).code ?? "no answer";
        }
      }
      if (problem !== lastProblem) this.#event(`mirror pod ${pod.name} not created yet (${problem}); retrying`);
      lastProblem = problem;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }

  async #deleteMirror(pod: Pod): Promise<void> {
    const creds = this.#credentials();
    if (!creds || !pod.mirrored) return;
    await kubeRequest(this.options.lab, creds, "DELETE", `/api/v1/namespaces/${pod.namespace}/pods/${pod.name}?gracePeriodSeconds=0`).catch(() => undefined);
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* gone */
    }
  }
}

/** A manifest's identity, as a kubelet's mirror pod names it (`kubernetes.io/config.mirror`). */
function manifestHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 32);
}
