/**
 * Unmodified kubeadm and kube-apiserver on lab hosts, their static pods run by the kubelet
 * stand-in (test/lab/kubelet-standin.ts): `kubeadm init` on cp-1, then `kubeadm join
 * --control-plane` on cp-2; etcd ends with two started voters of one cluster and cp-2's own
 * kube-apiserver answers /readyz. Skipped unless the lab can run and kubeadm, kube-apiserver and
 * their etcd are already built (`node scripts/kube.mjs list` builds them; this file never does).
 * What kubeadm printed and each pod's output stay in test-results/lab-kubeadm/.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { beforeAll, expect, it } from "vitest";
import { kubeRequest, readKubeconfig, type KubeCredentials } from "../lab/kube-client.ts";
import {
  clusterCa,
  KUBEADM_RECIPE,
  kubeadmInit,
  kubeadmJoin,
  kubeadmJoinPhase,
  kubeBinaries,
  prepareKubeHost,
  prepareRecipeHost,
  type KubeadmHost,
  type KubeBinaries,
  type KubeadmRun,
} from "../lab/kubeadm.ts";
import { KubeletStandIn } from "../lab/kubelet-standin.ts";
import { Lab, labSkipReason } from "../lab/lab.ts";
import { ROOT } from "../support/broker.ts";
import { ClusterHarness, type AgentRun } from "../support/cluster.ts";
import { overlappingWindows } from "../support/gate.ts";

const labSkip = await labSkipReason();
const found = kubeBinaries();
const skip = labSkip ?? (typeof found === "string" ? found : null);
if (skip && !labSkip) console.warn(`[lab-kubeadm] skipped: ${skip}`);

const OUT = resolve(import.meta.dirname, "../../test-results/lab-kubeadm");
let bins: KubeBinaries;

/** One lab with a kubelet stand-in per host; the first host added is the control-plane endpoint. */
class KubeLab {
  readonly kubelets = new Map<string, KubeletStandIn>();
  readonly hosts = new Map<string, KubeadmHost>();
  private constructor(
    readonly lab: Lab,
    readonly out: string,
    /** `host:port` of the control plane; the first host's address when not given. */
    readonly endpoint: string | null,
    /** Whether `close()` destroys the lab (not when a harness runs in it: it is cleaned up first). */
    readonly ownsLab: boolean,
  ) {}

  static async create(name: string, over?: { lab: Lab; endpoint: string }): Promise<KubeLab> {
    const out = join(OUT, name);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    return over ? new KubeLab(over.lab, out, over.endpoint, false) : new KubeLab(await Lab.create(), out, null, true);
  }

  /** A kubeadm host with a kubelet stand-in: the lab's host of that name, added when there is none. */
  add(name: string): KubeadmHost {
    const { lab } = this;
    const h = lab.hosts.get(name) ?? lab.addHost(name);
    prepareKubeHost(lab, name);
    const first = this.hosts.values().next().value?.address ?? h.ip;
    const kh: KubeadmHost = { host: name, nodeName: name, address: h.ip, controlPlaneEndpoint: this.endpoint ?? `${first}:6443` };
    this.hosts.set(name, kh);
    const binaries = { etcd: bins.etcd, "kube-apiserver": bins.kubeApiserver };
    const onEvent = (line: string) => writeFileSync(join(this.out, "kubelet-standin.log"), `${new Date().toISOString()} ${line}\n`, { flag: "a" });
    this.kubelets.set(name, new KubeletStandIn({ lab, host: name, nodeName: name, binaries, logDir: this.out, onEvent }));
    return kh;
  }

  keep(name: string, run: KubeadmRun): void {
    writeFileSync(join(this.out, `${name}.log`), `exit ${run.code} after ${run.ms} ms\n${run.output}`);
  }

