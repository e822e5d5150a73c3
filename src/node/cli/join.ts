/**
 * `join-broker join`: the node agent's flags, help and checks (docs/agent.md, "Command line";
 * docs/protocol.md, "Command line"), and running it (src/node/agent/agent.ts).
 * @module
 */
import { hostname } from "node:os";
import { join } from "node:path";
import { Option, type Command } from "commander";
import type { AgentOptions, RescueFiles } from "../agent/core/agent-options.ts";
import { UsageError } from "../exit-codes.ts";
import { caFileOption, withCaFile } from "./ca-file.ts";
import { conflicting, parseOnly, requireAll, secretRequirement, typed, unset, type CliCommand } from "./command.ts";
import { addEtcdTlsOptions, etcdTlsFiles, logFormatOption } from "./etcd-options.ts";
import { stopOnSignals } from "./signals.ts";
import { bearerToken, endpoints, httpUrl, number, ownNodeName, path, peerUrl, program, readSecret, repeated, clusterName, text, value } from "./values.ts";

const DESCRIPTION = `The node agent. It asks the broker whether this node bootstraps the cluster or joins it, waits in the cluster's join queue, has the join API add it as an etcd learner, starts etcd, gets it promoted to a voter, reports completion and writes a marker. Every step is safe to interrupt: run the same command again and it resumes. It never starts a new cluster unless the broker handed this node the cluster's one bootstrap ticket.`;

const AFTER = `
Output: progress goes to stderr (one updating line on a terminal, log lines otherwise); once the
node is a voter (the bootstrap node: once its etcd is healthy) stdout gets one line:
  joined cluster <etcd cluster ID, hex> as <bootstrap|join>

Exit codes:
  0    joined (with --etcd-bin: etcd stopped cleanly after a signal); or already joined per the marker
  2    bad usage: a missing or malformed flag, or a state dir that belongs to another node
  3    refused: the admission was revoked, a token was rejected, the peer URL is taken, the
       broker says this node already joined but its etcd data is gone (run
       'join-broker admin forget NODE --cluster NAME' after removing the stale etcd member),
       its member is a voter that ran but the data dir is empty, or another etcd than its
       own answers on --client-url
  4    gave up: --timeout passed, or the etcd it supervises keeps failing (the last line
       gives etcd's own error), or (gate mode) COMMAND exited non-zero; it also leaves the
       queue (unless its etcd runs on as a voter), so its slot is free at once
  1    unexpected failure
  130, 143  stopped by SIGINT or SIGTERM before the node joined (run again to resume)
`;

const REQUIRED = "Required:";
const NODE = "Node and etcd:";
const GATE = "Gate mode, for an installer that adds its own etcd member (k0s, kubeadm, k3s; docs/installers.md):";
const BEHAVIOUR = "Behaviour:";
const GATE_RUNS_ETCD = "in gate mode the installer adds the member and runs etcd";

/** Flags the agent sets on etcd itself; `--etcd-arg` must not fight over them. */
const RESERVED_ETCD_FLAGS = [
  "name",
  "data-dir",
  "listen-peer-urls",
  "initial-advertise-peer-urls",
  "listen-client-urls",
  "advertise-client-urls",
  "initial-cluster",
  "initial-cluster-state",
  "initial-cluster-token",
];
/** Set by the agent with --pki-dir. */
const RESERVED_TLS_FLAGS = [
  "cert-file",
  "key-file",
  "trusted-ca-file",
  "client-cert-auth",
  "peer-cert-file",
  "peer-key-file",
  "peer-trusted-ca-file",
  "peer-client-cert-auth",
  "client-crl-file",
  "peer-crl-file",
];
/** Flags that only gate mode reads (attribute names): refused without --exec. */
const GATE_ONLY = ["service", "cleanup", "removalTimeout", "rescueEtcd", "rescuePki"];

/** One more etcd flag, written inline (`--etcd-arg=--heartbeat-interval=100`), not one the agent sets. */
const etcdFlag = (t: string, flag: string): string => {
  const name = /^--?([a-z0-9-]+)/.exec(t)?.[1];
  if (!name) throw new UsageError(`${flag} ${JSON.stringify(t)} is not an etcd flag (write it inline: ${flag}=--flag=value)`);
  if (RESERVED_ETCD_FLAGS.includes(name)) throw new UsageError(`${flag} may not set --${name}: the agent sets it`);
  return t;
};

