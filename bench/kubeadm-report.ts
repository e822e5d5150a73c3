/**
 * BENCHMARKS.md's section 8, kubeadm through the gate (bench/kubeadm-gate.ts), and its rows in
 * the summary table.
 * @module
 */
import type { KubeadmArm, KubeadmArmRun, KubeadmGateResult } from "./kubeadm-gate.ts";
import type { Results } from "./results.ts";
import { labSectionHead, n, nodeSpans, passedRounds, ratioCells, table, yes } from "./support/format.ts";
import { median } from "./support/stats.ts";

export const KUBEADM_TARGETS = {
  /** The pipelined gate (arm E, else the start rule C) over the serial script. */
  startRuleRatio: 0.6,
  /** The serialized gate (maxInFlight 1) over the serial script. */
  serializedRatio: 1.1,
};

const LABEL: Record<KubeadmArm, string> = {
  serial: "A. serial script",
  serialized: "B. gate, maxInFlight 1",
  "start-rule": "C. gate, start rule, maxInFlight",
  prepared: "D. phases before etcd outside the gate, start rule, maxInFlight",
  pipelined: "E. as D, check-etcd left to etcd, start rule, maxInFlight",
};
const label = (k: KubeadmGateResult, arm: KubeadmArm) =>
  arm === "start-rule" || arm === "prepared" || arm === "pipelined" ? `${LABEL[arm]} ${k.maxInFlight}` : LABEL[arm];

/** The arm the pipelined target is judged on: E when it ran, else C. */
function pipelinedArm(k: KubeadmGateResult): "pipelined" | "start-rule" {
  return k.summary.medians.pipelined !== undefined && k.runs.some((x) => x.arm === "pipelined") ? "pipelined" : "start-rule";
}

export function kubeadmSummaryRows(r: Results): string[][] {
  const k = r.kubeadm;
  if (!k)
    return [
      [
        "8",
        "kubeadm through the gate",
        r.skipped?.kubeadm ? "skipped" : "not measured",
        "",
        "",
        `≤ ${KUBEADM_TARGETS.startRuleRatio}×; ≤ ${KUBEADM_TARGETS.serializedRatio}×`,
        "",
      ],
    ];
  const m = k.summary.medians;
  const s = (v: number | null | undefined) => (v === null || v === undefined ? "failed" : `${n(v, 1)} s`);
  const met = (ratio: number | null | undefined, target: number) => (ratio === null || ratio === undefined ? "–" : yes(ratio <= target));
  const judged = pipelinedArm(k);
  const ratioOf = (arm: KubeadmArm) =>
    ({
      serial: 1,
      serialized: k.summary.serializedRatio,
      "start-rule": k.summary.startRuleRatio,
      prepared: k.summary.preparedRatio ?? null,
      pipelined: k.summary.pipelinedRatio ?? null,
    })[arm];
  const row = (arm: KubeadmArm, what: string, target: number | null): string[] => [
    "8",
    `kubeadm ${k.kubernetes}, 1 + 4, ${what}`,
    s(m[arm]),
    `serial script ${s(m.serial)}`,
    n(ratioOf(arm), 2),
    target === null ? "–" : `≤ ${target}×`,
    target === null ? "–" : met(ratioOf(arm), target),
  ];
  const rows = [
    row("serialized", "through the gate, maxInFlight 1", KUBEADM_TARGETS.serializedRatio),
    row("start-rule", `through the gate, start rule (maxInFlight ${k.maxInFlight})`, judged === "start-rule" ? KUBEADM_TARGETS.startRuleRatio : null),
  ];
  if (k.runs.some((x) => x.arm === "prepared"))
    rows.push(row("prepared", `the phases before etcd outside the gate, start rule (maxInFlight ${k.maxInFlight})`, null));
  if (judged === "pipelined")
    rows.push(
      row(
        "pipelined",
        `pipelined gate: the phases before etcd outside it, check-etcd left to etcd, start rule (maxInFlight ${k.maxInFlight})`,
        KUBEADM_TARGETS.startRuleRatio,
      ),
    );
  return rows;
}

