// `npm run bench [-- --quick] [-- --only broker,handoff,serve,scale,verifier,join]`: runs the
// benchmarks (TypeScript, through tsx) and writes bench/results.json and BENCHMARKS.md.
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
try {
  process.exitCode = await main(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`bench: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
}