export function defineJoin(cmd: CliCommand): CliCommand {
  const group = (heading: string, ...options: Option[]) => {
    for (const o of options) cmd.addOption(o.helpGroup(heading));
  };
  cmd
    .description(DESCRIPTION)
    .usage(
      "--broker URL --cluster NAME --token TOKEN --node NAME --peer-url URL\n" +
        "                        --join-api URL --state-dir DIR [--etcd-bin PATH] [--data-dir DIR] [--client-url URL]\n" +
        "       join-broker join --broker URL --cluster NAME --token TOKEN --node NAME --peer-url URL\n" +
        "                        --state-dir DIR --exec 'COMMAND' --etcd URL[,URL…]      (gate mode)",
    );
  group(
    REQUIRED,
    value("--broker <URL>", "the broker's origin", httpUrl).env("JOIN_BROKER_URL"),
    value("--cluster <NAME>", "the cluster to join", clusterName),
    value("--token <TOKEN>", "enrollment token (or --token-file PATH)", text).env("JOIN_BROKER_TOKEN"),
    value("--token-file <PATH>", "a file holding the enrollment token", text),
    value("--peer-url <URL>", "this node's etcd peer URL, e.g. https://10.0.0.4:2380", peerUrl),
    value("--join-api <URL>", "the controllers' join API, e.g. https://10.0.0.2:9443 (not in gate mode)", httpUrl),
    value("--state-dir <DIR>", "where the agent keeps its marker and progress (one per node)", path),
  );
  group(
    NODE,
    value("--node <NAME>", "this node's name and etcd member name (default: the host name; not a reserved name such as root or kube-apiserver)", ownNodeName),
    conflicting(value("--etcd-bin <PATH>", "start and supervise etcd; stay in the foreground until stopped", program), ["exec"], GATE_RUNS_ETCD),
    value("--data-dir <DIR>", "etcd's data dir (default: <state-dir>/etcd)", path),
    value(
      "--client-url <URL>",
      "etcd's client URL, listened on and advertised (default: http://127.0.0.1:2379, https://127.0.0.1:2379 with --pki-dir)",
      peerUrl,
    ),
    conflicting(
      value(
        "--pki-dir <DIR>",
        "etcd with TLS on its client and peer ports and client-certificate auth on both (https:// URLs). This node's keys are made here and never leave it. " +
          "The bootstrap node uses DIR/ca.crt and DIR/ca.key (PEM, as kubeadm, k0s, openssl or Go tools wrote them: RSA 2048-4096, ECDSA P-256/P-384 or Ed25519; " +
          "checked at start, exit 3 naming what is wrong) when present, else creates them, and signs its own certificates; a joiner sends " +
          "certificate requests with its add and the join API signs them for exactly its admission (peer.crt, server.crt, ca.crt land here). " +
          "The bootstrap node turns etcd's auth on: these certificates get no right but the member list and status; crl.der (kept current) lists revoked ones",
        path,
      ),
      ["exec"],
      "in gate mode the installer runs etcd with its own certificates (give the agent --etcd-cacert, --etcd-cert and --etcd-key)",
    ),
    new Option(
      "--apiserver-etcd-client",
      "with --pki-dir: also get the client certificate this node's kube-apiserver reaches etcd with (DIR/apiserver-etcd-client.crt and .key; " +
        "etcd user kube-apiserver: read and write every key but /join-broker/)",
    ),
    value("--listen-peer-url <URL>", "address etcd listens on for peers (default: the peer URL)", peerUrl),
    conflicting(
      value("--etcd-arg <ARG>", "one more etcd flag, repeatable; write it inline: --etcd-arg=--heartbeat-interval=100", repeated(etcdFlag)),
      ["exec"],
      GATE_RUNS_ETCD,
    ),
    conflicting(
      new Option(
        "--print-etcd-flags",
        "print etcd's flags on stdout, one per line, once they are known. Without --etcd-bin the agent then waits for another supervisor to start etcd with them (they are also written to <state-dir>/etcd-flags.txt).",
      ),
      ["exec"],
      GATE_RUNS_ETCD,
    ),
  );
  group(
    GATE,
    new Option(
      "--exec <'COMMAND'>",
      "instead of --join-api and --etcd-bin: once admitted, run COMMAND with sh -c and JOIN_BROKER_ROLE (bootstrap|join), JOIN_BROKER_ADMISSION (the JWT), " +
        "JOIN_BROKER_URL, JOIN_BROKER_CLUSTER, JOIN_BROKER_NODE, JOIN_BROKER_PEER_URL and JOIN_BROKER_TICKET in its environment (its output goes to stderr). The agent " +
        "heartbeats while it runs, and completes once etcd lists a started voter with this node's peer URL. COMMAND may exit (an installer) or keep " +
        "running (a supervisor: the agent then stays in the foreground and passes signals on). If it fails before the node is a voter, the agent " +
        "removes this node's learner (never a voter), leaves the queue and exits 4.",
    ).argParser((command: string) => {
      if (command.trim() === "") throw new UsageError("--exec needs a command");
      return command;
    }),
    value(
      "--etcd <URL[,URL…]>",
      "etcd client URLs to ask (the cluster's, or this node's; default: --client-url). Also without --exec: the other controllers' " +
        "client URLs. Either way, before acting on a bootstrap ticket the agent asks them whether a cluster exists there already, and refuses (exit 3) if one answers",
      endpoints,
    ),
  );
  addEtcdTlsOptions(cmd, {
    mustExist: false,
    group: GATE,
    note: ". The three are read whenever etcd is asked, so they may be files the installer writes only while it joins.",
    withServerName: true,
  });
  group(
    GATE,
    new Option(
      "--service",
      "COMMAND is the node's long-running service (k0s controller, k3s server): run it again on every start, also once the node has joined, " +
        "and stay in the foreground while it runs. Without it, a joined node exits 0 at once.",
    ),
    new Option(
      "--cleanup <'COMMAND'>",
      "after a failed join attempt, once this node's member is gone from etcd (or given up on), run COMMAND with sh -c to put the node back where its " +
        "installer joins from (k0s: rm -rf /var/lib/k0s/pki /var/lib/k0s/etcd). Never after the node was a voter, never for the bootstrap node",
    ).argParser((command: string) => {
      if (command.trim() === "") throw new UsageError("--cleanup needs a command");
      return command;
    }),
    value(
      "--removal-timeout <SECONDS>",
      "how long an agent that gives up its turn tries to remove this node's non-voting member from etcd. Past it the agent tells the broker, " +
        "which pauses the cluster until an operator removes the member (the agent names it and the command) and resumes it; the agent exits 4",
      number({ min: 1, whole: true, unit: "seconds" }),
    ).default(120),
    value(
      "--rescue-etcd <PATH>",
      "when the installer added this node as a voter and failed before its etcd ran (k0s before 1.36), a small cluster has lost its quorum and etcd " +
        "removes nothing: run PATH as that member (a data dir of the agent's own) until quorum is back, then remove the member",
      path,
    ),
    value(
      "--rescue-pki <DIR>",
      "with --rescue-etcd and an https peer URL: the member's peer certificate as the installer makes it (DIR/ca.crt, DIR/peer.crt, DIR/peer.key)",
      path,
    ),
  );
  group(
    BEHAVIOUR,
    value("--timeout <SECONDS>", "give up joining after this long (0: never)", number({ unit: "seconds", note: "0: no limit" })).default(3600),
    value(
      "--join-api-patience <SECONDS>",
      "an admitted node that cannot reach the join API to be added for this long gives its slot back and queues again",
      number({ min: 1, whole: true, unit: "seconds" }),
    ).default(60),
    new Option(
      "--retry-revoked",
      "ask for a new place in the queue even though an admin revoked this node's last admission (without it, a revoked node stays refused)",
    ),
    logFormatOption("text, or json: one JSON object per line on stderr"),
    new Option("--verbose", "log every retry"),
    caFileOption(),
  );
  cmd.addHelpOption(new Option("-h, --help", "this help").helpGroup(BEHAVIOUR));
  cmd.addHelpText("after", AFTER);
  return cmd.runs(async (c) => withCaFile(c, () => runJoin(agentOptions(c))));
}

