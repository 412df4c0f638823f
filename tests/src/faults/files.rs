//! Files copied into `FILES_PATH/watch` while the tree is under load, as
//! a download client drops them there: each one new content (so each is
//! one `add`, never a `rename` of another), copied with `std::fs::copy`
//! from a source folder outside `FILES_PATH`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use tokio::task::JoinHandle;

/// The copier, running until [`Copier::stop`].
#[derive(Debug)]
pub struct Copier {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<String>>,
}

impl Copier {
    /// Copies a file every `every` from `source` (made if missing) into
    /// `watch`, named `f-<n>.bin`.
    pub fn start(source: &Path, watch: &Path, every: Duration) -> Self {
        std::fs::create_dir_all(source).expect("make the copier's source folder");
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(copy_files(
            source.to_owned(),
            watch.to_owned(),
            every,
            stop.clone(),
        ));
        Self { stop, task }
    }

    /// Stops copying; the paths copied, relative to `FILES_PATH`
    /// (`watch/f-<n>.bin`, as `file:events` names them).
    pub async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the copier panicked")
    }
}

/// `len` random bytes: content no other file has.
fn content(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rand::rng().fill(&mut bytes[..]);
    bytes
}

async fn copy_files(
    source: PathBuf,
    watch: PathBuf,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Vec<String> {
    let mut copied = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let name = format!("f-{n}.bin");
        let len = rand::rng().random_range(4096..64 * 1024);
        let (from, to) = (source.join(&name), watch.join(&name));
        tokio::task::spawn_blocking(move || {
            std::fs::write(&from, content(len)).expect("write a source file");
            std::fs::copy(&from, &to).expect("copy a file into watch/");
            std::fs::remove_file(&from).expect("remove the source file");
        })
        .await
        .expect("the copy panicked");
        copied.push(format!("watch/{name}"));
        n += 1;
        tokio::time::sleep(every).await;
    }
    copied
}
