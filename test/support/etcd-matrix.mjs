// Which end-to-end test files run on which etcd version: the one place that decides it.
//
// `npm test` (scripts/test.mjs) runs the e2e project once per version, with E2E_ETCD_VERSION set; the
// harness (test/support/etcd.ts) then starts that version's etcd (scripts/etcd.mjs builds or
// installs it). Every version runs the version table's checks, the join API's tests against etcd
// and etcd on TLS with the join API signing, gate mode's start report; every version but 3.5 the parallel join and the fault
// run (scripts/test.mjs runs 3.7's step with the broker on join-broker serve); the other scenarios are spread so that each runs on two
// versions, and the files that do not depend on etcd's version run on the primary one only.
// Pipelined admission (several learners at once) needs etcd 3.6+: it runs on 3.6 and 3.7; gate
// mode's start rule (gate-start-rule.test.ts) on 3.6, with every file. The single
// executable file's joins (single-executable.test.ts) run on the primary version only.
// docs/etcd-versions.md explains the choice.
import { ETCD_MINORS } from "../../scripts/etcd.mjs";

/** The version every e2e file runs on. */
export const PRIMARY_ETCD_VERSION = "3.6";

/** On every version: what differs between versions, the join API against etcd, and the two whole-cluster scenarios (but 3.5: WHOLE_CLUSTER). */
const EVERY_VERSION = [
  "test/e2e/etcd-versions.test.ts",
  "test/e2e/join-api-etcd.test.ts",
  "test/e2e/join-api.test.ts",
  "test/e2e/cluster-parallel.test.ts",
  "test/e2e/cluster-faults.test.ts",
  "test/e2e/etcd-tls.test.ts",
  // What etcd's auth and revocation lists give (and keep) differs between patch releases: every version.
  "test/e2e/etcd-certificates.test.ts",
  "test/e2e/etcd-first-start.test.ts",
  // Gate mode's start report rests on etcd serving its peer URL only after its membership check.
  "test/e2e/gate-member-runs.test.ts",
];

/** The parallel join and the fault run: on every version but 3.5 (CI time; 3.5 sits between 3.4 and 3.6). */
const WHOLE_CLUSTER = ["test/e2e/cluster-parallel.test.ts", "test/e2e/cluster-faults.test.ts"];

/** Gate mode with an unmodified installer (kubeadm's etcd phase with etcdctl): on Debian's 3.4 and the primary version; the parallel join also on the newest. */
const GATE = [
  "test/e2e/etcd-installer.test.ts",
  "test/e2e/gate-parallel.test.ts",
  "test/e2e/gate-failure.test.ts",
  "test/e2e/gate-faults.test.ts",
  "test/e2e/gate-downtime.test.ts",
];

/** version → the e2e files it runs; `null` = every file. */
export const ETCD_MATRIX = {
  3.4: [...EVERY_VERSION, "test/e2e/learner-recovery.test.ts", ...GATE],
  // The two whole-cluster scenarios run on 3.4, 3.6 and 3.7; here a revocation mid-join is the whole-cluster run.
  3.5: [...EVERY_VERSION.filter((f) => !WHOLE_CLUSTER.includes(f)), "test/e2e/cluster-revoke.test.ts"],
  3.6: null,
  3.7: [
    ...EVERY_VERSION,
    "test/e2e/learner-recovery.test.ts",
    "test/e2e/cluster-revoke.test.ts",
    "test/e2e/etcd-installer.test.ts",
    "test/e2e/gate-parallel.test.ts",
    "test/e2e/cluster-pipelined.test.ts",
    "test/e2e/join-api-pipelined.test.ts",
    "test/e2e/join-api-instances.test.ts",
  ],
};

/**
 * The versions to run, oldest first: all of them, or those named in $E2E_ETCD_VERSIONS ("3.5,3.7").
 * Throws for a version that does not exist.
 */
export function etcdVersionsToRun(env = process.env) {
  const wanted = (env.E2E_ETCD_VERSIONS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (wanted.length === 0) return [...ETCD_MINORS];
  for (const v of wanted) if (!ETCD_MINORS.includes(v)) throw new Error(`E2E_ETCD_VERSIONS names ${v}; the versions are ${ETCD_MINORS.join(", ")}`);
  return ETCD_MINORS.filter((v) => wanted.includes(v));
}
