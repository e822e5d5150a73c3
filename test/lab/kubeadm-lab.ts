/**
 * Labs of kubeadm hosts for the tests and the demo: `KubeLab` (hosts with a kubelet stand-in
 * each, kubeadm run by the caller) and `BrokeredKubeLab` (five such hosts, each running
 * `join-broker join --exec` with docs/installers.md's kubeadm recipe against `join-broker serve`,
 * behind a load balancer). What kubeadm, the agents and the pods printed goes to
 * `test-results/lab-kubeadm/<name>/`.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { ClusterHarness, type AgentRun } from "../support/cluster.ts";
import { joinArgv, ROOT } from "../support/stack.ts";
import { kubeRequest, type KubeCredentials } from "./kube-client.ts";
import {
  clusterCa,
  KUBEADM_RECIPE,
  prepareKubeHost,
  prepareRecipeHost,
  type ClusterOptions,
  type KubeadmHost,
  type KubeBinaries,
  type KubeadmRun,
} from "./kubeadm.ts";
import { KubeletStandIn } from "./kubelet-standin.ts";
import { Lab } from "./lab.ts";

const OUT = resolve(import.meta.dirname, "../../test-results/lab-kubeadm");

/** One lab with a kubelet stand-in per host; the first host added is the control-plane endpoint. */
export class KubeLab {
  readonly kubelets = new Map<string, KubeletStandIn>();
  readonly hosts = new Map<string, KubeadmHost>();
  private constructor(
    readonly lab: Lab,
    readonly out: string,
    /** `host:port` of the control plane; the first host's address when not given. */
    readonly endpoint: string | null,
    /** Whether `close()` destroys the lab (not when a harness runs in it: it is cleaned up first). */
    readonly ownsLab: boolean,
    readonly bins: KubeBinaries,
  ) {}

  /**
   * A new lab, or hosts in `over.lab` (destroyed by `close()` only with `owns`). What the run
   * printed goes to `outDir`, by default `test-results/lab-kubeadm/<name>`.
   */
  static async create(name: string, bins: KubeBinaries, over?: { lab: Lab; endpoint: string; owns?: boolean }, outDir?: string): Promise<KubeLab> {
    const out = outDir ?? join(OUT, name);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    return over ? new KubeLab(over.lab, out, over.endpoint, over.owns === true, bins) : new KubeLab(await Lab.create(), out, null, true, bins);
  }

  /** A kubeadm host with a kubelet stand-in: the lab's host of that name, added when there is none. */
  add(name: string): KubeadmHost {
    const { lab } = this;
    const h = lab.hosts.get(name) ?? lab.addHost(name);
    prepareKubeHost(lab, name);
    const first = this.hosts.values().next().value?.address ?? h.ip;
    const kh: KubeadmHost = { host: name, nodeName: name, address: h.ip, controlPlaneEndpoint: this.endpoint ?? `${first}:6443` };
    this.hosts.set(name, kh);
    const binaries = { etcd: this.bins.etcd, "kube-apiserver": this.bins.kubeApiserver };
    const onEvent = (line: string) => writeFileSync(join(this.out, "kubelet-standin.log"), `${new Date().toISOString()} ${line}\n`, { flag: "a" });
    this.kubelets.set(name, new KubeletStandIn({ lab, host: name, nodeName: name, binaries, logDir: this.out, onEvent }));
    return kh;
  }

  /** What a static pod on `host` has printed so far, across its restarts ("" before its first start). */
  podOutput(host: string, pod: string): string {
    const path = this.kubelets.get(host)?.logPath(pod);
    return path && existsSync(path) ? readFileSync(path, "utf8") : "";
  }

  keep(name: string, run: KubeadmRun): void {
    writeFileSync(join(this.out, `${name}.log`), `exit ${run.code} after ${run.ms} ms\n${run.output}`);
  }

  /** The API server's client certificate for etcd on `host`, aimed at `host`'s etcd. */
  etcdCredentials(host: string): KubeCredentials {
    const pki = join(this.lab.host(host).mounts.get("/etc/kubernetes")!, "pki");
    const read = (f: string) => readFileSync(join(pki, f));
    return {
      server: `https://${this.lab.host(host).ip}:2379`,
      ca: read("etcd/ca.crt"),
      cert: read("apiserver-etcd-client.crt"),
      key: read("apiserver-etcd-client.key"),
    };
  }

