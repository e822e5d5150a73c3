/**
 * The entry of the single executable file (scripts/package.mjs bundles it as CommonJS, which Node's
 * single executable applications run): `join-broker` as bin/join-broker runs it, without top-level await.
 * @module
 */
import { main } from "./main.ts";

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