  /** The API server's client certificate for etcd on `host`, aimed at `host`'s etcd. */
  etcdCredentials(host: string): KubeCredentials {
    const pki = join(this.lab.host(host).mounts.get("/etc/kubernetes")!, "pki");
    const read = (f: string) => readFileSync(join(pki, f));
    return { server: `https://${this.lab.host(host).ip}:2379`, ca: read("etcd/ca.crt"), cert: read("apiserver-etcd-client.crt"), key: read("apiserver-etcd-client.key") };
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

/** Waits for what is eventually true; the last value and problem go into the error. */
async function eventually<T>(what: string, attempt: () => Promise<T | null>, budgetMs: number): Promise<T> {
  const deadline = Date.now() + budgetMs;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await attempt();
      if (v !== null) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${budgetMs / 1000} s (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

interface MemberList {
  header: { cluster_id: string };
  members: { ID: string; name?: string; clientURLs?: string[]; isLearner?: boolean }[];
}

beforeAll(() => {
  if (skip) return;
  bins = found as KubeBinaries;
});

/** Started (named, with client URLs) voters in `list`. */
const startedVoters = (list: MemberList) => list.members.filter((m) => m.name && m.clientURLs?.length && !m.isLearner);

it.skipIf(skip)(
  "kubeadm init on cp-1, kubeadm join --control-plane on cp-2: two started etcd voters of one cluster, cp-2's API server ready",
  async () => {
    const k = await KubeLab.create("one-join");
    try {
      const cp1 = k.add("cp-1");
      const cp2 = k.add("cp-2");

      const init = await kubeadmInit(k.lab, bins, cp1);
      k.keep("kubeadm-init-cp-1", init);
      expect(init.code, init.output).toBe(0);
      console.log(`[lab-kubeadm] kubeadm init on cp-1: ${init.ms} ms`);

      const joined = await kubeadmJoin(k.lab, bins, cp2, "cp-1");
      k.keep("kubeadm-join-cp-2", joined);
      expect(joined.code, joined.output).toBe(0);
      console.log(`[lab-kubeadm] kubeadm join --control-plane on cp-2: ${joined.ms} ms`);

      // Every member's own view: both started, both voters, one cluster.
      const views = await eventually(
        "two started voters of one cluster in both members' views",
        async () => {
          const lists = await Promise.all(["cp-1", "cp-2"].map((h) => k.members(h)));
          return lists.every((l) => l && l.members.length === 2 && startedVoters(l).length === 2) ? (lists as MemberList[]) : null;
        },
        60_000,
      );
      expect(new Set(views.map((l) => l.header.cluster_id)).size).toBe(1);
      expect(views[0]!.members.map((m) => m.name).sort()).toEqual(["cp-1", "cp-2"]);

      // cp-2's own API server (on its own etcd member), with cp-2's admin certificate.
      const admin2 = { ...readKubeconfig(join(k.lab.host("cp-2").mounts.get("/etc/kubernetes")!, "admin.conf")), server: `https://${cp2.address}:6443` };
      const ready = await eventually(
        "cp-2's kube-apiserver /readyz",
        async () => {
          const r = await kubeRequest(k.lab, admin2, "GET", "/readyz");
          return r.status === 200 ? r.body : null;
        },
        120_000,
      );
      expect(ready).toBe("ok");

      // The mirror pods the join found etcd by: one per node, labelled as kubeadm looks for them.
      const pods = await kubeRequest(k.lab, admin2, "GET", "/api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd,tier%3Dcontrol-plane");
      const items = (JSON.parse(pods.body) as { items: { metadata: { name: string; annotations: Record<string, string> } }[] }).items;
      expect(items.map((p) => p.metadata.name).sort()).toEqual(["etcd-cp-1", "etcd-cp-2"]);
      expect(items.every((p) => p.metadata.annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"])).toBe(true);

      // The stand-in as a kubelet: cp-2's etcd killed is started again and rejoins as the same voter.
      const kubelet2 = k.kubelets.get("cp-2")!;
      const pod = (name: string) => kubelet2.pods().find((p) => p.name === name);
      const killed = pod("etcd-cp-2")!.pid!;
      process.kill(-killed, "SIGKILL");
      await eventually(
        "cp-2's etcd started again, both voters started",
        async () => {
          const again = pod("etcd-cp-2")?.pid;
          const l = again && again !== killed ? await k.members("cp-2") : null;
          return l && startedVoters(l).length === 2 ? l : null;
        },
        60_000,
      );
      // A changed manifest replaces its process and its mirror pod (the hash is the mirror annotation).
      const manifest = join(k.lab.host("cp-2").mounts.get("/etc/kubernetes")!, "manifests", "kube-apiserver.yaml");
      const before = pod("kube-apiserver-cp-2")!;
      const original = readFileSync(manifest, "utf8");
      const changed = original.replace(/^(\s+)- kube-apiserver\n/m, "$1- kube-apiserver\n$1- --v=1\n");
      expect(changed).not.toBe(original);
      writeFileSync(manifest, changed);
      const after = await eventually(
        "cp-2's kube-apiserver replaced, its mirror pod too, /readyz again",
        async () => {
          const p = pod("kube-apiserver-cp-2");
          if (!p || p.hash === before.hash || !p.pid || p.pid === before.pid) return null;
          const mirror = await kubeRequest(k.lab, admin2, "GET", "/api/v1/namespaces/kube-system/pods/kube-apiserver-cp-2");
          const hash = mirror.status === 200 ? (JSON.parse(mirror.body) as { metadata: { annotations: Record<string, string> } }).metadata.annotations["kubernetes.io/config.mirror"] : null;
          const r = await kubeRequest(k.lab, admin2, "GET", "/readyz");
          return hash === p.hash && r.status === 200 ? p : null;
        },
        120_000,
      );
      expect(after.hash).not.toBe(before.hash);
    } finally {
      await k.close();
    }
  },
  420_000,
);

/**
 * Four `kubeadm join --control-plane` at once, without a broker: etcd takes one learner at a
 * time, and each kubeadm retries its refused add (every 500 ms, up to 2 minutes). What must hold
 * whatever the timing: one cluster, never more than one learner, and every join that says it
 * succeeded is a started voter. What kubeadm printed goes to test-results/lab-kubeadm/four-joins/.
 */
it.skipIf(skip)(
  "four concurrent control-plane joins without a broker: one cluster, one learner at a time, every successful join a started voter",
  async () => {
    const k = await KubeLab.create("four-joins");
    try {
      const cp1 = k.add("cp-1");
      const joiners = ["cp-2", "cp-3", "cp-4", "cp-5"].map((n) => k.add(n));
      const init = await kubeadmInit(k.lab, bins, cp1);
      k.keep("kubeadm-init-cp-1", init);
      expect(init.code, init.output).toBe(0);

      // A sample of cp-1's member list every 500 ms while the joins run.
      const samples: { t: number; clusterId: string; members: number; learners: number; unstarted: number }[] = [];
      const started = Date.now();
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const l = await k.members("cp-1");
          if (l) samples.push({ t: Date.now() - started, clusterId: l.header.cluster_id, members: l.members.length, learners: l.members.filter((m) => m.isLearner).length, unstarted: l.members.filter((m) => !m.name).length });
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      // -v=5: kubeadm logs its refused adds' retries only at that level.
      const runs = await Promise.all(joiners.map((h) => kubeadmJoin(k.lab, bins, h, "cp-1", { args: ["-v=5"] })));
      sampling = false;
      await sampler;
      runs.forEach((r, i) => k.keep(`kubeadm-join-${joiners[i]!.host}`, r));
      const outcome = runs.map((r, i) => `${joiners[i]!.host}: exit ${r.code} after ${Math.round(r.ms / 100) / 10} s, ${(r.output.match(/too many learner members/g) ?? []).length} "too many learner members"`);
      writeFileSync(join(k.out, "outcome.txt"), `${outcome.join("\n")}\n\nsamples (ms, members, learners, unstarted):\n${samples.map((s) => `${s.t} ${s.members} ${s.learners} ${s.unstarted}`).join("\n")}\n`);
      console.log(`[lab-kubeadm] four concurrent joins:\n${outcome.join("\n")}`);

      expect(new Set(samples.map((s) => s.clusterId)).size).toBe(1);
      expect(Math.max(...samples.map((s) => s.learners))).toBeLessThanOrEqual(1);
      const succeeded = joiners.filter((_, i) => runs[i]!.code === 0).map((h) => h.nodeName);
      const final = await eventually(
        "every successful join a started voter",
        async () => {
          const l = await k.members("cp-1");
          const voters = l ? startedVoters(l).map((m) => m.name) : [];
          return l && ["cp-1", ...succeeded].every((n) => voters.includes(n)) ? l : null;
        },
        60_000,
      );
      expect(final.header.cluster_id).toBe(samples[0]!.clusterId);
    } finally {
      await k.close();
    }
  },
  600_000,
);

/**
 * The failure the broker is for, without one: the first joiner's etcd starts late (its kubelet
 * holds it), past kubeadm's etcd window (`timeouts.etcdAPICall`: 30 s here instead of kubeadm's
 * 2 minutes, to keep the test short). kubeadm rolls nothing back: its learner stays, unstarted,
 * and the next join, started meanwhile, fails too. Running `kubeadm join phase etcd-join` again on
 * the first joiner once its etcd runs promotes it, and the next join then succeeds.
 */
it.skipIf(skip)(
  "a joiner's etcd started late, without a broker: both joins fail, the unstarted learner stays; kubeadm join phase etcd-join repairs it",
  async () => {
    const k = await KubeLab.create("late-etcd");
    try {
      const [cp1, cp2, cp3] = ["cp-1", "cp-2", "cp-3"].map((n) => k.add(n)) as [KubeadmHost, KubeadmHost, KubeadmHost];
      const init = await kubeadmInit(k.lab, bins, cp1);
      k.keep("kubeadm-init-cp-1", init);
      expect(init.code, init.output).toBe(0);

      const window = { etcdAPICall: "30s", args: ["-v=5"] };
      k.kubelets.get("cp-2")!.hold("etcd-cp-2");
      const join2 = kubeadmJoin(k.lab, bins, cp2, "cp-1", window);
      await eventually("cp-2's learner in the member list", async () => ((await k.members("cp-1"))?.members.some((m) => m.isLearner) ? true : null), 120_000);
      const join3 = kubeadmJoin(k.lab, bins, cp3, "cp-1", window);
      const [r2, r3] = await Promise.all([join2, join3]);
      k.keep("kubeadm-join-cp-2", r2);
      k.keep("kubeadm-join-cp-3", r3);
      const lastLine = (r: KubeadmRun) => /^error: .*$/m.exec(r.output)?.[0] ?? "no error line";
      console.log(`[lab-kubeadm] late etcd: cp-2 exit ${r2.code} after ${r2.ms} ms (${lastLine(r2)}); cp-3 exit ${r3.code} after ${r3.ms} ms (${lastLine(r3)})`);
      expect(r2.code).not.toBe(0);
      expect(r3.code).not.toBe(0);

      // Left behind: cp-2's learner, never started; cp-3 no member.
      const left = (await k.members("cp-1"))!;
      expect(left.members).toHaveLength(2);
      const learner = left.members.find((m) => m.isLearner)!;
      expect(learner.name ?? "").toBe("");
      expect(left.members.some((m) => (m as { peerURLs?: string[] }).peerURLs?.some((u) => u.includes(cp3.address)))).toBe(false);

      // The repair: cp-2's etcd starts, and the etcd phase run again promotes it.
      k.kubelets.get("cp-2")!.release("etcd-cp-2");
      const repair = await kubeadmJoinPhase(k.lab, bins, "cp-2", "etcd-join", ["-v=5"]);
      k.keep("kubeadm-join-phase-etcd-join-cp-2", repair);
      expect(repair.code, repair.output).toBe(0);
      const again3 = await kubeadmJoin(k.lab, bins, cp3, "cp-1", { args: ["-v=5"] });
      k.keep("kubeadm-join-cp-3-again", again3);
      expect(again3.code, again3.output).toBe(0);
      console.log(`[lab-kubeadm] late etcd: etcd-join phase again on cp-2 ${repair.ms} ms, cp-3's join again ${again3.ms} ms`);
      const final = await eventually(
        "three started voters of one cluster",
        async () => {
          const l = await k.members("cp-1");
          return l && l.members.length === 3 && startedVoters(l).length === 3 ? l : null;
        },
        60_000,
      );
      expect(final.header.cluster_id).toBe(left.header.cluster_id);
    } finally {
      await k.close();
    }
  },
  600_000,
);

const BALANCER = resolve(import.meta.dirname, "../lab/balancer.mjs");
const NODES = ["cp-1", "cp-2", "cp-3", "cp-4", "cp-5"];

/**
 * The brokered scenario's lab: `join-broker serve` on host `broker` (the harness's), five
 * kubeadm hosts each with a kubelet stand-in, the recipe's files and the cluster's CA (made
 * before any node: the broker, not the test, picks the node that runs `kubeadm init`), and a
 * load balancer on host `lb` as every node's `controlPlaneEndpoint`.
 */
class BrokeredKubeLab {
  /** Everything each node's agents printed on stderr (their JSON progress and kubeadm's output), all runs. */
  readonly stderr = new Map<string, string>();

  private constructor(
    readonly lab: Lab,
    readonly h: ClusterHarness,
    readonly k: KubeLab,
  ) {}

  static async create(name: string): Promise<BrokeredKubeLab> {
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
        agentCommand: (args) => ({ command: "env", args: [path, process.execPath, join(ROOT, "bin/join-broker"), ...args], cwd: ROOT }),
      });
      const lb = lab.addHost("lb");
      const balancer = lab.spawn("lb", process.execPath, [BALANCER, "6443", NODES.map((n) => `${lab.host(n).ip}:6443`).join(",")], { stdio: ["ignore", "pipe", "inherit"] });
      await new Promise<void>((ok, fail) => {
        const timer = setTimeout(() => fail(new Error("the balancer did not start within 30 s")), 30_000);
        balancer.stdout!.once("data", () => (clearTimeout(timer), ok()));
        balancer.once("exit", (code) => (clearTimeout(timer), fail(new Error(`the balancer exited with ${code}`))));
      });
      const k = await KubeLab.create(name, { lab, endpoint: `${lb.ip}:6443` });
      const hosts = NODES.map((n) => k.add(n));
      const ca = await clusterCa(lab, bins, NODES[0]!);
      for (const kh of hosts) prepareRecipeHost(lab, kh, ca);
      return new BrokeredKubeLab(lab, h, k);
    } catch (e) {
      await h?.cleanup();
      lab.destroy();
      throw e;
    }
  }

  /** The agent's flags: the recipe as --exec, etcd's client certificate in the host's own /etc/kubernetes (docs/installers.md). */
  agentArgs(node: string): string[] {
    const { h, lab } = this;
    return [
      "join", "--broker", h.broker.url, "--cluster", h.cluster, "--token", h.token,
      "--node", node, "--peer-url", `https://${lab.host(node).ip}:2380`,
      "--state-dir", h.node(node).stateDir,
      "--etcd", NODES.map((n) => `https://${lab.host(n).ip}:2379`).join(","),
      "--etcd-cacert", "/etc/kubernetes/pki/etcd/ca.crt",
      "--etcd-cert", "/etc/kubernetes/pki/apiserver-etcd-client.crt",
      "--etcd-key", "/etc/kubernetes/pki/apiserver-etcd-client.key",
      "--exec", KUBEADM_RECIPE,
      "--log-format", "json",
      "--timeout", "600",
    ];
  }

  /** Starts (or restarts) the node's agent on its host (network and mount namespace), keeping all it prints. */
  startAgent(node: string): AgentRun {
    const run = this.h.startAgent(node, { args: this.agentArgs(node) });
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

/**
 * The brokered scenario, through the real kubeadm: five hosts each run `join-broker join --exec`
 * with docs/installers.md's kubeadm recipe, all started at once; the broker picks one to run
 * `kubeadm init` and admits the others one by one to `kubeadm join --control-plane`. The first
 * joiner's etcd is held back 20 s (a slow image pull): without the broker the joins started
 * meanwhile meet its learner ("too many learner members"); with it, no two nodes run the recipe at
 * once. Every agent exits 0 and etcd ends with five started voters.
 */
it.skipIf(skip)(
  "five hosts through the broker with the kubeadm recipe, one joiner's etcd late: one kubeadm init, five started voters, never too many learners",
  async () => {
    const started = Date.now();
    const b = await BrokeredKubeLab.create("brokered");
    try {
      const { h, k } = b;
      const HOLD_MS = 20_000;
      // The first node given a join ticket: its kubelet holds its etcd back.
      let held: string | null = null;
      h.onEvent((run, e) => {
        if (held || e.step !== "ticket" || e.role !== "join") return;
        held = run.node.name;
        k.kubelets.get(held)!.hold(`etcd-${held}`);
      });
      const samples: { clusterId: string; learners: number }[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const l = await b.anyMembers();
          if (l) samples.push({ clusterId: l.header.cluster_id, learners: l.members.filter((m) => m.isLearner).length });
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      const setUpMs = Date.now() - started;
      const runs = NODES.map((n) => b.startAgent(n));

      // The held node's learner is added, then nothing else happens until its etcd runs.
      await h.waitFor("a joiner's learner, its etcd held", async () => !!held && (await b.anyMembers())?.members.some((m) => m.isLearner && !m.name) === true, 240_000);
      const heldAt = Date.now();
      await new Promise((r) => setTimeout(r, HOLD_MS - (Date.now() - heldAt)));
      k.kubelets.get(held!)!.release(`etcd-${held}`);

      const exits = await Promise.race([
        Promise.all(runs.map((r) => r.exited)),
        new Promise<never>((_, fail) => setTimeout(() => fail(new Error(`not every agent exited within 360 s\n${h.describeAgents()}`)), 360_000)),
      ]);
      sampling = false;
      await sampler;
      const tooMany = NODES.filter((n) => b.kubeadmOutput(n).includes("too many learner members"));
      const execs = runs.flatMap((r) => r.events.filter((e) => e.step === "exec").map((e) => `${r.node.name} ${String(e.role)} ${e.time}`));
      const summary = [
        `set-up ${Math.round(setUpMs / 1000)} s, agents ${Math.round((Date.now() - started - setUpMs) / 1000)} s; held ${held}`,
        ...NODES.map((n, i) => `${n}: exit ${exits[i]!.code ?? exits[i]!.signal}; ${runs[i]!.stdout.trim()}`),
        ...execs,
      ];
      writeFileSync(join(k.out, "outcome.txt"), `${summary.join("\n")}\n`);
      console.log(`[lab-kubeadm] brokered:\n${summary.join("\n")}`);

      expect(exits.map((x) => x.code), h.describeAgents()).toEqual([0, 0, 0, 0, 0]);
      expect(tooMany, 'kubeadm runs that met "too many learner members"').toEqual([]);
      const inits = NODES.filter((n) => b.kubeadmOutput(n).includes("[init] Using Kubernetes version"));
      expect(inits).toHaveLength(1);
      expect(execs.filter((e) => e.includes(" bootstrap "))).toEqual([expect.stringMatching(new RegExp(`^${inits[0]} bootstrap `))]);
      expect(runs.filter((r) => /^joined cluster \S+ as bootstrap$/m.test(r.stdout)).map((r) => r.node.name)).toEqual(inits);
      expect(Math.max(...samples.map((s) => s.learners))).toBeLessThanOrEqual(1);
      // From its `exec` to its `complete` (or its exit), no two nodes' recipes ran at once.
      expect(overlappingWindows(h), "recipes that ran at the same time").toEqual([]);
      // From its `exec` to its `complete` (or its exit), no two nodes' recipes ran at once.
      expect(overlappingWindows(h), "recipes that ran at the same time").toEqual([]);

      const views = await eventually(
        "five started voters, no learner, in every member's own view",
        async () => {
          const lists = await Promise.all(NODES.map((n) => k.members(n).catch(() => null)));
          return lists.every((l) => l && l.members.length === 5 && startedVoters(l).length === 5) ? (lists as MemberList[]) : null;
        },
        120_000,
      );
      expect(new Set([...views.map((l) => l.header.cluster_id), ...samples.map((s) => s.clusterId)]).size).toBe(1);
      expect(views[0]!.members.map((m) => m.name).sort()).toEqual(NODES);
    } finally {
      await b.close();
    }
  },
  600_000,
);
