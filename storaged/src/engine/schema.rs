//! Opening the database: the `kv` table exactly as the seeds define it, the
//! pragmas, the schema-version gate and the one-time build of the counters.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Result, StoreError};

/// The layout this build reads and writes.
pub(crate) const SCHEMA_VERSION: &str = "2";
pub(crate) const SCHEMA_KEY: &str = "meta-core:schema-version";
pub(crate) const COUNT_ROOTS_KEY: &str = "idx:count/roots";
pub(crate) const COUNT_READY_KEY: &str = "idx:count/ready";

/// A connection that closes last neither checkpoints nor removes the WAL:
/// the writer's own TRUNCATE checkpoint ends a clean stop, and a WAL that
/// belongs to a database put back after its removal (`faults`) must reach
/// the next start as it is.
pub(crate) fn keep_wal_on_close(conn: &Connection) -> Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    Ok(())
}

/// Pragmas shared by the writer and the readers.
pub(crate) fn common_pragmas(conn: &Connection, cache_mb: u32) -> Result<()> {
    keep_wal_on_close(conn)?;
    conn.pragma_update(None, "cache_size", -(i64::from(cache_mb) * 1024))?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}

/// Sets the writer connection up: WAL, `synchronous=NORMAL`, the table.
pub(crate) fn prepare_writer(conn: &Connection, cache_mb: u32) -> Result<()> {
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::SchemaGate(format!(
            "the database refused WAL mode (got {mode}); is it on a filesystem without shared memory?"
        )));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Checkpoints run on their own thread (see `checkpointer`).
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    // After a restart of the WAL, shrink its file back to this size.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    common_pragmas(conn, cache_mb)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;",
    )?;
    Ok(())
}

/// The gate of the seeds: write the sentinel on a fresh store, refuse to
/// boot on legacy data or another version.
pub(crate) fn gate(conn: &Connection) -> Result<()> {
    let found: Option<String> = conn
        .query_row("SELECT v FROM kv WHERE k = ?1", [SCHEMA_KEY], |r| r.get(0))
        .optional()?;
    match found {
        Some(v) if v == SCHEMA_VERSION => Ok(()),
        Some(v) => {
            let newer = matches!(
                (v.parse::<u64>(), SCHEMA_VERSION.parse::<u64>()),
                (Ok(found), Ok(ours)) if found > ours
            );
            let what_to_do = if newer {
                "a newer meta-core wrote it: run that build, or export its records with that build \
                 (GET /api/snapshot/export) and import them into a fresh store here; \
                 the file was left as it is"
            } else {
                "there is no automated migration: export what you need, wipe the database and restart"
            };
            Err(StoreError::SchemaGate(format!(
                "the store has schema version {v:?}, this build reads version {SCHEMA_VERSION:?}; {what_to_do}"
            )))
        }
        None => {
            let legacy: Option<String> = conn
                .query_row(
                    "SELECT k FROM kv WHERE (k >= 'idx:roots/' AND k < 'idx:roots0') \
                     OR (k >= 'file:' AND k < 'file;') LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(k) = legacy {
                return Err(StoreError::SchemaGate(format!(
                    "the store holds records but no {SCHEMA_KEY} sentinel (first such key: {k:?}): \
                     this is legacy data from before the UUID-rooted schema; wipe the database and restart"
                )));
            }
            conn.execute(
                "INSERT INTO kv(k, v) VALUES (?1, ?2)",
                params![SCHEMA_KEY, SCHEMA_VERSION],
            )?;
            Ok(())
        }
    }
}

/// Builds `idx:count/roots` once, when `idx:count/ready` is absent.
/// Returns whether it had to.
/// The number of records (`idx:count/roots`).
pub(crate) fn root_count(conn: &Connection) -> Result<u64> {
    let v = crate::engine::rows::get(conn, COUNT_ROOTS_KEY)?.unwrap_or_default();
    v.parse::<u64>().map_err(|e| StoreError::Corrupt {
        key: COUNT_ROOTS_KEY.into(),
        detail: e.to_string(),
    })
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction on `conn` (outside the
/// writer, at open): committed when it succeeds, rolled back when not.
pub(crate) fn in_transaction<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f() {
        Ok(v) => {
            conn.execute_batch("COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

pub(crate) fn build_counters(conn: &Connection) -> Result<bool> {
    let ready: Option<String> = conn
        .query_row("SELECT v FROM kv WHERE k = ?1", [COUNT_READY_KEY], |r| {
            r.get(0)
        })
        .optional()?;
    if ready.is_some() {
        return Ok(false);
    }
    let roots: i64 = conn.query_row(
        "SELECT count(*) FROM kv WHERE k >= 'idx:roots/' AND k < 'idx:roots0'",
        [],
        |r| r.get(0),
    )?;
    conn.execute(
        "INSERT INTO kv(k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
        params![COUNT_ROOTS_KEY, roots.to_string()],
    )?;
    conn.execute(
        "INSERT INTO kv(k, v) VALUES (?1, '1') ON CONFLICT(k) DO UPDATE SET v = '1'",
        [COUNT_READY_KEY],
    )?;
    Ok(true)
}
