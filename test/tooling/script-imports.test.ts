/**
 * The plain-JavaScript scripts (scripts/*.mjs, bench/*.mjs) take names from the TypeScript
 * sources, tests and lab with `import { … } from` and `const { … } = await import(…)`. The type
 * check does not read .mjs files, so a name moved or renamed in a .ts file would break a script
 * only when it runs (a demo, a campaign, a benchmark). This reads each such import and checks
 * every name against the module's exports, as the TypeScript compiler sees them (nothing is run).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const SCRIPT_DIRS = ["scripts", "bench"];

interface NamedImport {
  script: string;
  target: string;
  names: string[];
}

/** `import { a, b as c } from "x.ts"` and `const { a, b: c } = await import("x.ts")` of a .ts module. */
function namedTsImports(script: string, source: string): NamedImport[] {
  const found: NamedImport[] = [];
  const patterns = [/import\s*\{([^}]*)\}\s*from\s*"([^"]+\.ts)"/g, /const\s*\{([^}]*)\}\s*=\s*await\s+import\(\s*"([^"]+\.ts)"\s*\)/g];
  for (const pattern of patterns) {
    for (const m of source.matchAll(pattern)) {
      const names = m[1]!
        .split(",")
        .map((n) =>
          n
            .trim()
            .replace(/^type\s+/, "")
            .split(/\s+as\s+|\s*:\s*/)[0]!
            .trim(),
        )
        .filter((n) => n.length > 0);
      found.push({ script, target: resolve(dirname(script), m[2]!), names });
    }
  }
  return found;
}

function scriptFiles(): string[] {
  return SCRIPT_DIRS.flatMap((d) =>
    readdirSync(join(ROOT, d), { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".mjs") && !f.includes("node_modules"))
      .map((f) => join(ROOT, d, f)),
  );
}

describe("the scripts' imports from TypeScript modules", () => {
  it("reads both forms of a named import, with renames and type-only names", () => {
    const src = 'import { a, b as c } from "./x.ts";\nconst { d, e: f } = await import("../y/z.ts");\nimport { g } from "./plain.mjs";';
    expect(namedTsImports("/r/s/m.mjs", src)).toEqual([
      { script: "/r/s/m.mjs", target: "/r/s/x.ts", names: ["a", "b"] },
      { script: "/r/s/m.mjs", target: "/r/y/z.ts", names: ["d", "e"] },
    ]);
  });

  it("name only what each module exports", () => {
    const imports = scriptFiles().flatMap((f) => namedTsImports(f, readFileSync(f, "utf8")));
    expect(imports.length).toBeGreaterThan(10);
    const targets = [...new Set(imports.map((i) => i.target))];
    const program = ts.createProgram(targets, {
      target: ts.ScriptTarget.ES2023,
      module: ts.ModuleKind.ES2022,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      allowImportingTsExtensions: true,
      resolveJsonModule: true,
      noEmit: true,
      skipLibCheck: true,
    });
    const checker = program.getTypeChecker();
    const exportsOf = new Map(
      targets.map((t) => {
        const file = program.getSourceFile(t);
        const symbol = file && checker.getSymbolAtLocation(file);
        return [t, new Set(symbol ? checker.getExportsOfModule(symbol).map((s) => s.name) : [])] as const;
      }),
    );
    const missing = imports.flatMap((i) =>
      i.names.filter((n) => !exportsOf.get(i.target)!.has(n)).map((n) => `${i.script.slice(ROOT.length + 1)}: ${n} from ${i.target.slice(ROOT.length + 1)}`),
    );
    expect(missing).toEqual([]);
  }, 120_000);
});
