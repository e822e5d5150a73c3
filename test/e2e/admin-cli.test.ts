/**
 * `join-broker admin` as an operator runs it: the real bin (through tsx) against a real broker
 * under `wrangler dev`, with nodes played by plain HTTP calls to the broker's node API.
 * Every subcommand's happy path, then its refusals: wrong admin token, unknown cluster, unknown
 * jti / token / member, bad usage and an unreachable broker.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, existsSync } from "node:fs";
import { freePorts } from "../../scripts/ports.mjs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, startBroker, type BrokerProcess } from "../support/broker.ts";
import { runAdmin, type AdminRun } from "../support/admin-run.ts";

const BIN = join(ROOT, "bin/join-broker");
const children = new Set<ChildProcess>();
let broker: BrokerProcess;

type Run = AdminRun;

/** Runs `join-broker admin …args`; `env` replaces the JOIN_BROKER_* variables (none by default). */
const admin = (args: string[], options: { env?: Record<string, string>; node?: string } = {}) => runAdmin(args, { ...options, live: children });

/** The connection flags for a cluster on the test broker. */
const on = (cluster: string, token = broker.adminToken) => ["--cluster", cluster, "--broker", broker.url, "--admin-token", token];

async function ok(args: string[], cluster: string): Promise<Run> {
  const r = await admin([...args, ...on(cluster)]);
  if (r.code !== 0) throw new Error(`join-broker admin ${args.join(" ")} exited ${r.code}:\n${r.stderr}${r.stdout}`);
  return r;
}

/** With --json the output is the broker's body and nothing else: it parses as one JSON document. */
async function okJson(args: string[], cluster: string): Promise<any> {
  const r = await ok([...args, "--json"], cluster);
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout);
}

/** A node talking to the broker's node-facing API. */
async function nodeApi(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${broker.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const askTicket = (cluster: string, token: string, node: string, n: number) =>
  nodeApi("POST", `/v1/clusters/${cluster}/tickets`, token, { node, peerURL: `https://10.0.0.${n}:2380` });
const introspect = async (cluster: string, token: string) =>
  (await (
    await fetch(`${broker.url}/v1/clusters/${cluster}/admissions/introspect`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token }),
    })
  ).json()) as {
    active: boolean;
    reason?: string;
  };

beforeAll(async () => {
  broker = await startBroker();
});

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await broker?.stop();
});

