/**
 * For the agent's unit tests, never imported by the agent itself: its options as `join-broker
 * join` would give them, and a JSON progress reporter whose lines the test reads back.
 * @module
 */
import { join } from "node:path";
import { Writable } from "node:stream";
import type { AgentOptions } from "./agent-options.ts";
import { createReporter, type Reporter } from "./progress.ts";

export interface TestNode {
  /** The broker's base URL (default: a port nothing listens on). */
  broker?: string;
  node?: string;
  peerURL?: string;
  /** Other options than the defaults below. */
  more?: Partial<AgentOptions>;
}

/** Node n1 of cluster c1, its state dir under `root`, the join API on a port nothing listens on, JSON logs. */
export function testAgentOptions(
  root: string,
  { broker = "http://127.0.0.1:1", node = "n1", peerURL = "https://127.0.0.1:2380", more = {} }: TestNode = {},
): AgentOptions {
  const stateDir = join(root, "state");
  return {
    brokerUrl: broker,
    cluster: "c1",
    token: `jbe_${"x".repeat(40)}`,
    node,
    peerURL,
    listenPeerURL: peerURL,
    joinApiUrl: "http://127.0.0.1:1",
    stateDir,
    dataDir: join(stateDir, "etcd"),
    clientURL: "http://127.0.0.1:2379",
    etcdBin: null,
    etcdArgs: [],
    printEtcdFlags: false,
    retryRevoked: false,
    timeoutSeconds: 3600,
    joinApiPatienceSeconds: 60,
    exec: null,
    etcdEndpoints: ["http://127.0.0.1:2379"],
    controllers: [],
    etcdTls: null,
    pkiDir: null,
    apiServerClient: false,
    service: false,
    cleanup: null,
    removalTimeoutSeconds: 120,
    rescue: null,
    logFormat: "json",
    verbose: false,
    ...more,
  };
}

/** What the agent reported: every JSON line, and the lines parsed. */
export interface CollectedProgress {
  reporter: Reporter;
  lines: string[];
  events(): { step: string; msg: string }[];
}

export function collectProgress(node = "n1"): CollectedProgress {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  }) as unknown as NodeJS.WriteStream;
  const reporter = createReporter({ format: "json", node, verbose: false, stream });
  return { reporter, lines, events: () => lines.map((l) => JSON.parse(l) as { step: string; msg: string }) };
}
