// SPDX-License-Identifier: MIT
// Node.js timers, run under the preload shim by tests/preload/preload_apps.py.
//
//     node cases.js CASE
//
// Prints "ready" just before one wait of 5 s, then "done M0 M1 OUTCOME"
// (process.hrtime.bigint() before and after; OUTCOME "timeout" when the
// timer fired as a timeout should).
'use strict';
const { execFile } = require('child_process');

const W = 5000;
const m0 = process.hrtime.bigint();
const done = (ok) => {
  const m1 = process.hrtime.bigint();
  console.log(`done ${m0} ${m1} ${ok ? 'timeout' : 'no-timeout'}`);
  process.exit(0);
};
const cases = {
  setTimeout: () => setTimeout(() => done(true), W),
  setInterval: () => {
    // Five ticks of 1 s.
    let n = 0;
    const t = setInterval(() => { if (++n === 5) { clearInterval(t); done(true); } }, W / 5);
  },
  execFile: () => {
    // The child sleeps for 100 s (simulated, it runs under the shim too);
    // the timeout kills it after 5.
    execFile('sleep', ['100'], { timeout: W }, (err) => done(err !== null && err.killed));
  },
};
const c = cases[process.argv[2]];
if (!c) {
  console.error(`usage: cases.js {${Object.keys(cases).join('|')}}`);
  process.exit(2);
}
console.log('ready');
c();
