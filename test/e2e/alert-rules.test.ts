/**
 * The example alert rules (contrib/prometheus/join-broker-alerts.yml) against the metrics the
 * broker really exports: a real broker is driven into a stuck state and a healthy one, each is
 * scraped, and Prometheus's own `promtool` replays those scrapes, held over time, through the
 * rules. A rule that names a metric the broker does not export, or labels it does not carry,
 * never fires here, and the test says so.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, startBroker, type BrokerProcess } from "../support/broker.ts";

const RULES = join(ROOT, "contrib/prometheus/join-broker-alerts.yml");
const PROMTOOL = process.env.PROMTOOL_BIN || "promtool";
const C = "alerts";

let broker: BrokerProcess;
/** Samples of each scrape: `name{labels}` → value. */
const scrapes: Record<"stuck" | "healthy", Map<string, number>> = { stuck: new Map(), healthy: new Map() };

async function call(method: string, path: string, token: string, body?: unknown): Promise<any> {
  const res = await fetch(`${broker.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function scrape(): Promise<Map<string, number>> {
  const res = await fetch(`${broker.url}/v1/admin/clusters/${C}/metrics`, { headers: { authorization: `Bearer ${broker.adminToken}` } });
  expect(res.status).toBe(200);
  const samples = new Map<string, number>();
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) samples.set(m[1], Number(m[2]));
  }
  return samples;
}

/** Every sample of a scrape as a promtool input series, held at its value for `minutes`. */
const held = (samples: Map<string, number>, minutes: number) => [...samples].map(([series, v]) => ({ series, values: `${v}x${minutes}` }));

function promtool(...args: string[]) {
  const r = spawnSync(PROMTOOL, args, { encoding: "utf8", timeout: 60_000 });
  if (r.error) throw r.error;
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

beforeAll(async () => {
  broker = await startBroker();
  const admin = broker.adminToken;
  const { token } = await call("POST", `/v1/admin/clusters/${C}/enrollment-tokens`, admin, {});
  // Stuck: the bootstrap node holds its admission and never completes; a joiner waits behind it.
  const boot = await call("POST", `/v1/clusters/${C}/tickets`, token, { node: "a-1", peerURL: "https://10.0.0.1:2380" });
  const joiner = await call("POST", `/v1/clusters/${C}/tickets`, token, { node: "a-2", peerURL: "https://10.0.0.2:2380" });
  scrapes.stuck = await scrape();
  // Healthy: both joined.
  await call("POST", `/v1/clusters/${C}/tickets/${boot.ticket}/complete`, boot.admission, { memberID: "101" });
  const admitted = await call("GET", `/v1/clusters/${C}/tickets/${joiner.ticket}?wait=10`, token);
  await call("POST", `/v1/clusters/${C}/tickets/${joiner.ticket}/complete`, admitted.admission, { memberID: "102" });
  scrapes.healthy = await scrape();
});

afterAll(async () => {
  await broker?.stop();
});

describe("the example alert rules", () => {
  it("are valid rules for promtool", () => {
    const r = promtool("check", "rules", RULES);
    expect(r, r.output).toMatchObject({ status: 0 });
  });

  it("name only metrics the broker exports", () => {
    const exported = new Set([...scrapes.healthy.keys()].map((s) => s.replace(/\{.*$/, "")));
    const named = new Set(readFileSync(RULES, "utf8").match(/\bjoin_broker_\w+/g));
    expect(named.size).toBeGreaterThan(0);
    for (const name of named) expect(exported, `${name} is not exported`).toContain(name);
  });

  it("fire on a stuck cluster's real metrics, and stay quiet on a healthy one's", () => {
    expect(scrapes.stuck.get(`join_broker_in_flight{cluster="${C}"}`)).toBe(1);
    expect(scrapes.stuck.get(`join_broker_queue_length{cluster="${C}"}`)).toBe(1);
    expect(scrapes.healthy.get(`join_broker_joins_total{cluster="${C}"}`)).toBe(2);
    const page = { cluster: C, severity: "page" };
    const silent = (at: string, ...names: string[]) => names.map((alertname) => ({ eval_time: at, alertname, exp_alerts: [] }));
    const dir = mkdtempSync(join(tmpdir(), "alert-rules-"));
    const tests = {
      rule_files: [RULES],
      evaluation_interval: "1m",
      tests: [
        {
          // Held as scraped for an hour: a node admitted for good and a queue that does not move.
          interval: "1m",
          input_series: held(scrapes.stuck, 60),
          alert_rule_test: [
            ...silent("10m", "JoinBrokerJoinStuck", "JoinBrokerQueueNotMoving"),
            {
              eval_time: "50m",
              alertname: "JoinBrokerJoinStuck",
              exp_alerts: [
                {
                  exp_labels: page,
                  exp_annotations: {
                    summary: `Cluster ${C}: a node is admitted and no join has completed in 30 min`,
                    runbook: "docs/operations.md#a-join-is-stuck",
                  },
                },
              ],
            },
            {
              eval_time: "50m",
              alertname: "JoinBrokerQueueNotMoving",
              exp_alerts: [
                {
                  exp_labels: page,
                  exp_annotations: { summary: `Cluster ${C}: 1 node(s) queued and none admitted in 30 min`, runbook: "docs/operations.md#a-join-is-stuck" },
                },
              ],
            },
          ],
        },
        {
          // A healthy cluster held for three hours: nothing fires.
          interval: "1m",
          input_series: held(scrapes.healthy, 180),
          alert_rule_test: silent(
            "170m",
            "JoinBrokerJoinStuck",
            "JoinBrokerQueueNotMoving",
            "JoinBrokerPausedLong",
            "JoinBrokerLeasesExpiring",
            "JoinBrokerQueueNearlyFull",
            "JoinBrokerNeedsOperator",
          ),
        },
        {
          // The healthy cluster's real series, with leases expiring and admissions paused.
          interval: "1m",
          input_series: [
            ...held(new Map([...scrapes.healthy].filter(([s]) => !/^join_broker_(expiries_total|paused|needs_operator)\{/.test(s))), 180),
            { series: `join_broker_expiries_total{cluster="${C}"}`, values: "0+0x10 1+1x3 4x160" },
            { series: `join_broker_paused{cluster="${C}"}`, values: "1x180" },
            { series: `join_broker_needs_operator{cluster="${C}"}`, values: "0x3 1x177" },
            { series: `up{job="join-broker-${C}",instance="broker.example:443"}`, values: "0x30" },
          ],
          alert_rule_test: [
            ...silent("3m", "JoinBrokerNeedsOperator"),
            ...silent("5m", "JoinBrokerLeasesExpiring", "JoinBrokerPausedLong", "JoinBrokerMetricsDown"),
            {
              eval_time: "6m",
              alertname: "JoinBrokerNeedsOperator",
              exp_alerts: [
                {
                  exp_labels: page,
                  exp_annotations: {
                    summary: `Cluster ${C}: a node left an etcd member it could not remove; admissions are paused`,
                    runbook: "docs/operations.md#a-member-needs-an-operator",
                  },
                },
              ],
            },
            {
              eval_time: "20m",
              alertname: "JoinBrokerLeasesExpiring",
              exp_alerts: [
                { exp_labels: { cluster: C, severity: "ticket" }, exp_annotations: { summary: `Cluster ${C}: 4 admission lease(s) expired in the last hour` } },
              ],
            },
            {
              eval_time: "20m",
              alertname: "JoinBrokerMetricsDown",
              exp_alerts: [
                {
                  exp_labels: { job: `join-broker-${C}`, instance: "broker.example:443", severity: "page" },
                  exp_annotations: {
                    summary: `The join broker's metrics for join-broker-${C} cannot be scraped`,
                    runbook: "docs/operations.md#the-broker-is-down",
                  },
                },
              ],
            },
            ...silent("100m", "JoinBrokerPausedLong"),
            {
              eval_time: "150m",
              alertname: "JoinBrokerPausedLong",
              exp_alerts: [{ exp_labels: { cluster: C, severity: "ticket" }, exp_annotations: { summary: `Cluster ${C}: admissions paused for 2 h` } }],
            },
          ],
        },
      ],
    };
    // YAML is a superset of JSON: promtool reads this file as it is.
    const file = join(dir, "tests.yml");
    writeFileSync(file, JSON.stringify(tests, null, 2));
    const r = promtool("test", "rules", file);
    expect(r, r.output).toMatchObject({ status: 0 });
  });
});
