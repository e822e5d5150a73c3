/**
 * Shorthands for OpenAPI route declarations.
 * @module
 */
import { Problem } from "../../shared/protocol/schemas.ts";

export const json = <T>(schema: T) => ({ content: { "application/json": { schema } } });

/** A documented problem answer: RFC 9457 bodies are application/problem+json. */
export const problemDoc = (description: string) => ({ description, content: { "application/problem+json": { schema: Problem } } });
