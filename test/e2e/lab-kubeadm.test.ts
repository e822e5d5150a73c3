/**
 * Unmodified kubeadm and kube-apiserver on lab hosts, their static pods run by the kubelet
 * stand-in (test/lab/kubelet-standin.ts): `kubeadm init` on cp-1, then `kubeadm join
 * --control-plane` on cp-2; etcd ends with two started voters of one cluster and cp-2's own
 * kube-apiserver answers /readyz; concurrent joins and a late etcd without a broker; then five
 * hosts through the broker (`join-broker join --exec` with docs/installers.md's kubeadm recipe),
 * with and without faults, and `npm run demo -- --kubeadm --without-broker`. Skipped unless the
 * lab can run and kubeadm, kube-apiserver and their etcd are already built (`npm test` builds them
 * with `node scripts/kube.mjs list`; this file never does); under CI=true, not built is a failure. What kubeadm printed and each pod's output stay in
 * test-results/lab-kubeadm/.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { beforeAll, expect, it } from "vitest";
import { kubeRequest, readKubeconfig } from "../lab/kube-client.ts";
import { BrokeredKubeLab, holdFirstJoiner, KubeLab, NODES, sampleMembers, startedVoters, type MemberList } from "../lab/kubeadm-lab.ts";
import { kubeadmInit, kubeadmJoin, kubeadmJoinPhase, kubeBinaries, type KubeadmHost, type KubeBinaries, type KubeadmRun } from "../lab/kubeadm.ts";
import { eventually, labSkipReason, type Lab } from "../lab/lab.ts";
import { ROOT } from "../support/broker.ts";
import { overlappingWindows } from "../support/gate.ts";

const labSkip = await labSkipReason();
const found = kubeBinaries();
const skip = labSkip ?? (typeof found === "string" ? found : null);
// `npm test` builds them before the end-to-end tests: under CI=true their absence is a failure.
if (skip && !labSkip && process.env.CI === "true") throw new Error(`CI=true and the kubeadm tests cannot run: ${skip}`);
if (skip && !labSkip) console.warn(`[lab-kubeadm] skipped: ${skip}`);

let bins: KubeBinaries;

beforeAll(() => {
  if (skip) return;
  bins = found as KubeBinaries;
});

// Waits for kubeadm init and join (each a kube-apiserver start-up), cp-2's /readyz, and the
// restarts of its etcd and kube-apiserver.
it.skipIf(skip)(
  "kubeadm init on cp-1, kubeadm join --control-plane on cp-2: two started etcd voters of one cluster, cp-2's API server ready",
  async () => {
    const k = await KubeLab.create("one-join", bins);
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
          const hash =
            mirror.status === 200
              ? (JSON.parse(mirror.body) as { metadata: { annotations: Record<string, string> } }).metadata.annotations["kubernetes.io/config.mirror"]
              : null;
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
// Waits for kubeadm init, then four kubeadm joins retrying their refused adds for up to 2 minutes.
it.skipIf(skip)(
  "four concurrent control-plane joins without a broker: one cluster, one learner at a time, every successful join a started voter",
  async () => {
    const k = await KubeLab.create("four-joins", bins);
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
          if (l)
            samples.push({
              t: Date.now() - started,
              clusterId: l.header.cluster_id,
              members: l.members.length,
              learners: l.members.filter((m) => m.isLearner).length,
              unstarted: l.members.filter((m) => !m.name).length,
            });
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      // -v=5: kubeadm logs its refused adds' retries only at that level.
      const runs = await Promise.all(joiners.map((h) => kubeadmJoin(k.lab, bins, h, "cp-1", { args: ["-v=5"] })));
      sampling = false;
      await sampler;
      runs.forEach((r, i) => {
        k.keep(`kubeadm-join-${joiners[i]!.host}`, r);
      });
      const outcome = runs.map(
        (r, i) =>
          `${joiners[i]!.host}: exit ${r.code} after ${Math.round(r.ms / 100) / 10} s, ${(r.output.match(/too many learner members/g) ?? []).length} "too many learner members"`,
      );
      writeFileSync(
        join(k.out, "outcome.txt"),
        `${outcome.join("\n")}\n\nsamples (ms, members, learners, unstarted):\n${samples.map((s) => `${s.t} ${s.members} ${s.learners} ${s.unstarted}`).join("\n")}\n`,
      );
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
// Waits for two kubeadm joins to fail in kubeadm's 30 s etcd window (the point of it), then the repair.
it.skipIf(skip)(
  "a joiner's etcd started late, without a broker: both joins fail, the unstarted learner stays; kubeadm join phase etcd-join repairs it",
  async () => {
    const k = await KubeLab.create("late-etcd", bins);
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
      console.log(
        `[lab-kubeadm] late etcd: cp-2 exit ${r2.code} after ${r2.ms} ms (${lastLine(r2)}); cp-3 exit ${r3.code} after ${r3.ms} ms (${lastLine(r3)})`,
      );
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

/** Resolves once every node's latest agent has exited 0; throws, saying where each one is, once one exits otherwise. */
async function allJoined(b: BrokeredKubeLab, budgetMs: number): Promise<void> {
  await b.h.waitFor(
    "every node's agent to exit 0",
    () => {
      const failed = NODES.filter((n) => b.h.current(n)?.exit && b.h.current(n)?.exit?.code !== 0);
      if (failed.length) throw new Error(`agents of ${failed.join(", ")} exited before joining\n${b.h.describeAgents()}`);
      return NODES.every((n) => b.h.current(n)?.exit?.code === 0);
    },
    budgetMs,
  );
}

