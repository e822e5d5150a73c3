/**
 * What a benchmark run records (bench/results.json): the machine, the run's settings and each
 * section's result. Its own module so that the report's sections read it without importing the
 * report that renders them.
 * @module
 */
import type { ThroughputResult } from "./broker-throughput.ts";
import type { JoinResult } from "./cluster-join.ts";
import type { CatchUpResult } from "./etcd-catchup.ts";
import type { ExecutableResult } from "./executable.ts";
import type { FootprintResult } from "./footprint.ts";
import type { HandoffResult } from "./handoff.ts";
import type { K0sBenchResult } from "./k0s-gate.ts";
import type { KubeadmGateResult } from "./kubeadm-gate.ts";
import type { ScaleResult } from "./queue-scale.ts";
import type { VerifierResult } from "./verifier.ts";

/** What every run records of itself: when, how, what it measured, on which machine, how long. */
export interface RunHeader {
  date: string;
  mode: "quick" | "full";
  sections: string[];
  settings: unknown;
  machine: Record<string, string | number>;
  loadAverage: { start: number[]; end: number[] };
  durationSeconds: number;
}

export interface Results extends RunHeader {
  errors: Record<string, string>;
  /** Sections that could not run on this machine (not root, the Kubernetes builds absent), and why. */
  skipped?: Record<string, string>;
  broker?: ThroughputResult;
  handoff?: HandoffResult;
  /** Throughput and hand-off on join-broker serve's runtime. */
  serve?: {
    broker: ThroughputResult;
    handoff: HandoffResult;
    /** Benchmarks 1 and 2 under wrangler dev in the same run as these, when they ran in it. */
    besideWrangler?: { date: string; broker: ThroughputResult["summary"]; handoff: HandoffResult["summary"] };
  };
  scale?: ScaleResult;
  verifier?: VerifierResult;
  join?: JoinResult;
  catchup?: CatchUpResult;
  executable?: ExecutableResult;
  footprint?: FootprintResult;
  kubeadm?: KubeadmGateResult;
  k0s?: K0sBenchResult;
  /** Sections measured by later partial runs (`--only … --merge`) and written over this run's. */
  merged?: RunHeader[];
}
