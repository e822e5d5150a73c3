import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createReporter, formatDuration } from "./progress.ts";
import { reportQueued } from "./queue-report.ts";

function sink(tty = false) {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk));
      done();
    },
  }) as unknown as NodeJS.WriteStream;
  Object.assign(stream, { isTTY: tty, columns: 80 });
  return { stream, text: () => chunks.join("") };
}

describe("progress", () => {
  it("json: one object per line with the step and its fields", () => {
    const out = sink();
    const r = createReporter({ format: "json", node: "ctrl-1", verbose: false, stream: out.stream });
    r.event("queued", "position 3 in the queue", { position: 3, estimatedWaitSeconds: 15 });
    r.retry("join API: HTTP 503");
    const lines = out
      .text()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ node: "ctrl-1", step: "queued", msg: "position 3 in the queue", position: 3, estimatedWaitSeconds: 15 });
    expect(lines[1]).toMatchObject({ step: "retry", msg: "join API: HTTP 503" });
    expect(typeof lines[0].time).toBe("string");
  });

  it("plain: a log line per event; the same queue position is not logged twice; retries only when verbose", () => {
    const out = sink();
    const r = createReporter({ format: "text", node: "ctrl-1", verbose: false, stream: out.stream });
    r.event("queued", "position 3 in the queue", { position: 3 });
    r.event("queued", "position 3 in the queue", { position: 3 });
    r.event("queued", "position 2 in the queue", { position: 2 });
    r.retry("broker unreachable");
    r.event("admitted", "admitted as join");
    const lines = out.text().trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\S+ ctrl-1 queued: position 3 in the queue$/);
    createReporter({ format: "text", node: "n", verbose: false, stream: out.stream }).event("queued", "position 1 in the queue", {
      position: 1,
      estimatedWaitSeconds: 6,
    });
    expect(out.text()).toContain("n queued: position 1 in the queue, about 6 s to go\n");
    expect(lines[2]).toContain("ctrl-1 admitted: admitted as join");
    const verbose = sink();
    createReporter({ format: "text", node: "n", verbose: true, stream: verbose.stream }).retry("broker unreachable");
    expect(verbose.text()).toContain("n retry: broker unreachable");
  });

  it("plain: a failing service is logged at once, then at most every 10 s, with the error and how many were folded", () => {
    let now = 0;
    const out = sink();
    const r = createReporter({ format: "text", node: "ctrl-1", verbose: false, stream: out.stream, now: () => now });
    r.failure("broker", "ticket request: broker unreachable (ECONNREFUSED 127.0.0.1:9)");
    for (now = 1_000; now < 10_000; now += 1_000) r.failure("broker", "ticket request: broker unreachable (ECONNREFUSED 127.0.0.1:9)");
    // Another service is not held back by the broker's quiet period.
    r.failure("join-api", "join API unreachable: ECONNREFUSED 127.0.0.1:10");
    now = 10_000;
    r.failure("broker", "ticket request: broker unreachable (ETIMEDOUT)");
    const lines = out.text().trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/ ctrl-1 retry: ticket request: broker unreachable \(ECONNREFUSED 127\.0\.0\.1:9\)$/);
    expect(lines[1]).toContain("retry: join API unreachable: ECONNREFUSED");
    expect(lines[2]).toMatch(/retry: ticket request: broker unreachable \(ETIMEDOUT\) \(and 9 more like it in the last 10 s\)$/);
  });

  it("says once that a service is reachable again, how long it was not and how many attempts failed", () => {
    let now = 0;
    const out = sink();
    const r = createReporter({ format: "text", node: "ctrl-1", verbose: false, stream: out.stream, now: () => now });
    r.reachable("broker"); // no outage: nothing to say
    r.failure("broker", "ticket request: broker unreachable (ECONNREFUSED 127.0.0.1:9)");
    for (now = 1_000; now <= 41_000; now += 10_000) r.failure("broker", "ticket request: broker unreachable (ECONNREFUSED 127.0.0.1:9)");
    now = 41_000;
    r.failure("join-api", "join API unreachable: ECONNREFUSED 127.0.0.1:10");
    now = 42_000;
    r.reachable("broker");
    r.reachable("broker");
    const lines = out.text().trim().split("\n");
    expect(lines.filter((l) => l.includes(" reachable: "))).toEqual([
      expect.stringMatching(/ ctrl-1 reachable: the broker is reachable again after 42 s \(6 failed attempts\)$/),
    ]);
    // The join API's outage goes on, and is told apart.
    now = 50_000;
    r.reachable("join-api");
    expect(out.text()).toMatch(/ ctrl-1 reachable: the join API is reachable again after 9 s \(1 failed attempt\)\n$/);
    const json = sink();
    const j = createReporter({ format: "json", node: "n", verbose: false, stream: json.stream, now: () => now });
    j.failure("broker", "x");
    now += 3_000;
    j.reachable("broker");
    expect(JSON.parse(json.text().trim().split("\n").at(-1)!)).toMatchObject({ step: "reachable", service: "broker", outageSeconds: 3, failures: 1 });
  });

  it("queued: says what a blocked queue waits for, without a made-up estimate, and logs again when that changes", () => {
    const out = sink();
    const r = createReporter({ format: "text", node: "ctrl-2", verbose: false, stream: out.stream });
    reportQueued(r, { ticket: "tkt_a", position: 1, estimatedWaitSeconds: 4, waitingFor: "bootstrap", bootstrapNode: "ctrl-1" });
    reportQueued(r, { ticket: "tkt_a", position: 1, estimatedWaitSeconds: 4, waitingFor: "bootstrap", bootstrapNode: "ctrl-1" });
    reportQueued(r, { ticket: "tkt_a", position: 1, estimatedWaitSeconds: 4 });
    reportQueued(r, { ticket: "tkt_a", position: 1, estimatedWaitSeconds: 4, waitingFor: "paused" });
    const lines = out.text().trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/ctrl-2 queued: position 1 in the queue; waiting for the bootstrap node ctrl-1 to start the cluster$/);
    expect(lines[1]).toMatch(/ctrl-2 queued: position 1 in the queue, about 4 s to go$/);
    expect(lines[2]).toMatch(/ctrl-2 queued: position 1 in the queue; admissions are paused by an admin$/);
    const tty = sink(true);
    Object.assign(tty.stream, { columns: 200 });
    const t = createReporter({ format: "text", node: "ctrl-2", verbose: false, stream: tty.stream, now: () => 0 });
    reportQueued(t, { ticket: "tkt_a", position: 1, estimatedWaitSeconds: 4, waitingFor: "bootstrap", bootstrapNode: "ctrl-1" });
    t.close();
    expect(tty.text()).toContain("ctrl-2 · queued · position 1 in the queue; waiting for the bootstrap node ctrl-1 to start the cluster · 0s");
    expect(tty.text()).not.toContain("to go");
  });

  it("terminal: one line rewritten in place, with position and estimate; final steps end the line", () => {
    let now = 0;
    const out = sink(true);
    const r = createReporter({ format: "text", node: "ctrl-1", verbose: false, stream: out.stream, now: () => now });
    r.event("queued", "position 4 in the queue", { position: 4, estimatedWaitSeconds: 20 });
    now = 5_000;
    r.event("queued", "position 3 in the queue", { position: 3, estimatedWaitSeconds: 15 });
    r.event("joined", "joined cluster abc as join");
    r.close();
    const text = out.text();
    expect(text).toContain("\r\x1b[2Kctrl-1 · queued · position 4 in the queue · about 20s to go · 0s");
    expect(text).toContain("\r\x1b[2Kctrl-1 · queued · position 3 in the queue · about 15s to go · 5s");
    expect(text).toContain("ctrl-1 joined: joined cluster abc as join\n");
    expect(text.split("\n")).toHaveLength(2);
  });

  it("formats durations", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(59_400)).toBe("59s");
    expect(formatDuration(61_000)).toBe("1m01s");
  });
});