interface JoinValues {
  broker?: string;
  cluster?: string;
  token?: string;
  peerUrl?: string;
  listenPeerUrl?: string;
  joinApi?: string;
  stateDir?: string;
  node?: string;
  etcdBin?: string;
  apiserverEtcdClient?: true;
  dataDir?: string;
  clientUrl?: string;
  pkiDir?: string;
  etcdArg?: string[];
  printEtcdFlags?: true;
  exec?: string;
  etcd?: string[];
  service?: true;
  cleanup?: string;
  removalTimeout: number;
  rescueEtcd?: string;
  rescuePki?: string;
  timeout: number;
  joinApiPatience: number;
  retryRevoked?: true;
  logFormat: "text" | "json";
  verbose?: true;
}

/** The agent's options from the parsed command line: what the flags say together, defaults filled in. */
export function agentOptions(cmd: Command): AgentOptions {
  const v = cmd.opts<JoinValues>();
  const gate = v.exec !== undefined;
  const token = readSecret(cmd, "token", "tokenFile");
  // Every missing flag at once, not one per run. In gate mode a join API is optional: the
  // installer is told where it is (JOIN_BROKER_JOIN_API).
  requireAll([
    ...unset(cmd, "broker", "cluster"),
    ...(token === undefined ? [secretRequirement(cmd, "an enrollment token", "token", "tokenFile")] : []),
    ...unset(cmd, "peerUrl", ...(gate ? [] : ["joinApi"]), "stateDir"),
  ]);
  const gateOnly = cmd.options.filter((o) => GATE_ONLY.includes(o.attributeName()) && typed(cmd, o.attributeName()));
  if (!gate && gateOnly.length) throw new UsageError(`${gateOnly[0].long} is for gate mode: give it with --exec 'COMMAND'`);

  const stateDir = v.stateDir!;
  const pkiDir = v.pkiDir ?? null;
  const peerURL = v.peerUrl!;
  const listenPeerURL = v.listenPeerUrl ?? peerURL;
  const clientURL = v.clientUrl ?? (pkiDir ? "https://127.0.0.1:2379" : "http://127.0.0.1:2379");
  if (v.apiserverEtcdClient && !pkiDir)
    throw new UsageError("--apiserver-etcd-client goes with --pki-dir: the certificate is signed like the node's own, into that directory");
  if (pkiDir) {
    for (const [flag, url] of [
      ["--peer-url", peerURL],
      ["--listen-peer-url", listenPeerURL],
      ["--client-url", clientURL],
    ] as const) {
      if (!url.startsWith("https://")) throw new UsageError(`${flag} ${url} must be an https:// URL with --pki-dir (etcd serves TLS on every port)`);
    }
    for (const arg of v.etcdArg ?? []) {
      const name = /^--?([a-z0-9-]+)/.exec(arg)![1];
      if (RESERVED_TLS_FLAGS.includes(name))
        throw new UsageError(`--etcd-arg may not set --${name} with --pki-dir: the agent sets it from the files in ${pkiDir}`);
    }
  }
  return {
    brokerUrl: v.broker!,
    cluster: v.cluster!,
    token: bearerToken("the enrollment token", token!),
    node: v.node ?? ownNodeName(hostname().split(".")[0], "--node", undefined),
    peerURL,
    listenPeerURL,
    joinApiUrl: v.joinApi ?? "",
    stateDir,
    dataDir: v.dataDir ?? join(stateDir, "etcd"),
    clientURL,
    etcdBin: v.etcdBin ?? null,
    etcdArgs: v.etcdArg ?? [],
    printEtcdFlags: v.printEtcdFlags === true,
    retryRevoked: v.retryRevoked === true,
    timeoutSeconds: v.timeout,
    joinApiPatienceSeconds: v.joinApiPatience,
    exec: v.exec ?? null,
    etcdEndpoints: v.etcd ?? [clientURL],
    controllers: v.etcd ?? [],
    etcdTls: etcdTlsFiles(cmd),
    pkiDir,
    apiServerClient: v.apiserverEtcdClient === true,
    service: v.service === true,
    cleanup: v.cleanup ?? null,
    removalTimeoutSeconds: v.removalTimeout,
    rescue: rescueFiles(v.rescueEtcd, v.rescuePki, peerURL),
    logFormat: v.logFormat,
    verbose: v.verbose === true,
  };
}

