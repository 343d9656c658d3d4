import { register } from 'tsx/esm/api';
import { register as hook } from 'node:module';
register();
hook('file:///tmp/hooks-test.mjs');
const p = process.argv[2];
try { const ns = await import(p); console.log('ok', Object.keys(ns), ns.default[0].machine.id); } catch (e) { console.log('fail', e.message.split('\n')[0]); }