  /** `host`'s etcd member list, or null when it does not answer. */
  async members(host: string): Promise<MemberList | null> {
    const answer = await kubeRequest(this.lab, this.etcdCredentials(host), "POST", "/v3/cluster/member/list", {}, 3_000).catch(() => null);
    return answer?.status === 200 ? (JSON.parse(answer.body) as MemberList) : null;
  }

  async close(): Promise<void> {
    await Promise.all([...this.kubelets.values()].map((k) => k.close()));
    if (this.ownsLab) this.lab.destroy();
  }
}

export interface MemberList {
  header: { cluster_id: string };
  members: { ID: string; name?: string; clientURLs?: string[]; isLearner?: boolean }[];
}

/** Started (named, with client URLs) voters in `list`. */
export const startedVoters = (list: MemberList) => list.members.filter((m) => m.name && m.clientURLs?.length && !m.isLearner);

const BALANCER = resolve(import.meta.dirname, "balancer.mjs");
export const NODES = ["cp-1", "cp-2", "cp-3", "cp-4", "cp-5"];

export interface RecipeLabOptions {
  /** The cluster's policy on the broker (e.g. `{ maxInFlight: 4 }`). */
  policy?: Record<string, number>;
  /** What init.yaml adds (etcd's extra flags). */
  cluster?: ClusterOptions;
  /** Where what the run printed goes (default `test-results/lab-kubeadm/<name>`). */
  outDir?: string;
}

/**
 * The recipe's hosts in `lab` (NODES already added): a load balancer on host `lb` as every
 * node's `controlPlaneEndpoint`, a kubelet stand-in per host, the cluster's CA made before any
 * node (the broker, not the caller, picks the node that runs `kubeadm init`) and each host's
 * `/etc/kubeadm` files.
 */
async function prepareRecipeLab(lab: Lab, name: string, bins: KubeBinaries, options: RecipeLabOptions, owns: boolean): Promise<KubeLab> {
  const lb = lab.addHost("lb");
  const balancer = lab.spawn("lb", process.execPath, [BALANCER, "6443", NODES.map((n) => `${lab.host(n).ip}:6443`).join(",")], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error("the balancer did not start within 30 s")), 30_000);
    balancer.stdout!.once("data", () => (clearTimeout(timer), ok()));
    balancer.once("exit", (code) => (clearTimeout(timer), fail(new Error(`the balancer exited with ${code}`))));
  });
  const k = await KubeLab.create(name, bins, { lab, endpoint: `${lb.ip}:6443`, owns }, options.outDir);
  const hosts = NODES.map((n) => k.add(n));
  const ca = await clusterCa(lab, bins, NODES[0]!);
  for (const kh of hosts) prepareRecipeHost(lab, kh, ca, options.cluster);
  return k;
}

/**
 * The brokered scenario's hosts without the broker: five kubeadm hosts prepared for the recipe as
 * `BrokeredKubeLab`'s are, for running the recipe's commands by hand (one after another, say).
 * `close()` destroys the lab.
 */
export async function recipeKubeLab(name: string, bins: KubeBinaries, options: RecipeLabOptions = {}): Promise<KubeLab> {
  const lab = await Lab.create();
  try {
    for (const n of NODES) lab.addHost(n);
    return await prepareRecipeLab(lab, name, bins, options, true);
  } catch (e) {
    lab.destroy();
    throw e;
  }
}

/**
 * The brokered scenario's lab: `join-broker serve` on host `broker` (the harness's), five
 * kubeadm hosts each with a kubelet stand-in, the recipe's files and the cluster's CA (made
 * before any node: the broker, not the test, picks the node that runs `kubeadm init`), and a
 * load balancer on host `lb` as every node's `controlPlaneEndpoint`.
 */
export class BrokeredKubeLab {
  /** Everything each node's agents printed on stderr (their JSON progress and kubeadm's output), all runs. */
  readonly stderr = new Map<string, string>();

  private constructor(
    readonly lab: Lab,
    readonly h: ClusterHarness,
    readonly k: KubeLab,
  ) {}