/** The etcd an added, never-started voter runs to restore quorum (gate mode): --rescue-etcd, and --rescue-pki for https peers. */
function rescueFiles(etcdBin: string | undefined, pkiDir: string | undefined, peerURL: string): RescueFiles | null {
  if (pkiDir !== undefined && etcdBin === undefined) throw new UsageError("--rescue-pki goes with --rescue-etcd PATH");
  if (etcdBin === undefined) return null;
  if (pkiDir === undefined && peerURL.startsWith("https://")) {
    throw new UsageError(
      "--rescue-etcd with an https peer URL needs --rescue-pki DIR (ca.crt, peer.crt and peer.key of the member, as the installer makes them)",
    );
  }
  return { etcdBin, pkiDir: pkiDir ?? null };
}

/** The agent's options a `join-broker join` command line gives, or null for --help (for checks of a command line). */
export function parseJoin(argv: string[], env: NodeJS.ProcessEnv = process.env): AgentOptions | null {
  const cmd = parseOnly("join", defineJoin, argv, env);
  return cmd && agentOptions(cmd);
}

/** Runs the agent until it ends; the first signal stops it cleanly (etcd too), a second one at once. */
async function runJoin(options: AgentOptions): Promise<number> {
  const [{ runAgent }, { Stopped }, { createReporter }] = await Promise.all([
    import("../agent/agent.ts"),
    import("../agent/core/errors.ts"),
    import("../agent/core/progress.ts"),
  ]);
  const reporter = createReporter({ format: options.logFormat, node: options.node, verbose: options.verbose });
  const stop = stopOnSignals((signal) => new Stopped(signal));
  try {
    return await runAgent(options, { reporter, stop: stop.signal, print: (line) => process.stdout.write(`${line}\n`) });
  } finally {
    stop.release();
  }
}