/** For each missed kubeadm target: where the arm's time went beside the serial script's, measured. */
export function kubeadmMissedNotes(r: Results): string[] {
  const k = r.kubeadm;
  if (!k) return [];
  const judged = pipelinedArm(k);
  const targets: [KubeadmArm, number, number | null | undefined][] = [
    ["serialized", KUBEADM_TARGETS.serializedRatio, k.summary.serializedRatio],
    [judged, KUBEADM_TARGETS.startRuleRatio, judged === "pipelined" ? k.summary.pipelinedRatio : k.summary.startRuleRatio],
  ];
  const a = breakdown(k.runs.filter((x) => x.arm === "serial"));
  const serialMedian = k.summary.medians.serial;
  return targets
    .filter(([, target, ratio]) => ratio === null || ratio === undefined || ratio > target)
    .map(([arm, target, ratio]) => {
      const b = breakdown(k.runs.filter((x) => x.arm === arm));
      return `**${label(k, arm)}** (kubeadm): ${ratio === null || ratio === undefined ? "no passed round" : n(ratio, 2)}, target ≤ ${target}. kubeadm init starts at ${n(b.firstStart, 1)} (serial 0); one join takes ${n(b.join, 1)} (serial ${n(a.join, 1)}), one starts ${n(b.gap, 1)} after the other (serial ${n(a.gap, 1)}); joiners whose etcd served clients only after 5 s: ${n(b.stalled, 0)} of 4 (serial ${n(a.stalled, 0)}), etcd's own stall when a member joins from a snapshot whose publish it already holds (section 5e: etcd alone); kubeadm's etcd status calls that timed out waiting for such members: ${n(b.statusWait, 0)} s (serial ${n(a.statusWait, 0)}); its member adds held by etcd's health check: ${n(b.addHeld, 1)} s (serial ${n(a.addHeld, 1)}). etcd takes an add only once the member asked has been connected for 5 s to enough voters to make, with itself, a quorum of the voters and the new member, and kubeadm promotes each learner about a quarter of a second after its etcd serves, before the next kubeadm (admitted then) reaches its add: the second and third adds each wait for the voter promoted before them, so the first and the last add are at least 10 s apart in any arm, and this arm cannot end before about ${n(b.firstStart + b.init, 1)} s (the bootstrap's end) + 10 s + one join (${n(b.join, 1)} s) = ${n(b.firstStart + b.init + 10 + b.join, 1)} s, ${serialMedian ? n((b.firstStart + b.init + 10 + b.join) / serialMedian, 2) : "–"} of the serial script's median, whatever the broker does (docs/kubeadm.md).`;
    });
}

/** Where an arm's time went, medians over its passed rounds. */
function breakdown(runs: KubeadmArmRun[]) {
  const { med, boot, joiners } = passedRounds(runs);
  return {
    /** First command to the bootstrap's `kubeadm init` starting (gated: agents' start-up and the ticket). */
    firstStart: med((x) => boot(x)?.startS ?? NaN),
    init: med((x) => (boot(x) ? boot(x)!.kubeadmExitS - boot(x)!.startS : NaN)),
    join: med((x) => median(joiners(x).map((y) => y.kubeadmExitS - y.startS))),
    /** Between one joiner's start and the next's. */
    gap: med((x) =>
      median(
        joiners(x)
          .slice(1)
          .map((y, i) => y.startS - joiners(x)[i]!.startS),
      ),
    ),
    /** The last kubeadm's exit to the end (the agents' voter check and exit; the end-state poll). */
    tail: med((x) => x.seconds! - Math.max(...x.nodes.map((y) => y.kubeadmExitS))),
    overlapping: med((x) => x.overlappingStarts ?? NaN),
    /** A joiner's etcd from its start to serving clients, median over the joiners. */
    etcdServe: med((x) =>
      median(
        joiners(x)
          .map((y) => y.etcdServeS ?? NaN)
          .filter((v) => !Number.isNaN(v)),
      ),
    ),
    /** Joiners whose etcd took over 5 s to serve clients (sent a snapshot), per round. */
    stalled: med((x) => joiners(x).filter((y) => (y.etcdServeS ?? 0) > 5).length),
    /** Seconds kubeadm spent in etcd status calls that timed out, all nodes together. */
    statusWait: med((x) => 2 * x.nodes.reduce((a, y) => a + (y.statusTimeouts ?? 0), 0)),
    /** Seconds etcd's health check held kubeadm's member adds ("unhealthy cluster"), all nodes together. */
    addHeld: med((x) => x.nodes.reduce((a, y) => a + (y.addHeldS ?? 0), 0)),
  };
}

