import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONSOLE_MODULE, consoleModule } from "../../../scripts/build-console.mjs";
import { CONSOLE_HTML } from "./page.ts";
import { CONSOLE_JS } from "./script.generated.ts";
import { CONSOLE_CSP } from "./console-routes.ts";

describe("console assets", () => {
  it("the served script is the bundle of src/broker/console/app as it is now (else: npm run build:console)", async () => {
    const committed = readFileSync(join(import.meta.dirname, "../../..", CONSOLE_MODULE), "utf8");
    expect(committed, `${CONSOLE_MODULE} is stale: run \`npm run build:console\``).toBe(await consoleModule());
  });

  it("the script is one module that imports nothing (the page loads no other script)", async () => {
    expect(CONSOLE_JS).not.toMatch(/^\s*(import|export)\b/m);
    // It parses; the page loads it as a module, and it has no import or export to resolve.
    expect(() => new Function(CONSOLE_JS)).not.toThrow();
  });

  it("the page loads only its own assets, with no inline script or style, and one password input", () => {
    const sources = [...CONSOLE_HTML.matchAll(/(?:src|href)="([^"#]+)"/g)].map((m) => m[1]);
    expect(sources.length).toBeGreaterThan(2);
    for (const s of sources) expect(s).toMatch(/^\/console\//);
    expect(CONSOLE_HTML).not.toMatch(/<script(?![^>]*\bsrc=)/);
    expect(CONSOLE_HTML).not.toMatch(/<style|\sstyle=|\son[a-z]+=/);
    expect(CONSOLE_HTML.match(/type="password"/g)).toHaveLength(1);
    // A field without a name is never part of a form submission, so the token cannot reach a URL.
    expect(CONSOLE_HTML).toMatch(/<input id="token" type="password"/);
    expect(/<input[^>]*type="password"[^>]*>/.exec(CONSOLE_HTML)![0]).not.toMatch(/\bname=/);
    expect(CONSOLE_CSP).not.toContain("unsafe");
  });
});
