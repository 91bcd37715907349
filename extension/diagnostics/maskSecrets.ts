// A second line of defence for text that leaves the machine in a support report: nothing in Sandbox Sessions logs a
// secret, but a message may quote what a server or a command printed. Bearer tokens, URL passwords and the values of
// token-, key-, password- and secret-named fields are replaced by `<masked>`.
const PATTERNS: readonly [RegExp, string][] = [
  // Authorization: Bearer <token>
  [/\b(Bearer\s+)[A-Za-z0-9._~+/=-]+/gi, '$1<masked>'],
  // postgres://user:password@host, https://user:password@host
  [/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:)[^\s@/]+@/gi, '$1<masked>@'],
  // token=…, "apiKey": "…", OPEN-SANDBOX-API-KEY: …, password: …
  [/\b([\w-]*(?:token|api[-_]?key|password|passwd|secret)["']?\s*[:=]\s*["']?)(?!<masked>)[^\s"',;}&]+/gi, '$1<masked>'],
];

export function maskSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}