/**
 * The end state every brokered run must reach, faults or not: exactly one `kubeadm init`, on the
 * node the broker made the bootstrap; no kubeadm run that met "too many learner members"; no two
 * nodes' recipes at once; never more than one learner; five started voters of one cluster, no
 * learner, in every member's own view. Writes the outcome to the run's directory.
 */
async function expectBrokeredEndState(
  b: BrokeredKubeLab,
  samples: { clusterId: string; learners: number }[],
  note: string,
  crash?: { run: string; mayMeetLeftover?: string },
): Promise<void> {
  const { h, k } = b;
  const runs = [...h.runs.values()].flat();
  const execs = runs.flatMap((r) => r.events.filter((e) => e.step === "exec").map((e) => `${e.time} ${r.node.name}#${r.run} ${String(e.role)}`)).sort();
  const ends = runs.map((r) => `${r.node.name}#${r.run}: exit ${r.exit?.code ?? r.exit?.signal ?? "none"}; ${r.stdout.trim() || r.events.at(-1)?.msg || ""}`);
  const met = NODES.map((n) => `${n}: ${(b.kubeadmOutput(n).match(/too many learner members/g) ?? []).length} "too many learner members"`);
  const summary = [note, ...ends, "recipe runs:", ...execs, ...met];
  writeFileSync(join(k.out, "outcome.txt"), `${summary.join("\n")}\n`);
  console.log(`[lab-kubeadm] ${k.out.split("/").pop()}:\n${summary.join("\n")}`);

  expect(
    NODES.map((n) => h.current(n)?.exit?.code),
    h.describeAgents(),
  ).toEqual([0, 0, 0, 0, 0]);
  const tooMany = NODES.filter((n) => b.kubeadmOutput(n).includes("too many learner members"));
  expect(
    tooMany.filter((n) => n !== crash?.mayMeetLeftover),
    'kubeadm runs that met "too many learner members"',
  ).toEqual([]);
  const inits = NODES.filter((n) => b.kubeadmOutput(n).includes("[init] Using Kubernetes version"));
  expect(inits).toHaveLength(1);
  expect(execs.filter((e) => e.endsWith(" bootstrap"))).toEqual([expect.stringContaining(` ${inits[0]}#1 bootstrap`)]);
  expect(runs.filter((r) => /^joined cluster \S+ as bootstrap$/m.test(r.stdout)).map((r) => r.node.name)).toEqual(inits);
  expect(Math.max(...samples.map((s) => s.learners))).toBeLessThanOrEqual(1);
  // From its `exec` to its `complete` (or its exit), no two nodes' recipes ran at once. A run
  // killed with its recipe ends there, which the windows cannot tell (they let a killed agent's
  // recipe run on until the node's next agent): the test checks that one itself.
  expect(
    overlappingWindows(h).filter((pair) => !crash || !pair.split(" and ").includes(crash.run)),
    "recipes that ran at the same time",
  ).toEqual([]);
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
}

