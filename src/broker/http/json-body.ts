/**
 * Whether a request body is what every route takes: UTF-8 text holding one JSON value.
 * @module
 */

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** Why the body is not UTF-8 JSON, or null when it is (an empty body is left to the route). */
export function jsonBodyProblem(bytes: ArrayBuffer | Uint8Array): string | null {
  if (bytes.byteLength === 0) return null;
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return "the request body is not valid UTF-8";
  }
  if (text.trim() === "") return null;
  try {
    JSON.parse(text);
  } catch {
    return "the request body is not valid JSON";
  }
  return null;
}
