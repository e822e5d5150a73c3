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
