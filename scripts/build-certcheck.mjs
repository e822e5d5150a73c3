// Builds certcheck (integrations/go/cmd/certcheck, the tests' judge of certificates: Go's
// crypto/x509, as etcd judges them) once per machine and source version, as the tests would on
// their first use (test/support/certcheck.ts); `npm test` runs it before the end-to-end tests.
// Prints the binary's path.
import { tsImport } from "tsx/esm/api";

const { certcheckBinary } = await tsImport("../test/support/certcheck.ts", import.meta.url);
process.stdout.write(`${certcheckBinary()}\n`);
