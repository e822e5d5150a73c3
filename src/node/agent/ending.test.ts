/**
 * How a run ends, against a broker on loopback that records each ticket given up: the exit code
 * per kind of ending, and that the turn is left at once except where nothing is left to give.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BrokerClient } from "../../shared/client/broker-client.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { PkiError } from "../pki/x509.ts";
import type { AgentContext } from "./steps/agent-context.ts";
import { collectProgress, testAgentOptions } from "./core/agent-test-kit.ts";
import { BrokerSteps } from "./steps/broker-steps.ts";
import { endRun } from "./steps/ending.ts";
import { GaveUp, Refusal, Stopped } from "./core/errors.ts";
import { AdmissionRevoked } from "./core/lease.ts";
import type { MemberRunner } from "./steps/member-runner.ts";
import { ownEtcdMode } from "./own-etcd/own-etcd-runner.ts";
import { NodeFiles } from "./files/node-files.ts";
import { StateDir } from "./files/state-files.ts";

let server: Server;
let url = "";
const abandoned: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    const ticket = decodeURIComponent(req.url!.split("/").at(-1)!);
    if (req.method === "DELETE") abandoned.push(ticket);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ticket, state: "abandoned", role: "join" }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
const dirs: string[] = [];
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A run's parts with no etcd of its own (no --etcd-bin), holding `ticket`; what it reported, as JSON lines. */
function context(ticket: string | undefined): { ctx: AgentContext; runner: MemberRunner; events: () => { step: string; msg: string }[] } {
  const home = mkdtempSync(join(tmpdir(), "agent-ending-"));
  dirs.push(home);
  const options = testAgentOptions(home, { broker: url });
  const { reporter, events } = collectProgress();
  const dir = new StateDir(options.stateDir);
  const files = new NodeFiles(options, dir);
  files.load();
  if (ticket) files.save({ ticket });
  const session = new BrokerClient({ baseUrl: url }).nodeSession("c1", options.token);
  const broker = new BrokerSteps(session, options, reporter, () => 0.5);
  const ctx: AgentContext = { options, reporter, files, session, broker, random: () => 0.5, stop: new AbortController().signal, print: () => {} };
  // Its own etcd, with no --etcd-bin: nothing of its own runs.
  const runner = ownEtcdMode.runner(ctx);
  return { ctx, runner, events };
}

describe("how a run that did not join ends", () => {
  it("a refusal exits 3 and gives the turn up at once", async () => {
    const { ctx, runner, events } = context("tkt_refused");
    expect(await endRun(ctx, runner, new Refusal("data that is not ours"))).toBe(EXIT.refused);
    expect(abandoned).toContain("tkt_refused");
    expect(events().at(-1)).toMatchObject({ step: "refused", msg: "data that is not ours; left the queue (ticket tkt_refused abandoned)" });
  });

  it("a revoked admission exits 3 with nothing left to give up", async () => {
    const { ctx, runner } = context("tkt_revoked");
    expect(await endRun(ctx, runner, new AdmissionRevoked("an admin revoked this node's admission"))).toBe(EXIT.refused);
    expect(abandoned).not.toContain("tkt_revoked");
  });

  it("a CA problem is the operator's to fix: a refusal naming --pki-dir", async () => {
    const { ctx, runner, events } = context(undefined);
    expect(await endRun(ctx, runner, new PkiError("ca_incomplete", "ca.key without ca.crt"))).toBe(EXIT.refused);
    expect(events().at(-1)).toMatchObject({ step: "refused", msg: "ca.key without ca.crt (--pki-dir)" });
  });

  it("giving up exits 4 and leaves the queue", async () => {
    const { ctx, runner, events } = context("tkt_gave_up");
    expect(await endRun(ctx, runner, new GaveUp("not joined within --timeout 5 s"))).toBe(EXIT.gaveUp);
    expect(abandoned).toContain("tkt_gave_up");
    expect(events().at(-1)?.step).toBe("gave-up");
  });

  it("a signal keeps the ticket, so that the same command resumes", async () => {
    const { ctx, runner, events } = context("tkt_stopped");
    expect(await endRun(ctx, runner, new Stopped("SIGTERM"))).toBe(143);
    expect(abandoned).not.toContain("tkt_stopped");
    expect(events().at(-1)).toMatchObject({ step: "stopping", msg: "stopped by SIGTERM. Run the same command again to resume." });
  });

  it("bad usage found after the broker answered gives the turn up and is thrown on for the command line", async () => {
    const { ctx, runner } = context("tkt_usage");
    await expect(endRun(ctx, runner, new UsageError("--peer-url does not match"))).rejects.toThrow(UsageError);
    expect(abandoned).toContain("tkt_usage");
  });

  it("anything unexpected exits 1 with its message, and keeps the ticket", async () => {
    const { ctx, runner, events } = context("tkt_bug");
    expect(await endRun(ctx, runner, new TypeError("x is undefined"))).toBe(EXIT.failure);
    expect(abandoned).not.toContain("tkt_bug");
    expect(events().at(-1)).toMatchObject({ step: "error", msg: "x is undefined" });
  });
});
