/**
 * BENCHMARKS.md's section 9, k0s through the gate (bench/k0s-gate.ts), and its rows in the summary
 * table.
 * @module
 */
import type { K0sArm, K0sArmRun, K0sVersionSummary } from "./k0s-gate.ts";
import type { Results } from "./results.ts";
import { labSectionHead, n, nodeSpans, passedRounds, ratioCells, table, yes } from "./support/format.ts";
import { median } from "./support/stats.ts";

export const K0S_TARGETS = {
  /** The gate (four controllers at once, one join at a time) over the serial script. */
  gateRatio: 1.1,
};

const LABEL: Record<K0sArm, string> = {
  serial: "A. serial script (as k0sctl)",
  gate: "B. gate, docs/k0s.md's unit",
  "gate-checked": "C. gate, k0s +broker (its join API checks the admission)",
};

export function k0sSummaryRows(r: Results): string[][] {
  const k = r.k0s;
  if (!k) return [["9", "k0s through the gate", r.skipped?.k0s ? "skipped" : "not measured", "", "", `≤ ${K0S_TARGETS.gateRatio}×`, ""]];
  const s = (v: number | null) => (v === null ? "failed" : `${n(v, 1)} s`);
  const met = (ratio: number | null) => (ratio === null ? "–" : yes(ratio <= K0S_TARGETS.gateRatio));
  return k.summary.flatMap((v: K0sVersionSummary) => [
    [
      "9",
      `k0s ${v.release} through the gate, 1 + 3`,
      s(v.medians.gate),
      `serial script ${s(v.medians.serial)}`,
      n(v.gateRatio, 2),
      `≤ ${K0S_TARGETS.gateRatio}×`,
      met(v.gateRatio),
    ],
    ...(v.medians["gate-checked"] !== null || k.runs.some((x) => x.version === v.version && x.arm === "gate-checked")
      ? [
          [
            "9",
            `k0s ${v.release} +broker (checks the admission) through the gate, 1 + 3`,
            s(v.medians["gate-checked"]),
            `serial script ${s(v.medians.serial)}`,
            n(v.checkedRatio, 2),
            `≤ ${K0S_TARGETS.gateRatio}×`,
            met(v.checkedRatio),
          ],
        ]
      : []),
  ]);
}

/** Where an arm's time went, medians over its passed rounds. */
function breakdown(runs: K0sArmRun[]) {
  const { med, boot, joiners } = passedRounds(runs);
  return {
    /** The first command to the bootstrap node's k0s starting (gated: agents' start-up, the ticket). */
    firstStart: med((x) => boot(x)?.startS ?? NaN),
    /** The bootstrap node's k0s start to its member a started voter (and, serial, its join API up). */
    bootstrap: med((x) => (boot(x)?.voterS !== undefined ? boot(x)!.voterS! - boot(x)!.startS : NaN)),
    /** A joiner's k0s start to its member a started voter, median over the three. */
    join: med((x) =>
      median(
        joiners(x)
          .map((y) => (y.voterS ?? NaN) - y.startS)
          .filter((v) => !Number.isNaN(v)),
      ),
    ),
    /** Between one joiner's voter and the next joiner's start. */
    handoff: med((x) =>
      median(
        joiners(x)
          .slice(1)
          .map((y, i) => y.startS - (joiners(x)[i]!.voterS ?? NaN))
          .filter((v) => !Number.isNaN(v)),
      ),
    ),
  };
}

