/**
 * Unmodified kubeadm on lab hosts: each host's configuration file (kubeadm's v1beta4 API),
 * `kubeadm init` on one host and `kubeadm join --control-plane` on others, run as processes on
 * the host (its network namespace, and a mount namespace with its own `/etc/kubernetes` and
 * `/var/lib/etcd`). The static pods kubeadm writes are run by the kubelet stand-in
 * (`kubelet-standin.ts`); the phases that need a real kubelet, a Node object, the
 * controller-manager or the scheduler are skipped (docs/kubeadm.md says which and why).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { cachedEtcdPath } from "../../scripts/etcd.mjs";
import { cachedKubePath, kubePin } from "../../scripts/kube.mjs";
import type { Lab } from "./lab.ts";

/** The pinned release's binaries, already built (never builds them). */
export interface KubeBinaries {
  kubeadm: string;
  kubeApiserver: string;
  etcd: string;
}

/** The built binaries, or the reason there are none (`node scripts/kube.mjs list` builds them). */
export function kubeBinaries(): KubeBinaries | string {
  const kubeadm = cachedKubePath("kubeadm");
  const kubeApiserver = cachedKubePath("kube-apiserver");
  const etcd = cachedEtcdPath(kubePin().etcd);
  const missing = [!kubeadm && "kubeadm", !kubeApiserver && "kube-apiserver", !etcd && `etcd ${kubePin().etcd}`].filter(Boolean);
  if (missing.length || !kubeadm || !kubeApiserver || !etcd) return `not built: ${missing.join(", ")} (node scripts/kube.mjs list builds them)`;
  return { kubeadm, kubeApiserver, etcd };
}

/** The token every lab cluster uses (bootstrap tokens are `[a-z0-9]{6}.[a-z0-9]{16}`). */
export const LAB_BOOTSTRAP_TOKEN = "labtkn.0123456789abcdef";
/** The key kubeadm encrypts the uploaded certificates with: 32 bytes, hex. */
export const LAB_CERTIFICATE_KEY = "6c61622d63657274696669636174652d6b65792d6f662d33322d62797465732e";
/** No container runtime runs here; kubeadm only records the socket, it never calls it with these phases skipped. */
const CRI_SOCKET = "unix:///var/run/containerd/containerd.sock";

/**
 * Init phases left out: `preflight` (checks a real machine: swap, the runtime, ports, the kubelet),
 * `kubelet-start` and `kubelet-finalize` (the kubelet's own configuration and certificate),
 * `wait-control-plane` (asks the kubelet's healthz, the controller-manager and the scheduler),
 * `mark-control-plane` (labels and taints the Node object, which no kubelet registers), `addon`
 * (CoreDNS and kube-proxy: nothing would run them). `upload-config` runs whole: a join needs its
 * `kubelet-config` ConfigMap.
 */
export const INIT_SKIP_PHASES = ["preflight", "kubelet-start", "wait-control-plane", "mark-control-plane", "kubelet-finalize", "addon"];

/**
 * Join phases left out: `preflight`, `kubelet-start`, `kubelet-wait-bootstrap` (waits for the
 * kubelet's healthz), `control-plane-join` (marks the Node object), `wait-control-plane`. Kept:
 * discovery, the certificates' download, certs, kubeconfigs and manifests (`control-plane-prepare`),
 * `check-etcd` and `etcd-join` (the learner's add, its promotion, the health wait).
 */
export const JOIN_SKIP_PHASES = ["preflight", "kubelet-start", "kubelet-wait-bootstrap", "control-plane-join", "wait-control-plane"];

export interface KubeadmHost {
  host: string;
  /** `nodeRegistration.name`: the etcd member's and the mirror pods' name. */
  nodeName: string;
  /** The host's lab address: `localAPIEndpoint.advertiseAddress`, etcd's peer and client URLs. */
  address: string;
  /** `host:port` every node reaches the API servers at (here the first host's). */
  controlPlaneEndpoint: string;
}