/** The pids of `kubeadm join` processes running on the host (in its network namespace). */
function kubeadmJoinPids(lab: Lab, host: string): number[] {
  const ns = statSync(`/run/netns/${lab.host(host).ns}`).ino;
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        return basename(argv[0] ?? "") === "kubeadm" && argv[1] === "join" && statSync(`/proc/${pid}/ns/net`).ino === ns;
      } catch {
        return false; // exited meanwhile
      }
    })
    .map(Number);
}

/**
 * The brokered scenario, through the real kubeadm: five hosts each run `join-broker join --exec`
 * with docs/installers.md's kubeadm recipe, all started at once; the broker picks one to run
 * `kubeadm init` and admits the others one by one to `kubeadm join --control-plane`. The first
 * joiner's etcd is held back 20 s (a slow image pull): without the broker the joins started
 * meanwhile meet its learner ("too many learner members"); with it, no two nodes run the recipe at
 * once. Every agent exits 0 and etcd ends with five started voters.
 */
// Waits for five kubeadm runs one at a time (each a kube-apiserver start-up) and the held etcd's 20 s.
it.skipIf(skip)(
  "five hosts through the broker with the kubeadm recipe, one joiner's etcd late: one kubeadm init, five started voters, never too many learners",
  async () => {
    const started = Date.now();
    const b = await BrokeredKubeLab.create("brokered", bins);
    try {
      const HOLD_MS = 20_000;
      const held = holdFirstJoiner(b);
      const sampler = sampleMembers(b);
      const setUpMs = Date.now() - started;
      for (const n of NODES) b.startAgent(n);
      // The held node's learner is added, then nothing else happens until its etcd runs.
      await b.h.waitFor(
        "a joiner's learner, its etcd held",
        async () => !!held() && (await b.anyMembers())?.members.some((m) => m.isLearner && !m.name) === true,
        240_000,
      );
      await new Promise((r) => setTimeout(r, HOLD_MS));
      b.k.kubelets.get(held()!)!.release(`etcd-${held()}`);
      await allJoined(b, 360_000);
      await sampler.stop();
      await expectBrokeredEndState(
        b,
        sampler.samples,
        `set-up ${Math.round(setUpMs / 1000)} s, agents ${Math.round((Date.now() - started - setUpMs) / 1000)} s; held ${held()}`,
      );
    } finally {
      await b.close();
    }
  },
  600_000,
);

/**
 * Faults in the brokered scenario: the first joiner's `kubeadm join` is killed (SIGKILL) while it
 * waits for its learner to start (its etcd held). The recipe's `kubeadm reset -f` cleans up, the
 * agent removes what is left, gives up its ticket and exits 4; started again (as
 * `Restart=on-failure` would), it queues at the back and joins. Then another joiner's agent and
 * its kubeadm are both killed mid-join (a crash) and the agent starts again only once its lease
 * has ended and the broker admitted the next node: it removes its leftover learner first, and
 * joins after the others. The same end state as without faults.
 */
