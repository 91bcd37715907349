// Lint: typescript-eslint's recommended rules plus the design's layering
// (extension → protocol ← server; protocol imports nothing of ours).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const layer = (from, forbidden) => ({
  files: [`${from}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      { patterns: forbidden.map((f) => ({ group: [`**/${f}/**`, `**/${f}`], message: `${from}/ must not import ${f}/ (see DESIGN.md layering)` })) },
    ],
  },
});

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.vscode-host/**', '.test-tmp/**', 'bench/out/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  layer('protocol', ['server', 'extension']),
  layer('extension', ['server']),
  layer('server', ['extension']),
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