/** The host's private `/etc/kubernetes` and `/var/lib/etcd`; returns the backing `/etc/kubernetes`. */
export function prepareKubeHost(lab: Lab, host: string): string {
  const h = lab.host(host);
  const etc = h.mounts.get("/etc/kubernetes") ?? lab.privatePath(host, "/etc/kubernetes");
  if (!h.mounts.has("/var/lib/etcd")) lab.privatePath(host, "/var/lib/etcd");
  return etc;
}

/** Where a host's kubeadm files go: in the lab's directory, which every host sees at the same path. */
function kubeadmDir(lab: Lab, host: string): string {
  const dir = join(lab.dir, "kubeadm", host);
  mkdirSync(dir, { recursive: true });
  return dir;
}

const nodeRegistration = (h: KubeadmHost) => ({ name: h.nodeName, criSocket: CRI_SOCKET, taints: [], ignorePreflightErrors: ["all"] });

/** What a cluster's init.yaml may add to the recipe's. */
export interface ClusterOptions {
  /**
   * `ClusterConfiguration.etcd.local.extraArgs`: flags for every node's etcd (a joiner's kubeadm
   * reads the ClusterConfiguration init uploaded), e.g. `{ "max-learners": "4" }`.
   */
  etcdExtraArgs?: Record<string, string>;
}

/** init.yaml: InitConfiguration + ClusterConfiguration (v1beta4). */
export function initConfig(h: KubeadmHost, options: ClusterOptions = {}): string {
  const init = {
    apiVersion: "kubeadm.k8s.io/v1beta4",
    kind: "InitConfiguration",
    bootstrapTokens: [
      { token: LAB_BOOTSTRAP_TOKEN, ttl: "2h0m0s", groups: ["system:bootstrappers:kubeadm:default-node-token"], usages: ["signing", "authentication"] },
    ],
    certificateKey: LAB_CERTIFICATE_KEY,
    localAPIEndpoint: { advertiseAddress: h.address, bindPort: 6443 },
    nodeRegistration: nodeRegistration(h),
    skipPhases: INIT_SKIP_PHASES,
  };
  const cluster = {
    apiVersion: "kubeadm.k8s.io/v1beta4",
    kind: "ClusterConfiguration",
    // Given, so kubeadm never asks dl.k8s.io for the latest release (the lab has no route out).
    kubernetesVersion: `v${kubePin().release}`,
    clusterName: "lab",
    controlPlaneEndpoint: h.controlPlaneEndpoint,
    ...(options.etcdExtraArgs ? { etcd: { local: { extraArgs: Object.entries(options.etcdExtraArgs).map(([name, value]) => ({ name, value })) } } } : {}),
  };
  return `${stringify(init)}---\n${stringify(cluster)}`;
}

export interface JoinOptions {
  /** More arguments (`-v=5`: kubeadm logs the retries of a refused member add only at 5). */
  args?: string[];
  /**
   * `timeouts.etcdAPICall` ("30s"): how long kubeadm retries each etcd call (the add, the wait
   * for the learner to start, its promotion); kubeadm's default is 2 minutes.
   */
  etcdAPICall?: string;
}

/** join.yaml: JoinConfiguration (v1beta4) with file discovery (below) and the bootstrap token. */
export function joinConfig(h: KubeadmHost, discoveryFile: string, options: JoinOptions = {}): string {
  return stringify({
    apiVersion: "kubeadm.k8s.io/v1beta4",
    kind: "JoinConfiguration",
    discovery: { file: { kubeConfigPath: discoveryFile }, tlsBootstrapToken: LAB_BOOTSTRAP_TOKEN },
    controlPlane: { localAPIEndpoint: { advertiseAddress: h.address, bindPort: 6443 }, certificateKey: LAB_CERTIFICATE_KEY },
    nodeRegistration: nodeRegistration(h),
    skipPhases: JOIN_SKIP_PHASES,
    ...(options.etcdAPICall ? { timeouts: { etcdAPICall: options.etcdAPICall } } : {}),
  });
}