// Waits for five kubeadm runs one at a time, the killed agent's lease to end and its restart.
it.skipIf(skip)(
  "faults through the broker: a kubeadm join killed mid-way, an agent and its kubeadm killed and restarted after the lease: the same end state",
  async () => {
    const started = Date.now();
    const b = await BrokeredKubeLab.create("brokered-faults", bins, { policy: { leaseSeconds: 20 } });
    try {
      const { h, k } = b;
      const held = holdFirstJoiner(b);
      // The joiner admitted after the held one: its etcd held too, from its admission on.
      let second = "";
      h.onEvent((run, e) => {
        if (second || !held() || run.node.name === held() || e.step !== "admitted" || e.role !== "join") return;
        second = run.node.name;
        k.kubelets.get(second)!.hold(`etcd-${second}`);
      });
      const sampler = sampleMembers(b);
      for (const n of NODES) b.startAgent(n);

      // 1. The held joiner's kubeadm killed while it waits for its learner to start.
      await h.waitFor("the held joiner's learner", () => !!held() && !!h.current(held()!)?.events.some((e) => e.step === "member-added"), 240_000);
      const first = held()!;
      const pids = kubeadmJoinPids(b.lab, first);
      expect(pids, `kubeadm join on ${first}`).toHaveLength(1);
      process.kill(pids[0]!, "SIGKILL");
      h.timeline.add("sigkill", first, { what: "kubeadm join", pid: pids[0] });
      const failed = await h.current(first)!.exited;
      expect(failed.code, h.describeAgents()).toBe(4);
      k.kubelets.get(first)!.release(`etcd-${first}`);
      b.startAgent(first);

      // 2. The next joiner crashes mid-join: its etcd held from its admission (a crash before
      // etcd ran), its agent and the recipe's whole process group killed once its learner is added.
      await h.waitFor("a second joiner's learner", () => !!second && !!h.current(second)?.events.some((e) => e.step === "member-added"), 240_000);
      expect(
        k.kubelets
          .get(second)!
          .pods()
          .find((p) => p.name === `etcd-${second}`)?.pid ?? null,
        `${second}'s etcd never ran`,
      ).toBeNull();
      const crashed = await h.kill(second, "group");
      const recipe = JSON.parse(readFileSync(join(h.node(second).stateDir, "exec.json"), "utf8")) as { pgid: number };
      process.kill(-recipe.pgid, "SIGKILL");
      h.timeline.add("sigkill", second, { what: "the recipe's process group", pgid: recipe.pgid });
      const crashedAt = Date.parse(crashed.events.at(-1)!.time);
      // What the killed kubeadm wrote, read from disk: the stand-in may not have scanned it yet, and
      // releasing etcd on that stale manifest would start the removed member on this node's data dir.
      const staleManifest = k.kubelets.get(second)!.manifestOnDisk("etcd.yaml");
      // Its lease ends and the broker admits the node behind it; then the node starts again.
      await h.waitFor(
        "the broker to admit another node once the lease ended",
        () => NODES.some((n) => n !== second && h.current(n)?.events.some((e) => e.step === "exec" && Date.parse(e.time) > crashedAt)),
        120_000,
      );
      b.startAgent(second);
      // Its etcd runs once the new attempt's kubeadm wrote a new manifest (the stale one names a member the agent removed).
      await h.waitFor(
        "a new etcd manifest on the restarted node",
        () =>
          k.kubelets
            .get(second)!
            .pods()
            .some((p) => p.name === `etcd-${second}` && p.hash !== staleManifest),
        300_000,
      );
      k.kubelets.get(second)!.release(`etcd-${second}`);

      await allJoined(b, 420_000);
      await sampler.stop();
      expect(h.runs.get(first)!.map((r) => r.exit?.code)).toEqual([4, 0]);
      expect(h.runs.get(second)!.map((r) => r.exit?.signal ?? r.exit?.code)).toEqual(["SIGKILL", 0]);
      // The node admitted when the lease ended may meet the crashed node's learner until that
      // node's agent, started again, has removed it (docs/installers.md); no other run may.
      const admittedAfter = NODES.find((n) => n !== second && h.current(n)?.events.some((e) => e.step === "exec" && Date.parse(e.time) > crashedAt));
      // No recipe started between the crashed one's start and the crash.
      const crashedExec = Date.parse(crashed.events.find((e) => e.step === "exec")!.time);
      const between = [...h.runs.values()]
        .flat()
        .flatMap((r) =>
          r.events.filter((e) => e.step === "exec" && Date.parse(e.time) > crashedExec && Date.parse(e.time) <= crashedAt).map(() => `${r.node.name}#${r.run}`),
        );
      expect(between, "recipes started while the crashed node's ran").toEqual([]);
      const note = `faults: ${first}'s kubeadm join killed; ${second}'s agent and recipe killed, ${admittedAfter} admitted after its lease; ${Math.round((Date.now() - started) / 1000)} s`;
      await expectBrokeredEndState(b, sampler.samples, note, { run: `${second}#1`, ...(admittedAfter ? { mayMeetLeftover: admittedAfter } : {}) });
    } finally {
      await b.close();
    }
  },
  900_000,
);

