// zod compiles a parser for each object schema (`new Function`) the first time it parses with it: worth it
// in the daemon and the servers, which parse the same schemas all day, but not in a short-lived command,
// which parses each schema a few times and pays that compile on every call — generated code is never in a
// code cache (issue 25: 5–10 ms of a `sandbox exec`). zod keeps its configuration on globalThis, so that
// every copy of zod in a process shares it (zod/v4/core/core.js); the dispatcher sets `jitless` there
// before a short-lived command's bundle builds its first schema, without loading zod for it.
// test/unit/cli/zodJitless.test.ts holds the pinned zod to that.

/** Makes every zod schema built from now on parse without generated code (same results, no compile). */
export function parseSchemasWithoutJit(): void {
  const slot = globalThis as { __zod_globalConfig?: Record<string, unknown> };
  slot.__zod_globalConfig = Object.assign(slot.__zod_globalConfig ?? {}, { jitless: true });
}
