// The extension activates in a real VS Code and contributes what it declares.
import assert from 'node:assert/strict';
import * as vscode from 'vscode';

const EXTENSION_ID = 'sandbox-sessions.sandbox-sessions';

describe('extension activation', () => {
  it('is installed from the development path and activates', async () => {
    const extension = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(extension, `${EXTENSION_ID} is not loaded`);
    await extension.activate();
    assert.equal(extension.isActive, true);
  });
});