/**
 * The discovery file a joiner trusts the cluster by: the `cluster-info` kubeconfig (server and CA,
 * no user), from the init host's CA. Token discovery would need the controller-manager's
 * bootstrap signer (the `jws-kubeconfig-<id>` key of `kube-public/cluster-info`), which no one runs here.
 */
export function discoveryKubeconfig(lab: Lab, initHost: string, controlPlaneEndpoint: string): string {
  return discoveryFor(readFileSync(join(prepareKubeHost(lab, initHost), "pki", "ca.crt")), controlPlaneEndpoint);
}

/** The same from the cluster's CA certificate, made before any node (see `clusterCa`). */
export function discoveryFor(ca: Buffer, controlPlaneEndpoint: string): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "", cluster: { server: `https://${controlPlaneEndpoint}`, "certificate-authority-data": ca.toString("base64") } }],
    contexts: null,
    "current-context": "",
    preferences: {},
    users: null,
  });
}

export interface KubeadmRun {
  code: number | null;
  /** stdout and stderr, interleaved as printed. */
  output: string;
  ms: number;
}

/** Runs kubeadm on the host until it exits (SIGKILL after `timeoutMs`, default 5 minutes). */
export function runKubeadm(
  lab: Lab,
  host: string,
  kubeadm: string,
  args: string[],
  options: { timeoutMs?: number; onOutput?: (chunk: string) => void } = {},
): Promise<KubeadmRun> {
  const started = Date.now();
  const proc = lab.spawn(host, kubeadm, args, { stdio: ["ignore", "pipe", "pipe"], cwd: "/" });
  let output = "";
  const take = (c: Buffer) => {
    output += c.toString();
    options.onOutput?.(c.toString());
  };
  proc.stdout!.on("data", take);
  proc.stderr!.on("data", take);
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => proc.kill("SIGKILL"), options.timeoutMs ?? 300_000);
    proc.once("error", (e) => (clearTimeout(timer), fail(e)));
    proc.once("close", (code) => (clearTimeout(timer), ok({ code, output, ms: Date.now() - started })));
  });
}

/** `kubeadm init --config init.yaml --upload-certs` on the host (init.yaml with `cluster`'s additions). */
export function kubeadmInit(lab: Lab, bins: KubeBinaries, h: KubeadmHost, extraArgs: string[] = [], cluster: ClusterOptions = {}): Promise<KubeadmRun> {
  prepareKubeHost(lab, h.host);
  const config = join(kubeadmDir(lab, h.host), "init.yaml");
  writeFileSync(config, initConfig(h, cluster));
  return runKubeadm(lab, h.host, bins.kubeadm, ["init", "--config", config, "--upload-certs", ...extraArgs]);
}

/** `kubeadm join --config join.yaml` (a control-plane join: the configuration has `controlPlane`) on the host. */
export function kubeadmJoin(lab: Lab, bins: KubeBinaries, h: KubeadmHost, initHost: string, options: JoinOptions = {}): Promise<KubeadmRun> {
  prepareKubeHost(lab, h.host);
  const dir = kubeadmDir(lab, h.host);
  const discovery = join(dir, "discovery.conf");
  if (!existsSync(discovery)) writeFileSync(discovery, discoveryKubeconfig(lab, initHost, h.controlPlaneEndpoint));
  const config = join(dir, "join.yaml");
  writeFileSync(config, joinConfig(h, discovery, options));
  return runKubeadm(lab, h.host, bins.kubeadm, ["join", "--config", config, ...(options.args ?? [])]);
}

