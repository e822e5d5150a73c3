/** `join-broker admin` (not implemented yet). */
import { EXIT } from "./exit-codes.ts";

export async function run(_argv: string[]): Promise<number> {
  process.stderr.write("join-broker admin: not implemented yet\n");
  return EXIT.failure;
}