describe("join-broker admin: happy paths", () => {
  const C = "cli-main";
  let enrollment: string;
  const tickets: Record<string, { ticket: string; admission?: string; jti?: string }> = {};

  it("token create shows the secret once, token list never does, token revoke disables it", async () => {
    const created = await okJson(["token", "create", "--new-cluster", "--ttl", "1h", "--max-uses", "5", "--description", "control plane"], C);
    expect(created).toMatchObject({ id: expect.stringMatching(/^enr_/), token: expect.stringMatching(/^jbe_/), maxUses: 5, description: "control plane" });
    expect(Math.abs(Date.parse(created.expiresAt) - (Date.now() + 3_600_000))).toBeLessThan(60_000);
    enrollment = created.token;

    const human = await ok(["token", "create", "--ttl", "10m"], C);
    expect(human.stdout).toMatch(/shown only this once/);
    expect(human.stdout).toMatch(/: expires [^(]+\(in (9m\d+s|10m)\), unlimited uses\./);
    expect(human.stdout).not.toContain("Created cluster");
    const secret = human.stdout.match(/^(jbe_\S+)$/m)?.[1];
    expect(secret).toBeDefined();
    const second = human.stdout.match(/enrollment token (enr_\w+)/)![1];

    const listed = await okJson(["token", "list"], C);
    expect(listed.tokens.map((t: { id: string }) => t.id)).toEqual([created.id, second]);
    expect(JSON.stringify(listed)).not.toContain("jbe_");
    const table = (await ok(["token", "list"], C)).stdout;
    expect(table).toMatch(new RegExp(`${created.id}\\s+active\\s+0/5\\s+.*control plane`));
    expect(table).not.toContain("jbe_");

    const revoked = await ok(["token", "revoke", second], C);
    expect(revoked.stdout).toContain(`Revoked enrollment token ${second}`);
    // Again: idempotent, and it says so.
    const again = await ok(["token", "revoke", second], C);
    expect(again.stdout).toMatch(new RegExp(`^Enrollment token ${second} was already revoked \\(at \\S+\\); nothing changed\\.$`, "m"));
    expect(await okJson(["token", "revoke", second], C)).toMatchObject({ id: second, state: "revoked", changed: false });
    expect((await okJson(["token", "list"], C)).tokens.find((t: { id: string }) => t.id === second).state).toBe("revoked");
    expect((await askTicket(C, secret!, "ctrl-9", 9)).status).toBe(401);
  });

  it("token create without --ttl makes a token that expires in 24 h; one that never expires is asked for", async () => {
    const byDefault = await okJson(["token", "create"], C);
    expect(Math.abs(Date.parse(byDefault.expiresAt) - (Date.now() + 24 * 3_600_000))).toBeLessThan(60_000);
    const human = await ok(["token", "create", "--max-uses", "3"], C);
    expect(human.stdout).toMatch(/: expires [^(]+\(in (1d|23h\d*m?)\), at most 3 use\(s\)\./);
    const forever = await okJson(["token", "create", "--ttl", "never"], C);
    expect(forever.expiresAt).toBeNull();
    for (const t of [byDefault, forever]) await ok(["token", "revoke", t.id], C);
  });

  it("token create --nodes and --peer-hosts scope a token: token list shows it, requests outside it are refused", async () => {
    const S = `${C}-scoped`;
    const scoped = await okJson(
      ["token", "create", "--new-cluster", "--ttl", "never", "--nodes", "scoped-*,other-?", "--peer-hosts", "10.9.0.0/16", "--peer-hosts", "scoped.example"],
      S,
    );
    expect(scoped).toMatchObject({ nodes: ["scoped-*", "other-?"], peerHosts: ["10.9.0.0/16", "scoped.example"] });
    const human = await ok(["token", "create", "--nodes", "ctrl-*"], S);
    expect(human.stdout).toContain("only for nodes ctrl-*");
    const table = (await ok(["token", "list"], S)).stdout;
    expect(table).toMatch(new RegExp(`${scoped.id}\\s+active\\s+0\\s+never\\s+nodes scoped-\\*,other-\\? hosts 10\\.9\\.0\\.0/16,scoped\\.example`));
    const outside = await askTicket(S, scoped.token, "ctrl-1", 9);
    expect([outside.status, outside.body.code]).toEqual([403, "outside_token_scope"]);
  });

  it("clusters lists the broker's clusters without --cluster", async () => {
    const json = await admin(["clusters", "--json", "--broker", broker.url, "--admin-token", broker.adminToken]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).clusters.map((c: { name: string }) => c.name)).toContain(C);
    const text = await admin(["clusters", "--broker", broker.url, "--admin-token", broker.adminToken]);
    expect(text.stdout).toMatch(/^CLUSTER +CREATED$/m);
    expect(text.stdout).toMatch(new RegExp(`^${C} +\\d{4}-\\d\\d-\\d\\dT`, "m"));
  });

  it("status and tickets show the bootstrap holder, the queue and what is in flight", async () => {
    for (const [i, node] of ["ctrl-1", "ctrl-2", "ctrl-3"].entries()) {
      const r = await askTicket(C, enrollment, node, i + 1);
      expect(r.status).toBe(i === 0 ? 201 : 202);
      tickets[node] = { ticket: r.body.ticket, admission: r.body.admission, jti: r.body.jti };
    }
    const status = await okJson(["status"], C);
    expect(status).toMatchObject({ cluster: C, bootstrapped: false, bootstrapNode: "ctrl-1", paused: false, queue: { queued: 2, admitted: 1 } });
    expect(status.inFlight.map((t: { node: string }) => t.node)).toEqual(["ctrl-1"]);
    const text = (await ok(["status"], C)).stdout;
    expect(text).toMatch(/State\s+waiting for bootstrap: ctrl-1 holds the bootstrap ticket/);
    expect(text).toMatch(/Queue\s+2 queued, 1 admitted/);
    expect(text).toMatch(new RegExp(`${tickets["ctrl-1"].ticket}\\s+ctrl-1\\s+admitted\\s+bootstrap`));

    const queued = await okJson(["tickets", "--state", "queued"], C);
    expect(queued.tickets.map((t: { node: string }) => t.node)).toEqual(["ctrl-2", "ctrl-3"]);
    const page = await ok(["tickets", "--limit", "1"], C);
    expect(page.stdout).toMatch(/ctrl-1\s+admitted/);
    expect(page.stdout).not.toContain("ctrl-2");
    expect(page.stdout).toContain("More: add --after 1");
    const rest = await okJson(["tickets", "--after", "1"], C);
    expect(rest.tickets.map((t: { node: string }) => t.node)).toEqual(["ctrl-2", "ctrl-3"]);
  });

  it("bootstrap reassign hands the bootstrap ticket to another node and revokes the old holder's token", async () => {
    const r = await ok(["bootstrap", "reassign", "ctrl-2", "--reason", "ctrl-1 lost its disk"], C);
    expect(r.stdout).toContain(`Bootstrap of ${C} now belongs to ctrl-2`);
    expect(r.stdout).toContain(tickets["ctrl-1"].jti);
    expect(await introspect(C, tickets["ctrl-1"].admission!)).toMatchObject({ active: false, reason: "revoked" });
    const view = await nodeApi("GET", `/v1/clusters/${C}/tickets/${tickets["ctrl-2"].ticket}`, enrollment);
    expect(view.body).toMatchObject({ state: "admitted", role: "bootstrap" });
    tickets["ctrl-2"].admission = view.body.admission;
  });

  it("revoke ends an admission at once and frees its slot; revoking it again changes nothing", async () => {
    expect(
      (await nodeApi("POST", `/v1/clusters/${C}/tickets/${tickets["ctrl-2"].ticket}/complete`, tickets["ctrl-2"].admission!, { memberID: "1201" })).status,
    ).toBe(200);
    // Member IDs read as etcdctl prints them: 1201 is 4b1.
    const members = (await ok(["status"], C)).stdout;
    expect(members).toMatch(/^ctrl-2 .* 4b1 /m);
    expect((await ok(["audit"], C)).stdout).toMatch(/ticket\.joined .* memberID=4b1/);
    const three = await nodeApi("GET", `/v1/clusters/${C}/tickets/${tickets["ctrl-3"].ticket}`, enrollment);
    expect(three.body.state).toBe("admitted");
    expect(await introspect(C, three.body.admission)).toMatchObject({ active: true });

    const r = await ok(["revoke", three.body.jti, "--reason", "wrong machine"], C);
    expect(r.stdout).toContain(`Revoked admission ${three.body.jti} of node ctrl-3`);
    expect(await introspect(C, three.body.admission)).toMatchObject({ active: false, reason: "revoked" });
    const list = (await (await fetch(`${broker.url}/v1/clusters/${C}/revocations`)).json()) as { revoked: { jti: string }[] };
    expect(list.revoked.map((x: { jti: string }) => x.jti)).toContain(three.body.jti);
    expect((await okJson(["tickets", "--state", "revoked"], C)).tickets.map((t: { node: string }) => t.node)).toEqual(["ctrl-1", "ctrl-3"]);

    const again = await okJson(["revoke", three.body.jti, "--reason", "twice"], C);
    expect(again).toMatchObject({ jti: three.body.jti, changed: false, status: "revoked" });
  });

  it("pause stops admissions, resume lets the queue move again, metrics follow", async () => {
    expect((await ok(["pause"], C)).stdout).toContain(`Paused cluster ${C}`);
    const four = await askTicket(C, enrollment, "ctrl-4", 4);
    expect(four.status).toBe(202); // a slot is free, but nothing is admitted while paused
    expect(await okJson(["status"], C)).toMatchObject({ paused: true, queue: { queued: 1, admitted: 0 } });
    const paused = (await ok(["metrics"], C)).stdout;
    expect(paused).toContain(`join_broker_paused{cluster="${C}"} 1`);
    expect(paused).toContain(`join_broker_queue_length{cluster="${C}"} 1`);

    expect(await okJson(["resume"], C)).toEqual({ paused: false });
    const view = await nodeApi("GET", `/v1/clusters/${C}/tickets/${four.body.ticket}`, enrollment);
    expect(view.body).toMatchObject({ state: "admitted", role: "join" });
    const resumed = (await ok(["metrics"], C)).stdout;
    expect(resumed).toContain(`join_broker_paused{cluster="${C}"} 0`);
    expect(resumed).toContain(`join_broker_queue_length{cluster="${C}"} 0`);
    expect(resumed).toContain(`join_broker_in_flight{cluster="${C}"} 1`);
  });

  it("policy set changes only the given fields", async () => {
    const p = await okJson(["policy", "set", "--max-in-flight", "2", "--lease-seconds", "90"], C);
    expect(p).toEqual({ maxInFlight: 2, leaseSeconds: 90, admissionTtlSeconds: 900, maxQueue: 1000 });
    // 'policy' alone shows it.
    expect(await okJson(["policy"], C)).toEqual(p);
    expect((await ok(["policy"], C)).stdout).toMatch(/^maxInFlight +2 +\(nodes admitted at once\)$/m);
    const r = await ok(["policy", "set", "--max-queue", "50"], C);
    expect(r.stdout).toContain("maxInFlight 2, leaseSeconds 90, admissionTtlSeconds 900, maxQueue 50");
    expect((await okJson(["status"], C)).policy).toEqual({ maxInFlight: 2, leaseSeconds: 90, admissionTtlSeconds: 900, maxQueue: 50 });
  });

  it("keys rotate signs with a new key and keeps the old one published", async () => {
    const before = (await okJson(["status"], C)).signingKey;
    const rotated = await okJson(["keys", "rotate"], C);
    expect(rotated.kid).not.toBe(before);
    expect(rotated.retired).toBe(before);
    const jwks = (await (await fetch(`${broker.url}/v1/clusters/${C}/jwks.json`)).json()) as { keys: { kid: string }[] };
    expect(jwks.keys.map((k: { kid: string }) => k.kid).sort()).toEqual([before, rotated.kid].sort());
    const text = await ok(["keys", "rotate"], C);
    expect(text.stdout).toMatch(new RegExp(`retired ${rotated.kid}`));
  });

  it("forget removes a member so that the node may join again", async () => {
    expect((await okJson(["status"], C)).members.map((m: { node: string }) => m.node)).toEqual(["ctrl-2"]);
    expect((await ok(["forget", "ctrl-2"], C)).stdout).toContain("Forgot member ctrl-2");
    expect((await okJson(["status"], C)).members).toEqual([]);
    const again = await askTicket(C, enrollment, "ctrl-2", 2);
    expect(again.body).toMatchObject({ role: "join" });
    expect(["queued", "admitted"]).toContain(again.body.state);
  });

  it("adopt declares an existing cluster: its nodes join, none bootstraps", async () => {
    const A = "cli-adopted";
    const r = await ok(["adopt", "--member", "etcd-a=https://10.9.0.1:2380", "--member", "etcd-b=https://10.9.0.2:2380/"], A);
    expect(r.stdout).toContain(`Adopted cluster ${A} with 2 member(s)`);
    const status = await okJson(["status"], A);
    expect(status).toMatchObject({ adopted: true, bootstrapped: false });
    expect(status.members.map((m: { node: string; peerURL: string }) => `${m.node}=${m.peerURL}`)).toEqual([
      "etcd-a=https://10.9.0.1:2380",
      "etcd-b=https://10.9.0.2:2380",
    ]);
    const token = (await okJson(["token", "create"], A)).token;
    expect((await askTicket(A, token, "etcd-c", 3)).body).toMatchObject({ role: "join", state: "admitted" });
  });

  it("audit lists every state change, and --follow prints new ones as they happen", async () => {
    const log = await okJson(["audit", "--limit", "1000"], C);
    const actions = log.entries.map((e: { action: string }) => e.action);
    for (const a of [
      "cluster.created",
      "enrollment_token.created",
      "enrollment_token.revoked",
      "ticket.created",
      "ticket.admitted",
      "bootstrap.reassigned",
      "ticket.joined",
      "admission.revoked",
      "cluster.paused",
      "cluster.resumed",
      "policy.changed",
      "keys.rotated",
      "member.forgotten",
    ]) {
      expect(actions).toContain(a);
    }
    expect(log.entries.map((e: { seq: number }) => e.seq)).toEqual([...log.entries.keys()].map((i) => i + 1));
    const page = await ok(["audit", "--limit", "2"], C);
    expect(page.stdout.trim().split("\n")).toHaveLength(3);
    expect(page.stdout).toMatch(/^\s+1\s+\S+\s+admin\s+cluster\.created\s+cli-main/m);
    expect(page.stdout).toContain("More: add --after 2");

    // Follow: existing entries first, then each new one, until interrupted.
    const child = spawn(BIN, ["admin", "audit", "--follow", ...on("cli-adopted")], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    const waitFor = async (text: string) => {
      for (let i = 0; i < 200 && !out.includes(text); i++) await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain(text);
    };
    await waitFor("cluster.adopted");
    expect(out).not.toContain("member.forgotten");
    await ok(["forget", "etcd-b"], "cli-adopted");
    await waitFor("member.forgotten");
    expect(out).toMatch(/member\.forgotten\s+etcd-b\s+peerURL=https:\/\/10\.9\.0\.2:2380/);
    child.kill("SIGINT");
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running"), 15_000))]);
    children.delete(child);
    expect(code).toBe(0);
  });

  it("takes the broker and the admin token from the environment or a file, and runs on the system node", async () => {
    const env = { JOIN_BROKER_URL: broker.url, JOIN_BROKER_ADMIN_TOKEN: broker.adminToken, JOIN_BROKER_CLUSTER: C };
    const fromEnv = await admin(["status", "--json"], { env });
    expect(fromEnv.code).toBe(0);
    expect(JSON.parse(fromEnv.stdout).cluster).toBe(C);

    const file = join(mkdtempSync(join(tmpdir(), "admin-cli-")), "admin-token");
    writeFileSync(file, `${broker.adminToken}\n`, { mode: 0o600 });
    const fromFile = await admin(["status", "--cluster", C, "--broker", broker.url, "--admin-token-file", file]);
    expect(fromFile.code).toBe(0);
    expect(fromFile.stdout).toMatch(new RegExp(`Cluster\\s+${C}`));

    // The bin must work on the machine's own node (>= 20), not only on the one the tests run on.
    const systemNode = ["/usr/bin/node", "/usr/local/bin/node"].find(existsSync) ?? process.execPath;
    const onSystemNode = await admin(["tickets", "--json"], { env, node: systemNode });
    expect(onSystemNode.code).toBe(0);
    expect(JSON.parse(onSystemNode.stdout).tickets.length).toBeGreaterThan(0);
  });
});

describe("join-broker admin: errors", () => {
  const C = "cli-errors";
  // Every subcommand with arguments that would succeed with the right token.
  const EVERY: string[][] = [
    ["token", "create"],
    ["token", "list"],
    ["token", "revoke", "enr_abc"],
    ["status"],
    ["tickets"],
    ["revoke", "adm_abc", "--reason", "x"],
    ["pause"],
    ["resume"],
    ["policy", "set", "--max-queue", "10"],
    ["keys", "rotate"],
    ["adopt", "--member", "n1=https://10.0.0.1:2380"],
    ["forget", "n1"],
    ["bootstrap", "reassign", "n1", "--reason", "x"],
    ["metrics"],
    ["audit"],
    ["audit", "--follow"],
  ];

  beforeAll(async () => {
    await okJson(["token", "create", "--new-cluster"], C);
  });

  // Waits for an admin process per subcommand, four at a time (each a Node start-up and the CLI's load).
  it("refuses a wrong admin token with exit 3 and the broker's code, for every subcommand", async () => {
    const runs = [];
    for (let i = 0; i < EVERY.length; i += 4)
      runs.push(...(await Promise.all(EVERY.slice(i, i + 4).map((args) => admin([...args, ...on(C, "not-the-admin-token")])))));
    for (const [i, r] of runs.entries()) {
      expect({ args: EVERY[i], code: r.code }).toEqual({ args: EVERY[i], code: 3 });
      expect(r.stderr).toContain("unauthorized (HTTP 401)");
      expect(r.stdout).toBe("");
    }
    // Nothing changed: the cluster is neither paused nor re-policied.
    expect(await okJson(["status"], C)).toMatchObject({ paused: false, adopted: false, policy: { maxQueue: 1000 } });
  });

  it("prints the problem body with --json, and only it", async () => {
    const r = await admin(["tickets", "--json", ...on(C, "not-the-admin-token")]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 401, code: "unauthorized" });
  });

  it("reports an unknown cluster with its code and exit 1", async () => {
    // Only adopt, and token create with --new-cluster, create the cluster they name; the others need it to exist.
    const reading = EVERY.filter((a) => a[0] !== "adopt");
    expect(reading.length).toBe(15);
    const runs = [];
    for (let i = 0; i < reading.length; i += 4)
      runs.push(...(await Promise.all(reading.slice(i, i + 4).map((args) => admin([...args, ...on("no-such-cluster")])))));
    for (const [i, r] of runs.entries()) {
      expect({ args: reading[i], code: r.code }).toEqual({ args: reading[i], code: 1 });
      expect(r.stderr).toContain("unknown_cluster (HTTP 404)");
      expect(r.stderr).toContain("check --cluster (no-such-cluster)");
      expect(r.stderr.match(/enrollment token/g)).toHaveLength(1);
    }
    expect(runs[0].stderr).toContain("run 'join-broker admin token create --cluster no-such-cluster --new-cluster'");
  });

  it("creates a cluster only with --new-cluster, and says so", async () => {
    const T = "cli-typo";
    const typo = await admin(["token", "create", "--ttl", "1h", ...on(T)]);
    expect(typo.code).toBe(1);
    expect(typo.stdout).toBe("");
    expect(typo.stderr).toContain("unknown_cluster (HTTP 404)");
    expect(typo.stderr).toContain("--new-cluster");
    // Nothing was created: the cluster is still unknown, and no token exists for it.
    expect((await okJson(["clusters"], C)).clusters.map((c: { name: string }) => c.name)).not.toContain(T);
    expect((await admin(["status", ...on(T)])).stderr).toContain("unknown_cluster (HTTP 404)");

    const created = await ok(["token", "create", "--new-cluster", "--ttl", "1h"], T);
    expect(created.stdout).toMatch(new RegExp(`^Created cluster ${T}\\.\nCreated enrollment token enr_\\w+ for cluster ${T}: `));
    expect((await okJson(["status"], T)).cluster).toBe(T);
    // Again on the cluster that now exists: a token, no claim to have created anything.
    const again = await ok(["token", "create", "--new-cluster", "--ttl", "1h"], T);
    expect(again.stdout).not.toContain("Created cluster");
    expect((await okJson(["token", "list"], T)).tokens).toHaveLength(2);
  });

  it("reports an unknown jti, enrollment token or member with the broker's code", async () => {
    const jti = await admin(["revoke", "adm_doesnotexist", "--reason", "test", ...on(C)]);
    expect(jti.code).toBe(1);
    expect(jti.stderr).toContain("admission_not_found (HTTP 404): no admission token with jti adm_doesnotexist");
    const jtiJson = await admin(["revoke", "adm_doesnotexist", "--reason", "test", "--json", ...on(C)]);
    expect(JSON.parse(jtiJson.stdout)).toMatchObject({ code: "admission_not_found", status: 404 });
    const token = await admin(["token", "revoke", "enr_doesnotexist", ...on(C)]);
    expect(token.code).toBe(1);
    expect(token.stderr).toContain("enrollment_token_not_found");
    const member = await admin(["forget", "ghost", ...on(C)]);
    expect(member.code).toBe(1);
    expect(member.stderr).toContain("member_not_found");
    const bootstrap = await admin(["bootstrap", "reassign", "n2", "--reason", "x", ...on("cli-adopted")]);
    expect(bootstrap.code).toBe(1);
    expect(bootstrap.stderr).toMatch(/\w+_\w+ \(HTTP 409\)/);
  });

  it("exits 2 on bad usage without sending anything", async () => {
    const nowhere = `http://127.0.0.1:${(await freePorts(1))[0]}`;
    const conn = ["--cluster", C, "--broker", nowhere, "--admin-token", "t"];
    const cases: [string[], RegExp][] = [
      [[], /Usage: join-broker admin SUBCOMMAND/],
      [["frobnicate", ...conn], /unknown subcommand 'frobnicate'/],
      [["token", ...conn], /did you mean 'token create' or 'token list' or 'token revoke'/],
      [["status", "--bogus", ...conn], /bogus/],
      [["status", "extra", ...conn], /'status' takes no arguments/],
      [["token", "revoke", ...conn], /'token revoke' needs ID/],
      [["status", "--reason", "x", ...conn], /--reason does not apply to 'status'/],
      [["token", "create", "--ttl", "soon", ...conn], /--ttl must be seconds, a duration like 10m, 24h, 7d, or .never./],
      [["token", "create", "--ttl", "30s", ...conn], /--ttl 30s: must be at least 60 s/],
      [["token", "create", "--peer-hosts", "10.0.0.0/33", ...conn], /--peer-hosts: "10\.0\.0\.0\/33" is not/],
      [["token", "create", "--nodes", "a,,b", ...conn], /--nodes takes a comma-separated list/],
      [["revoke", "adm_x", ...conn], /--reason TEXT is required/],
      [["policy", "set", ...conn], /policy set needs at least one of/],
      [["policy", "set", "--max-in-flight", "two", ...conn], /--max-in-flight must be a whole number/],
      [["adopt", "--member", "n1", ...conn], /--member must be NODE=PEERURL/],
      [["adopt", "--member", "n1=ftp://x:1", ...conn], /peerURL must use http or https/],
      [["status", "--cluster", "Not_A_Cluster", "--broker", nowhere, "--admin-token", "t"], /cluster: cluster must be a DNS label/],
      [["status", "--cluster", C, "--admin-token", "t"], /--broker URL is required/],
      [["status", "--cluster", C, "--broker", nowhere], /the admin token is required \(--admin-token, --admin-token-file or JOIN_BROKER_ADMIN_TOKEN\)/],
      [["metrics", "--json", ...conn], /--json does not apply/],
    ];
    const runs = [];
    for (let i = 0; i < cases.length; i += 4) runs.push(...(await Promise.all(cases.slice(i, i + 4).map(([args]) => admin(args)))));
    for (const [i, r] of runs.entries()) {
      expect({ args: cases[i][0], code: r.code }).toEqual({ args: cases[i][0], code: 2 });
      expect(r.stderr).toMatch(cases[i][1]);
      expect(r.stderr).not.toContain("cannot reach"); // nothing was sent
    }
    const help = await admin(["revoke", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: join-broker admin revoke JTI --reason TEXT");
  });

  it("exits 1 when the broker cannot be reached, naming the address", async () => {
    const nowhere = `http://127.0.0.1:${(await freePorts(1))[0]}`;
    const r = await admin(["status", "--cluster", C, "--broker", nowhere, "--admin-token", "t"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach the broker at ${nowhere}: ECONNREFUSED`);
  });
});