  static async create(name: string, bins: KubeBinaries, options: RecipeLabOptions = {}): Promise<BrokeredKubeLab> {
    const lab = await Lab.create();
    let h: ClusterHarness | null = null;
    try {
      // The recipe calls `kubeadm` by name: its directory goes first on the agent's PATH.
      const path = `PATH=${dirname(bins.kubeadm)}:${process.env.PATH ?? "/usr/bin:/bin"}`;
      h = await ClusterHarness.start({
        scenario: `lab-kubeadm-${name}`,
        seed: 0,
        nodes: NODES,
        lab,
        etcdTls: false,
        etcdBin: bins.etcd,
        ...(options.policy ? { policy: options.policy } : {}),
        agentCommand: (args) => ({ command: "env", args: [path, process.execPath, join(ROOT, "bin/join-broker"), ...args], cwd: ROOT }),
      });
      const k = await prepareRecipeLab(lab, name, bins, options, false);
      return new BrokeredKubeLab(lab, h, k);
    } catch (e) {
      await h?.cleanup();
      lab.destroy();
      throw e;
    }
  }

  /** The agent's flags: the recipe (or `exec`) as --exec, etcd's client certificate in the host's own /etc/kubernetes (docs/installers.md). */
  agentArgs(node: string, exec = KUBEADM_RECIPE): string[] {
    const { h, lab } = this;
    return joinArgv({
      broker: h.broker.url,
      cluster: h.cluster,
      token: h.token,
      node,
      peerURL: `https://${lab.host(node).ip}:2380`,
      stateDir: h.node(node).stateDir,
      etcd: NODES.map((n) => `https://${lab.host(n).ip}:2379`),
      etcdClient: {
        ca: "/etc/kubernetes/pki/etcd/ca.crt",
        cert: "/etc/kubernetes/pki/apiserver-etcd-client.crt",
        key: "/etc/kubernetes/pki/apiserver-etcd-client.key",
      },
      exec,
      logFormat: "json",
      timeoutSeconds: 600,
    });
  }

  /** Starts (or restarts) the node's agent on its host (network and mount namespace), keeping all it prints. */
  startAgent(node: string, exec?: string): AgentRun {
    const run = this.h.startAgent(node, { args: this.agentArgs(node, exec) });
    run.proc.stderr!.on("data", (chunk: string) => this.stderr.set(node, (this.stderr.get(node) ?? "") + chunk));
    return run;
  }

  /** What kubeadm printed on the node (the agent's stderr less its JSON progress lines). */
  kubeadmOutput(node: string): string {
    return (this.stderr.get(node) ?? "")
      .split("\n")
      .filter((l) => !l.startsWith("{"))
      .join("\n");
  }

  /** The member list from the first node that answers (with its own etcd client certificate). */
  async anyMembers(): Promise<MemberList | null> {
    for (const n of NODES) {
      const l = await this.k.members(n).catch(() => null);
      if (l) return l;
    }
    return null;
  }

  async close(): Promise<void> {
    for (const n of NODES) writeFileSync(join(this.k.out, `agent-${n}.log`), this.stderr.get(n) ?? "");
    this.h.writeTimeline({ lab: this.lab.events });
    await this.h.cleanup();
    await this.k.close();
    this.lab.destroy();
  }
}

/** The member list every 500 ms while a brokered run goes on (from any node that answers). */
export function sampleMembers(b: BrokeredKubeLab): { samples: { clusterId: string; learners: number }[]; stop: () => Promise<void> } {
  const samples: { clusterId: string; learners: number }[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const l = await b.anyMembers();
      if (l) samples.push({ clusterId: l.header.cluster_id, learners: l.members.filter((m) => m.isLearner).length });
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  return { samples, stop: () => ((sampling = false), sampler) };
}

/** The first node admitted to join: its kubelet stand-in holds its etcd back from then on. */
export function holdFirstJoiner(b: BrokeredKubeLab): () => string | null {
  let held: string | null = null;
  b.h.onEvent((run, e) => {
    // By admission, the broker's order: tickets' events reach the test in any order.
    if (held || e.step !== "admitted" || e.role !== "join") return;
    held = run.node.name;
    b.k.kubelets.get(held)!.hold(`etcd-${held}`);
  });
  return () => held;
}
