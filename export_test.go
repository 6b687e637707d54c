package skiplock

// MigrateFS exposes migrateFS to the external tests, which replay the migrations as they were
// in git history to prove that rewriting them changed nothing.
var MigrateFS = migrateFS
