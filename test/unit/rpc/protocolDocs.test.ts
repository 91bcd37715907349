// docs/protocol.md is generated from protocol/companion/; this keeps the two from drifting and
// proves every documented example is a valid request and response.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { companionMethods, companionNotifications, type NotificationDefinition } from '../../../protocol/companion';
import type { z } from 'zod';
import { PROTOCOL_DOCS_PATH, renderProtocolDocs } from '../../../scripts/protocolDocs';

describe('companion protocol: docs/protocol.md', () => {
  it('is exactly what `npm run docs` generates from the method table', () => {
    assert.equal(fs.readFileSync(PROTOCOL_DOCS_PATH, 'utf8'), renderProtocolDocs(), 'run `npm run docs` and commit the result');
  });

  for (const def of Object.values(companionMethods)) {
    it(`${def.name}: the example params and result match the schemas`, () => {
      assert.equal(def.params.safeParse(def.example.params).success, true, JSON.stringify(def.params.safeParse(def.example.params)));
      assert.equal(def.result.safeParse(def.example.result).success, true, JSON.stringify(def.result.safeParse(def.example.result)));
    });
  }

  for (const n of Object.values(companionNotifications) as NotificationDefinition<z.ZodType>[]) {
    it(`${n.name}: the example matches the schema`, () => {
      assert.equal(n.params.safeParse(n.example).success, true);
    });
  }
});