export function kubeadmSection(r: Results): string {
  const title = "## 8. kubeadm through the gate";
  const k = r.kubeadm;
  const head = labSectionHead(r, "kubeadm", title, !!k, "Not measured yet: `npm run bench -- --only kubeadm --merge` (as root, with the Kubernetes builds).");
  if ("text" in head || !k) return "text" in head ? head.text : "";
  const { by } = head;
  const m = k.summary.medians;
  const arms = (["serial", "serialized", "start-rule", "prepared", "pipelined"] as KubeadmArm[]).filter((a) => k.runs.some((x) => x.arm === a));
  const parts = arms.map((a) => ({ arm: a, b: breakdown(k.runs.filter((x) => x.arm === a)) }));
  const s2 = (v: number) => n(v, 1);
  return `${title}

${by}The unmodified kubeadm ${k.kubernetes} and kube-apiserver with etcd ${k.etcd}, on five hosts of the
[lab](docs/lab.md) (network and mount namespaces on this machine; a kubelet stand-in runs the static
pods; the phases that need a real kubelet are skipped, [docs/kubeadm.md](docs/kubeadm.md)), with
the recipe of [docs/installers.md](docs/installers.md): its \`/etc/kubeadm\` files, a load balancer
as \`controlPlaneEndpoint\`, the cluster's CA made beforehand. Per round, the arms one after the
other in this order, each on a fresh lab (bench/kubeadm-gate.ts):

- **A. serial script**: \`kubeadm init\` on host 0, then \`kubeadm join --control-plane\` on hosts
  1–4 one after another, no broker.
- **B. gate, maxInFlight 1**: \`join-broker serve\` on a host of its own; the five agents
  (\`join-broker join --exec\` with the recipe) started at once.
- **C. gate with the start rule**: the same with maxInFlight ${k.maxInFlight} and etcd's
  \`--max-learners ${k.maxInFlight}\` (init.yaml's \`etcd.local.extraArgs\`): the broker admits the next node
  once every admitted node's member started, so the joins overlap.
- **D. the phases before etcd outside the gate**: as C, but each joiner first runs \`kubeadm join
  phase control-plane-prepare all\` (discovery, the certificates' download, certificates,
  kubeconfigs, manifests) outside the gate, all four at once from the start (waiting for the
  cluster to exist); its agent starts when that is done and runs the rest of the join
  (\`check-etcd\`, \`etcd-join\`) through the gate. Host 0's agent starts first and bootstraps.
- **E. the pipelined gate**: as D, and the join inside the gate leaves out \`check-etcd\` too
  (kubeadm's wait, before its add, until every member answers etcd's status): the start rule
  orders the adds and etcd refuses an add that is not safe by itself (its health check), so a
  join's add does not wait for the member before it to serve clients. The ≤ ${KUBEADM_TARGETS.startRuleRatio}× target is
  judged on this arm when it ran (else on C).

Timed from the first command (kubeadm init; the agents' spawn) until five started voters, with every
kubeadm and agent exited 0; the lab, the broker and the CA are set up before the clock starts. Each
round is checked: five started voters in every member's own view, one cluster ID, no learner left,
no etcd log with "member count is unequal", no kubeadm output with "too many learner members". A
failed round is not timed.

${table(
  ["Round", "Arm", "Seconds", "Checks", "Joiners serving after > 5 s", "Bootstrap: start → kubeadm exit (s)", "Joiners: start → kubeadm exit (s)"],
  k.runs.map((x) => [
    x.round + 1,
    label(k, x.arm),
    x.ok ? n(x.seconds, 2) : "failed",
    x.ok ? "passed" : `**failed**: ${(x.failure ?? "").split("\n")[0]}`,
    x.nodes.filter((y) => y.role === "join" && (y.etcdServeS ?? 0) > 5).length,
    ...nodeSpans(
      x.nodes,
      (y) => y.kubeadmExitS,
      (y) => (y.prepareExitS !== undefined ? `(prepared by ${s2(y.prepareExitS)}) ` : ""),
    ),
  ]),
)}

Medians over the passed rounds (${k.rounds} round(s), ${k.summary.failedRounds} failed):

${table(
  [
    "Arm",
    "Median s",
    "Ratio to A",
    "Target",
    "Met",
    "First start s",
    "kubeadm init s",
    "kubeadm join s",
    "Joiner to joiner s",
    "Last exit to end s",
    "Overlapping starts",
    "Joiner's etcd start → serving s",
    "Joiners serving after > 5 s",
    "kubeadm's etcd status timeouts s",
    "Adds held by etcd's health check s",
  ],
  parts.map(({ arm, b }) => {
    const ratio = {
      serial: 1,
      serialized: k.summary.serializedRatio,
      "start-rule": k.summary.startRuleRatio,
      prepared: k.summary.preparedRatio ?? null,
      pipelined: k.summary.pipelinedRatio ?? null,
    }[arm];
    const target = arm === "serialized" ? KUBEADM_TARGETS.serializedRatio : arm === pipelinedArm(k) ? KUBEADM_TARGETS.startRuleRatio : null;
    return [
      label(k, arm),
      ...ratioCells(m[arm], ratio, target),
      s2(b.firstStart),
      s2(b.init),
      s2(b.join),
      s2(b.gap),
      s2(b.tail),
      arm === "serial" ? "–" : n(b.overlapping, 0),
      s2(b.etcdServe),
      n(b.stalled, 0),
      s2(b.statusWait),
      s2(b.addHeld),
    ];
  }),
)}

"First start": from the first command to \`kubeadm init\` starting (the gated arms: five agents
starting on the same cores, the ticket, the admission). "kubeadm join": one join's own length,
the median over the four. "Joiner to joiner": from one \`kubeadm join\` starting to the next one.
"Last exit to end": from the last kubeadm exit until the end (the agents asking etcd whether
their node is a voter, reporting, exiting). "Overlapping starts": joins started while another
node's recipe still ran. "Joiner's etcd start → serving": from a joiner's etcd starting to its
serving clients (its own log; etcd 3.6+ sends a member joining a cluster with more than 100 raft
entries a snapshot, and such a member serves clients only after etcd's request timeout, about 7 s,
[docs/etcd-versions.md](docs/etcd-versions.md)); "Joiners serving after > 5 s" counts them (per
round, median): how many of the four do varies from run to run, and each moves a run's time by
several seconds. "kubeadm's etcd status timeouts": the time all
kubeadm runs of the round spent in etcd status calls that timed out (2 s each) — \`check-etcd\`
and the wait after a promotion ask every member, and wait for one that does not serve yet. "Adds
held by etcd's health check": the time all kubeadm runs of the round retried their member add
while etcd refused it as "unhealthy cluster" (every 0.5 s): etcd takes a membership change only
once the member asked has been connected for 5 s to enough voters to make, with itself, a quorum
of the voters and the new member, and kubeadm promotes its learner about a quarter of a second
after its etcd starts serving, sooner than the next \`kubeadm join\` reaches its add. So in every
arm, the serial script's included, the second and third adds of 1 + 4 each come at least 5 s
after the voter before them started ([docs/kubeadm.md](docs/kubeadm.md), "How fast the joins can follow each other").
`;
}
