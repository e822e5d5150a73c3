// `npm run bench [-- --quick] [-- --only broker,handoff,scale,verifier,join]`: runs the
// benchmarks (TypeScript, through tsx) and writes bench/results.json and BENCHMARKS.md.
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
