/**
 * The kubeadm benchmark's pure parts, without a lab: init.yaml's etcd flags for the start-rule
 * arm, and its summary (a failed round is not timed; the ratios are to the serial script's median).
 */
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { summarizeKubeadm, type KubeadmArm, type KubeadmArmRun } from "../../bench/kubeadm-gate.ts";
import { initConfig, type KubeadmHost } from "../lab/kubeadm.ts";

const host: KubeadmHost = { host: "cp-1", nodeName: "cp-1", address: "10.77.0.10", controlPlaneEndpoint: "10.77.0.20:6443" };
const clusterConfiguration = (yaml: string) =>
  parseAllDocuments(yaml)
    .map((d) => d.toJS() as Record<string, unknown>)
    .find((d) => d.kind === "ClusterConfiguration")!;

describe("init.yaml", () => {
  it("gives etcd's extra flags as ClusterConfiguration.etcd.local.extraArgs (v1beta4: a list of name and value)", () => {
    const cluster = clusterConfiguration(initConfig(host, { etcdExtraArgs: { "max-learners": "4" } }));
    expect(cluster.etcd).toEqual({ local: { extraArgs: [{ name: "max-learners", value: "4" }] } });
  });

  it("leaves etcd to kubeadm's defaults without them", () => {
    expect(clusterConfiguration(initConfig(host)).etcd).toBeUndefined();
  });
});

describe("summarizeKubeadm", () => {
  const run = (arm: KubeadmArm, round: number, seconds: number | null): KubeadmArmRun => ({
    arm,
    round,
    ok: seconds !== null,
    ...(seconds !== null ? { seconds } : { failure: "2 learner(s) left" }),
    maxInFlight: arm === "serial" || arm === "serialized" ? 1 : 4,
    nodes: [],
    checks: { voters: 5, clusterIds: 1, learners: 0, memberCountUnequal: 0, tooManyLearners: 0 },
  });

  it("takes medians over the passed rounds only and divides by the serial script's", () => {
    const s = summarizeKubeadm([
      run("serial", 0, 30),
      run("serialized", 0, 27),
      run("start-rule", 0, 18),
      run("serial", 1, 40),
      run("serialized", 1, 33),
      run("start-rule", 1, null),
      run("serial", 2, 35),
      run("serialized", 2, 30),
      run("start-rule", 2, 21),
    ]);
    expect(s.medians).toEqual({ serial: 35, serialized: 30, "start-rule": 19.5, prepared: null, pipelined: null });
    expect(s.startRuleRatio).toBeCloseTo(19.5 / 35, 3);
    expect(s.serializedRatio).toBeCloseTo(30 / 35, 3);
    expect(s.preparedRatio).toBeNull();
    expect(s.failedRounds).toBe(1);
  });

  it("has no ratio when every round of an arm failed", () => {
    const s = summarizeKubeadm([run("serial", 0, null), run("start-rule", 0, 20)]);
    expect(s.medians.serial).toBeNull();
    expect(s.startRuleRatio).toBeNull();
  });
});
