/** What every store says of its faults, whatever the driver. */

/** How to check and restore, said by every damaged-file error. */
export const CHECK = 'Check it with `spool doctor`, repair it with `spool doctor --repair`, or restore it from a backup.';

/**
 * Route every method of a store class through the driver's fault mapping (`mapError`): one wrapper for every entry
 * point, not a try/catch per method. A method's rejection (or throw) is mapped (`mapError`, given the instance); what it
 * returns is passed on as it is.
 */
export function guardEntryPoints<T extends object>(
  cls: { prototype: T },
  mapError: (self: T, error: unknown, call: string) => unknown,
): void {
  const proto = cls.prototype as Record<string, unknown>;
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(proto, name);
    const method = descriptor?.value as ((...a: unknown[]) => unknown) | undefined;
    if (typeof method !== 'function') continue;
    const guarded = function (this: T, ...args: unknown[]): unknown {
      const fault = (error: unknown) => {
        throw mapError(this, error, name);
      };
      let result: unknown;
      try {
        result = method.apply(this, args);
      } catch (error) {
        return fault(error);
      }
      return result instanceof Promise ? result.then(undefined, fault) : result;
    };
    Object.defineProperty(guarded, 'name', { value: name });
    Object.defineProperty(proto, name, { ...descriptor, value: guarded });
  }
}
