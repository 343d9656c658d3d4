export { DatabaseBusyError, NotASpoolDatabaseError, SqliteStore, loadMigrations, type SqliteStoreOptions } from './SqliteStore.ts';
export { doctor, checkDatabase, type DoctorReport, type DoctorFinding, type DoctorOptions } from './doctor.ts';
