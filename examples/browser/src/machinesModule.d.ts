/** The machines module the build names (build.mjs resolves this specifier to it): any module of machines. */
declare module 'spool-example:machines';
