// The layout's rules (src/broker: workerd; src/node: Node; src/shared: the contract both use),
// checked by `npm test` (scripts/boundaries.mjs). Tests may import across the line; shipped
// code may not.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-cycles",
      severity: "error",
      comment: "A module may not import itself back through others.",
      from: { pathNot: "\\.test\\.ts$" },
      to: { circular: true },
    },
    {
      name: "no-folder-cycles",
      severity: "error",
      comment: "Folders are rooms: one imports another, never back (through others or directly).",
      scope: "folder",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "broker-not-node",
      severity: "error",
      comment: "The broker runs in workerd: it never imports the node side.",
      from: { path: "^src/broker/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/" },
    },
    {
      name: "node-not-broker",
      severity: "error",
      comment: "The node side runs in Node: it never imports the broker (the contract lives in src/shared).",
      from: { path: "^src/node/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/broker/" },
    },
    {
      name: "only-cli-knows-flags",
      severity: "error",
      comment:
        "Flags, help and their checks live in src/node/cli, which reads the command line into typed options for the rest: nothing else on the node side imports it.",
      from: { path: "^src/node/", pathNot: "^src/node/cli/|\\.test\\.ts$" },
      to: { path: "^src/node/cli/" },
    },
    {
      name: "shared-imports-neither",
      severity: "error",
      comment: "The shared contract imports neither the broker nor the node side.",
      from: { path: "^src/shared/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/(broker|node)/" },
    },
    {
      name: "shared-no-node-builtins",
      severity: "error",
      comment: "The shared contract runs in workerd too: no Node built-ins.",
      from: { path: "^src/shared/", pathNot: "\\.test\\.ts$" },
      to: { dependencyTypes: ["core"] },
    },
    {
      name: "broker-no-node-builtins",
      severity: "error",
      comment: "The broker runs in workerd without Node compatibility: no Node built-ins.",
      from: { path: "^src/broker/", pathNot: "\\.test\\.ts$" },
      to: { dependencyTypes: ["core"] },
    },
    {
      name: "console-script-browser-only",
      severity: "error",
      comment: "The console's script runs in the browser: it imports only its own modules and the shared contract.",
      from: { path: "^src/broker/console/app/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/", pathNot: "^src/(broker/console/app|shared)/" },
    },
    {
      name: "worker-not-console-script",
      severity: "error",
      comment: "The Worker serves the console's script as text (script.generated.ts); it never imports its browser modules.",
      from: { path: "^src/", pathNot: "^src/broker/console/app/|\\.test\\.ts$" },
      to: { path: "^src/broker/console/app/" },
    },
    // The agent's rooms (src/node/agent), from the bottom up: core/ (options, errors, progress,
    // retry, lease) ← files/ (state files, data-dir rules) ← local-etcd/ (this node's etcd) and
    // steps/ (the steps both modes share, the MemberRunner seam) ← own-etcd/ and gate/ (one
    // runner each) ← agent.ts, which picks the mode. Tests may reach across.
    {
      name: "agent-core-below-all",
      severity: "error",
      comment: "The agent's core (options, errors, progress, retry, lease) imports no other room of the agent.",
      from: { path: "^src/node/agent/core/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/agent/", pathNot: "^src/node/agent/core/" },
    },
    {
      name: "agent-files-on-core-only",
      severity: "error",
      comment: "The agent's files (state, data-dir rules, marker) build on its core alone.",
      from: { path: "^src/node/agent/files/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/agent/", pathNot: "^src/node/agent/(core|files)/" },
    },
    {
      name: "agent-local-etcd-knows-no-steps",
      severity: "error",
      comment: "Running this node's etcd knows nothing of the steps or the modes that use it.",
      from: { path: "^src/node/agent/local-etcd/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/agent/", pathNot: "^src/node/agent/(core|files|local-etcd)/" },
    },
    {
      name: "agent-steps-mode-free",
      severity: "error",
      comment: "The steps both modes share reach a mode only through the MemberRunner seam: they import neither runner nor the etcd one of them runs.",
      from: { path: "^src/node/agent/steps/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/agent/", pathNot: "^src/node/agent/(core|files|steps)/" },
    },
    {
      name: "agent-own-etcd-not-gate",
      severity: "error",
      comment: "Own etcd and gate mode are two implementations of one seam: neither imports the other.",
      from: { path: "^src/node/agent/own-etcd/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/agent/gate/" },
    },
    {
      name: "agent-gate-not-own-etcd",
      severity: "error",
      comment: "Gate mode imports neither the own-etcd runner nor local-etcd/: the installer adds the member and runs etcd.",
      from: { path: "^src/node/agent/gate/", pathNot: "\\.test\\.ts$" },
      to: { path: "^src/node/agent/(own-etcd|local-etcd)/" },
    },
    {
      name: "not-to-unresolvable",
      severity: "error",
      comment: "An import that resolves to nothing is a typo or a missing dependency.",
      from: {},
      to: { couldNotResolve: true, pathNot: "^cloudflare:" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
