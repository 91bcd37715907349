// Imported first by the extension's entry point. zod compiles object parsers with `new Function`
// after probing `navigator`, and VS Code's extension host answers that probe with an error-level
// `PendingMigrationError` log line on every start. The interpreted parsers are fast enough for
// what crosses the extension's boundaries, so the extension runs zod without its JIT.
import { z } from 'zod';

z.config({ jitless: true });