/**
 * `npm run demo -- --kubeadm --without-broker`: kubeadm alone, four joins at once with one late
 * etcd, each failing with kubeadm's own error and the learner left; again with --max-learners 2
 * (what it reports); then the brokered run, every node a voter. Checked on what it prints.
 */
// Waits for the demo's three rounds: two without the broker (kubeadm's 30 s etcd window each), one with.
it.skipIf(skip)(
  "npm run demo -- --kubeadm --without-broker: the joins without the broker fail with kubeadm's error and leave a learner; with it, five voters",
  async () => {
    const demo = spawn(process.execPath, [join(ROOT, "scripts/demo.mjs"), "--kubeadm", "--without-broker"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    let out = "";
    demo.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    demo.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((ok) => demo.once("close", ok));
    writeFileSync(join(ROOT, "test-results/lab-kubeadm/demo-output.txt"), out);
    expect(code, out.slice(-3000)).toBe(0);
    expect(out).toMatch(/^\[ *[\d.]+ s\] cp-2: kubeadm join exited 1 after [\d.]+ s: error: .*the etcd member [0-9a-f]+ is not started$/m);
    // Each refused by etcd's learner limit: kubeadm's last error says so, or, when its 30 s ran out
    // during a retry (a busy machine), another error of that retry (its context deadline, etcd's
    // "request timed out"), with the learner-limit refusals it met before counted.
    expect(
      out.match(
        /^\[ *[\d.]+ s\] cp-[345]: kubeadm join exited 1 .*(?:too many learner members in cluster|\([1-9]\d* adds refused: too many learner members\))/gm,
      ),
      out,
    ).toHaveLength(3);
    expect(out).toContain("Without the broker: 4 of 4 joins failed; 1 learner left in etcd (2 members).");
    // The second round (--max-learners 2) reports; whether two adds land close enough for #2005 is a race.
    expect(out).toMatch(/^\[ *[\d.]+ s\] kubeadm init on cp-1, etcd with --max-learners 2…$/m);
    expect(out).toMatch(
      /^Without the broker, --max-learners 2: [0-4] of 4 joins failed; [0-4] etcd exited with "member count is unequal"; [0-4] learner\(s\) left in etcd \([1-5] members\)\.$/m,
    );
    expect(out).toMatch(/^\[ *[\d.]+ s\] {3}[0-9a-f]+ \(never started\) learner https:\/\/[\d.]+:2380$/m);
    expect(out).toMatch(/^\[ *[\d.]+ s\] cp-\d: admitted, running the recipe as bootstrap \(kubeadm init\)$/m);
    expect(out).toContain("With the broker: all 5 nodes started voters, no learner left, no kubeadm run refused a learner (0).");
  },
  600_000,
);
