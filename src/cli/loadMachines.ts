import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { collectDefinitions, type Definition } from '../internal.ts';
import { MachinesModuleError, firstLine } from './errors.ts';
import { OWN_EXTENSION, ownModule } from '../loader/ownFiles.ts';

/** The project's reference machines: what `spool` loads without `--machines`. */
export const DEFAULT_MACHINES_MODULE = ownModule('../../machines/index', import.meta.url);

export { collectDefinitions, type Definition };

let loaderReady: 'hooks' | 'typescript' | undefined;

/**
 * Before the built CLI imports a user's module: the hooks of src/loader (ESM outside a
 * type:module package, and `xstate`/`zod` from Spool's install when the module has none), and
 * for a TypeScript module tsx as well, registered only then (it costs a tenth of a second).
 * Spool run from its sources already runs under a TypeScript loader (tsx, vitest), as before.
 */
async function prepareLoader(path: string): Promise<void> {
  if (OWN_EXTENSION === '.ts' || loaderReady === 'typescript') return;
  // The order of src/loader/register.mjs: hooks.mjs first, then tsx (tsx's resolve calls hooks.mjs's).
  if (loaderReady === undefined) register('../loader/hooks.mjs', import.meta.url);
  loaderReady = 'hooks';
  if (/\.[mc]?tsx?$/.test(path)) {
    const { register: registerTsx } = await import('tsx/esm/api');
    registerTsx();
    loaderReady = 'typescript';
  }
}

/**
 * Import a machines module (`.ts` or `.js`; relative paths are resolved against `cwd`) and
 * collect its machines. Throws {@link MachinesModuleError} when the file is missing, fails to
 * load, or exports no machines.
 */
export async function loadMachines(modulePath: string, cwd: string): Promise<{ path: string; definitions: Definition[]; namespace: Record<string, unknown> }> {
  const path = resolve(cwd, modulePath);
  if (!existsSync(path)) {
    throw new MachinesModuleError(`No machines module at ${path}. Pass --machines a .ts or .js file that exports your machines.`, { path });
  }
  let namespace: Record<string, unknown>;
  try {
    await prepareLoader(path);
    namespace = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    // Node 20 also reports an error thrown while loading a CommonJS module that an ES module
    // imports as an unhandled rejection (nodejs/node#51603), which would print its stack: that
    // same error is reported here, in one line.
    const same = (reason: unknown) => {
      if (reason !== error) throw reason;
    };
    process.on('unhandledRejection', same);
    setImmediate(() => process.off('unhandledRejection', same));
    const reason = error instanceof Error ? error.message : String(error);
    throw new MachinesModuleError(`Could not load machines module ${path}: ${firstLine(reason)}`, { path });
  }
  const definitions = collectDefinitions(namespace);
  if (definitions.length === 0) {
    const names = Object.keys(namespace);
    throw new MachinesModuleError(
      `No machines found in ${path} (exports: ${names.length ? names.join(', ') : 'none'}). ` +
        'Export XState machines (createMachine / setup().createMachine) or job definitions ({ machine, version, input, events }), ' +
        'e.g. `export const order = createMachine({ id: "order", ... })`.',
      { path, exports: names },
    );
  }
  return { path, definitions, namespace };
}
