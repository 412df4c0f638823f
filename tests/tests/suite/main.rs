//! The end-to-end suite: one test binary, one module per behaviour, each
//! starting the real daemons through the harness in `tests/src`. Build the
//! binaries first (`cargo build --workspace --bins`), then
//! `cargo test -p e2e --test suite [module::]`.

mod admin_access;
mod apid_bad_input;
mod apid_editor_kv;
mod apid_events;
mod apid_files;
mod apid_lifecycle;
mod apid_meta;
mod apid_openapi;
mod apid_port_budget;
mod apid_registry;
mod apid_search;
mod apid_slow_clients;
mod apid_snapshot;
mod apid_snapshot_http;
mod backup;
mod body_memory;
mod console;
mod container;
mod daemon_args;
mod disk_full;
mod docs_complete;
mod faults;
mod file_modes;
mod leader_file;
mod metrics;
mod mountd;
mod mountd_confined;
mod mountd_faults;
mod mountd_mounts;
mod mountd_tree;
mod path_traversal;
mod relayed;
mod security;
mod storage_faults;
mod storaged_bad_input;
mod storaged_crash;
mod storaged_events;
mod storaged_lifecycle;
mod storaged_records;
mod supervisor;
mod watcherd;
mod watcherd_excluded;
mod watcherd_names;
mod watcherd_renames;
mod watcherd_repair;
mod webdav;
mod webdav_copy;
mod webdav_locks;
mod webdav_mounts;
mod webdav_raw;
mod webdav_shares;
mod webdav_writes;