/** `kubeadm join phase <phase> --config join.yaml` with the join.yaml an earlier `kubeadmJoin` wrote (`etcd-join`: the repair of a failed join). */
export function kubeadmJoinPhase(lab: Lab, bins: KubeBinaries, host: string, phase: string, args: string[] = []): Promise<KubeadmRun> {
  const config = join(kubeadmDir(lab, host), "join.yaml");
  if (!existsSync(config)) throw new Error(`no join.yaml on ${host}: run kubeadmJoin there first`);
  return runKubeadm(lab, host, bins.kubeadm, ["join", "phase", phase, "--config", config, ...args]);
}

/**
 * The `--exec` COMMAND of docs/installers.md's kubeadm recipe, as the brokered lab runs it: with
 * `-v=5` (kubeadm logs the retries of a refused member add only at 5), its files in `/etc/kubeadm`.
 */
export const KUBEADM_RECIPE = [
  'if [ "$JOIN_BROKER_ROLE" = bootstrap ]; then',
  "  kubeadm init --config /etc/kubeadm/init.yaml --upload-certs -v=5",
  "else",
  "  kubeadm join --config /etc/kubeadm/join.yaml -v=5 || { s=$?; kubeadm reset -f; exit $s; }",
  "fi",
].join("\n");

/** The cluster's CA (`ca.crt`, `ca.key`), made once before any node by `kubeadm init phase certs ca`. */
export async function clusterCa(lab: Lab, bins: KubeBinaries, host: string): Promise<{ crt: Buffer; key: Buffer }> {
  const dir = join(lab.dir, "kubeadm", "cluster-ca");
  mkdirSync(dir, { recursive: true });
  // A configuration file, not flags: the lab has no default route to take an address from.
  const init = { apiVersion: "kubeadm.k8s.io/v1beta4", kind: "InitConfiguration", localAPIEndpoint: { advertiseAddress: lab.host(host).ip } };
  const cluster = { apiVersion: "kubeadm.k8s.io/v1beta4", kind: "ClusterConfiguration", kubernetesVersion: `v${kubePin().release}`, certificatesDir: dir };
  const config = join(lab.dir, "kubeadm", "cluster-ca.yaml");
  writeFileSync(config, `${stringify(init)}---\n${stringify(cluster)}`);
  const run = await runKubeadm(lab, host, bins.kubeadm, ["init", "phase", "certs", "ca", "--config", config]);
  if (run.code !== 0) throw new Error(`kubeadm init phase certs ca exited ${run.code}: ${run.output}`);
  return { crt: readFileSync(join(dir, "ca.crt")), key: readFileSync(join(dir, "ca.key")) };
}

/**
 * A host ready for the recipe, whichever role the broker gives it: its own `/etc/kubeadm` with
 * init.yaml, join.yaml and the discovery file (the cluster's CA and the endpoint), the cluster's
 * CA pair in its `/etc/kubernetes/pki` (the bootstrap's `kubeadm init` uses it; a joiner's
 * download replaces it), and a private `/var/lib/kubelet` (which `kubeadm reset` empties).
 */
export function prepareRecipeHost(lab: Lab, h: KubeadmHost, ca: { crt: Buffer; key: Buffer }, options: ClusterOptions = {}): void {
  const etc = prepareKubeHost(lab, h.host);
  const mounts = lab.host(h.host).mounts;
  const conf = mounts.get("/etc/kubeadm") ?? lab.privatePath(h.host, "/etc/kubeadm");
  if (!mounts.has("/var/lib/kubelet")) lab.privatePath(h.host, "/var/lib/kubelet");
  writeFileSync(join(conf, "init.yaml"), initConfig(h, options));
  writeFileSync(join(conf, "join.yaml"), joinConfig(h, "/etc/kubeadm/discovery.conf"));
  writeFileSync(join(conf, "discovery.conf"), discoveryFor(ca.crt, h.controlPlaneEndpoint));
  mkdirSync(join(etc, "pki"), { recursive: true });
  writeFileSync(join(etc, "pki", "ca.crt"), ca.crt);
  writeFileSync(join(etc, "pki", "ca.key"), ca.key, { mode: 0o600 });
}