export function k0sSection(r: Results): string {
  const title = "## 9. k0s through the gate";
  const k = r.k0s;
  const head = labSectionHead(
    r,
    "k0s",
    title,
    !!k,
    "Not measured yet: `flock /tmp/jb-lab.lock npm run bench -- --only k0s --merge` (as root, with the k0s builds).",
  );
  if ("text" in head || !k) return "text" in head ? head.text : "";
  const { by } = head;
  const s2 = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? "–" : n(v, 1));
  const arms = (["serial", "gate", "gate-checked"] as K0sArm[]).filter((a) => k.runs.some((x) => x.arm === a));
  return `${title}

${by}Real k0s (built from its source by \`node scripts/k0s.mjs\`) with the project's kube-apiserver
1.37.2 and etcd ${k.summary.map((v) => `${v.etcd || "?"} (k0s ${v.version})`).join(", ")}, four controller-only nodes (1 + 3) on hosts of the
[lab](docs/lab.md), prepared as [docs/k0s.md](docs/k0s.md) says: the cluster's CAs made
beforehand, a pre-shared controller token, the fixed API address a TCP balancer. Per round and
k0s version, the arms one after the other in this order, each on a fresh lab (bench/k0s-gate.ts):

- **A. serial script**, as k0sctl joins controllers: \`k0s controller\` on host 1, then \`k0s
  controller --token-file\` on hosts 2–4 one after another, each once the one before is up (its
  etcd member a started voter, its join API answering); no broker.
- **B. gate**: \`join-broker serve\` on a host of its own; the four nodes running docs/k0s.md's unit
  (\`join-broker join … --exec 'k0s controller …'\`) started at once. The broker picks the bootstrap
  node and admits the next join once the node before is a started voter.
- **C. gate, k0s +broker**: as B with the patched k0s whose join API checks the admission
  (\`integrations/k0s/\`): what the check (the broker's keys, an introspection per request) costs.

Timed from the first command (the first \`k0s controller\`; the agents' spawn) until four started
voters in every controller's own view; the lab, the CAs, the token and the broker are set up
before the clock starts. Each round is checked: four started voters in every view, one cluster
ID, no learner left; the gated arms also: every agent said its node joined, no unit restarted.
A failed round is not timed.${k.notRun.length ? `\n\nNot run: ${k.notRun.join("; ")}.` : ""}

${table(
  ["Round", "k0s", "Arm", "Seconds", "Checks", "Bootstrap: start → voter (s)", "Joiners: start → voter (s)"],
  k.runs.map((x) => [
    x.round + 1,
    x.version,
    LABEL[x.arm],
    x.ok ? n(x.seconds, 2) : "failed",
    x.ok ? "passed" : `**failed**: ${(x.failure ?? "").split("\n")[0]}`,
    ...nodeSpans(x.nodes, (y) => y.voterS),
  ]),
)}

Medians over the passed rounds (${k.rounds} round(s)):

${table(
  [
    "k0s",
    "Arm",
    "Median s",
    "Ratio to A",
    "Target",
    "Met",
    "First start s",
    "Bootstrap start → voter s",
    "Join start → voter s",
    "Voter → next join s",
    "Failed rounds",
  ],
  k.summary.flatMap((v) =>
    arms.map((arm) => {
      const b = breakdown(k.runs.filter((x) => x.version === v.version && x.arm === arm));
      const ratio = { serial: 1, gate: v.gateRatio, "gate-checked": v.checkedRatio }[arm];
      const target = arm === "serial" ? null : K0S_TARGETS.gateRatio;
      return [
        v.release,
        LABEL[arm],
        ...ratioCells(v.medians[arm], ratio, target),
        s2(b.firstStart),
        s2(b.bootstrap),
        s2(b.join),
        s2(b.handoff),
        String(k.runs.filter((x) => x.version === v.version && x.arm === arm && !x.ok).length),
      ];
    }),
  ),
)}

"First start": from the first command to the bootstrap node's \`k0s controller\` starting (the
gated arms: four agents starting on the same cores, the ticket, the admission). "Bootstrap start →
voter": its k0s start until its etcd member is a started voter (the serial script also waits for
its join API). "Join start → voter": one joiner's k0s start until its member is a started voter
(k0s 1.36 adds a learner and its leader promotes it), the median over the three. "Voter → next
join": from one joiner being a voter to the next one's k0s starting (the serial script's poll; the
gate: the agent's report, the broker's admission, the next agent's long poll).
`;
}
